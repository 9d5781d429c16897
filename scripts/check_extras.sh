#!/usr/bin/env bash
# The install a user without a clone makes: build the wheel, install it (alone, then with each
# trainer extra) into a fresh venv, and from outside the repository import what the extra is for.
#
#   bash scripts/check_extras.sh [EXTRA ...]     # default: base trl openenv skyrl
#   bash scripts/check_extras.sh verifiers       # not in the default: its install took 510 s
#   bash scripts/check_extras.sh verl art        # by hand: verl's extra alone installs 131 packages
#
# "base" is the wheel alone: gym.make("AutoCompact-SWE-v0") and reset on the built-in and the
# real-code suites, which checks that the package data (task repositories, the real suites'
# tarballs, catalog.json, timing policies) is in the wheel. Extras that need torch get the CPU
# build pinned by the project (torch==2.13.0) first: an unpinned torch pulls a multi-GB CUDA build.
# Each venv is removed when its check ends; the wheel is left in dist/.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
extras=("$@")
[ ${#extras[@]} -gt 0 ] || extras=(base trl openenv skyrl)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
started=$SECONDS
rm -f dist/autocompact-*.whl
python3 -m pip wheel . --no-deps -q --disable-pip-version-check -w dist
wheel=$(ls "$repo"/dist/autocompact-*.whl)
echo "check_extras: built $(basename "$wheel") in $((SECONDS - started)) s"

# What each extra's user imports, run from outside the repository (so only the wheel is seen).
declare -A probe=(
  [base]='import gymnasium as gym, ac_env
for source in ("builtin", "real"):
    env = gym.make("AutoCompact-SWE-v0", task_source=source)
    _, info = env.reset(seed=0)
    env.close()
    print(source, info["instance_id"])
assert "site-packages" in ac_env.__file__, ac_env.__file__'
  [trl]='from ac_train.integrations.trl import AutoCompactRollout, TRLRolloutConfig'
  [openenv]='from ac_env.integrations.openenv_server import ServeOptions, make_app
from ac_env.integrations.openenv_client import AutoCompactEnvClient
make_app(ServeOptions())'
  [skyrl]='from ac_env.integrations.skyrl import register
register()'
  [verifiers]='from autocompact_swe import load_environment
env = load_environment(env={"split": "easy"}, seeds=[0, 1])
print(type(env).__name__, [task.data.name for task in env.taskset])'
  [verl]='from ac_train.integrations.verl_agent_loop import AGENT_NAME, AutoCompactAgentLoop'
  [art]='from ac_train.integrations.art_rollout import AutoCompactScenario, rollout
AutoCompactScenario(env={"split": "easy"})'
)
declare -A needs_torch=([trl]=1 [train]=1 [verl]=1)
# What a user installs beside the wheel for an extra: verifiers loads its environment by the
# hub package's id (autocompact-swe), a package of its own (docs/verifiers.md).
declare -A beside=([verifiers]="$repo/environments/autocompact_swe")

for extra in "${extras[@]}"; do
  [ -n "${probe[$extra]:-}" ] || { echo "check_extras: no probe for extra '$extra'" >&2; exit 2; }
  t0=$SECONDS
  venv="$work/$extra"
  python3 -m venv "$venv"
  pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
  [ -z "${needs_torch[$extra]:-}" ] || "${pip[@]}" torch==2.13.0
  if [ "$extra" = base ]; then "${pip[@]}" "$wheel"; else "${pip[@]}" "$wheel[$extra]"; fi
  [ -z "${beside[$extra]:-}" ] || "${pip[@]}" --no-deps "${beside[$extra]}"
  "$venv/bin/python" -m pip check --disable-pip-version-check >/dev/null
  (cd "$work" && "$venv/bin/python" -c "${probe[$extra]}")
  rm -rf "$venv"
  echo "check_extras: [$extra] installed from the wheel and imported in $((SECONDS - t0)) s"
done
echo "check_extras: all ${#extras[@]} passed in $((SECONDS - started)) s"
