#!/usr/bin/env bash
# Rebuild the real-code suite shipped in ac_env/tasks/real/data/ from PyPI.
#
#   bash scripts/build_real_suite.sh [BUILD_DIR]
#
# Mines every library below (pinned versions, seed 0, one mutant at a time, so the same miner
# gives the same tasks), runs the reference agent on each single bug, composes the long
# split's multi-bug tasks from the bugs it fixed alone, and packs both into the
# package's data directory. Resumable: rerun after an interruption. About two hours of CPU on
# 2 cores; the build directory (default ~/.cache/autocompact/real-build) keeps everything.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${AUTOCOMPACT_CACHE:-$HOME/.cache/autocompact}/real-build}
# The shipped data was mined before the miner's per-function cap existed: --max-per-function
# 1000 reproduces it, and `pack --max-per-function 4` spreads the suite over functions instead.
build=(.venv/bin/ac-env tasks build --out "$out" --seed 0 --jobs 1 --max-per-function 1000 --no-progress)
long=(.venv/bin/ac-env tasks long "$out" --seed 0 --bugs 5-6 --per-file 2 --solved-alone --solo-peak-at-most 20000)

"${build[@]}" --max-tasks 29 boltons==26.2.0
"${build[@]}" --max-tasks 50 toolz==1.2.0 cachetools==8.0.2 semver==3.1.2
"${build[@]}" --max-tasks 45 parse==1.22.4 isodate==0.7.2 inflection==0.5.1 tabulate==0.10.0 \
  colorama==0.4.6
"${build[@]}" --max-tasks 40 mistune==3.4.0
# The long split draws only bugs the reference agent fixes alone (<slug>/solo.jsonl).
.venv/bin/python -m ac_env.bench.solo "$out" --workers 2 \
  --libraries boltons-26.2.0 cachetools-8.0.2 toolz-1.2.0 isodate-0.7.2
"${long[@]}" --per-library 16 --libraries boltons-26.2.0
"${long[@]}" --per-library 10 --libraries cachetools-8.0.2 toolz-1.2.0 isodate-0.7.2
.venv/bin/ac-env tasks pack "$out" --into ac_env/tasks/real/data --held-out isodate colorama \
  --max-per-function 4
.venv/bin/python benchmarks/real_suite.py
