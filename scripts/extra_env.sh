#!/usr/bin/env bash
# An environment for a trainer whose packages cannot share .venv: .venv-NAME, layered on .venv
# (it sees .venv's packages through a .pth file; what it installs itself comes first).
#
#   bash scripts/extra_env.sh skyrl-trainer   # SkyRL's trainer (skyrl 0.4.0) for tests/test_skyrl_trainer.py
#   bash scripts/extra_env.sh verl            # verl 0.9.1 for tests/test_verl_agent_loop.py
#   bash scripts/extra_env.sh art             # ART (openpipe-art 0.5.18) for tests/test_art_rollout.py
#
# skyrl-trainer: skyrl 0.4.0 declares Python >= 3.12. On 3.11 it is installed without its
# dependencies and with --ignore-requires-python, plus the few modules its configuration and
# generator import (the test swaps typing.TypedDict for typing_extensions', which pydantic needs
# below 3.12). Its GPU stack (vLLM, Ray training workers) is not installed: only the config and
# the generator's agent loop run here. Run bash scripts/setup.sh first.
#
# verl: verl 0.9.1 needs transformers >=5.5.3,<5.11 (.venv has a newer one, so this venv has its
# own 5.10.4, and the kernels release that transformers accepts), and imports tensordict, hydra,
# TransferQueue and peft from its agent loop and v1 trainer. verl itself, TransferQueue and peft
# are installed without dependencies: their GPU stack (vLLM or SGLang, FSDP or Megatron, flash-attn,
# ray[default]) is not needed for the agent loop and its multi-output GRPO on CPU.
#
# art: ART's client side: openpipe-art 0.5.18 and what `import art` and its tokenization import
# (litellm, polars), without dependencies (weave, ART's tracing, is left out: 30 packages less);
# torch stays .venv's CPU build, and openai stays below 3 (ART 0.5.18's Model.openai_client() hands
# openai 3 an httpx.Timeout, which its httpx2 refuses). Its training backend (unsloth, vLLM: the
# [backend] extra) needs a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: extra_env.sh NAME (skyrl-trainer, verl, art)}
venv=.venv-$name
[ -x .venv/bin/python ] || { echo "extra_env: run bash scripts/setup.sh first" >&2; exit 1; }
case "$name" in
  skyrl-trainer) packages=(loguru==0.8.0 cloudpathlib==0.26.0 pybase64==1.5.1)
                 main=(--ignore-requires-python skyrl==0.4.0) ;;
  verl) packages=(transformers==5.10.4 kernels==0.12.3 tensordict==0.10.0 hydra-core==1.3.8
                  codetiming==1.4.0 pylatexenc==2.11 torchdata==0.11.0 pyzmq==27.3.0
                  msgspec==0.23.0 prometheus-client==0.26.0)
        main=(verl==0.9.1 TransferQueue==0.1.11 peft==0.22.0) ;;
  art) packages=(openai==2.54.0 tiktoken==0.14.0 distro==1.9.0 fastuuid==0.14.0)
       main=(openpipe-art==0.5.18 litellm==1.82.0 polars==2.2.0 polars-runtime-32==2.2.0) ;;
  *) echo "extra_env: unknown environment '$name'" >&2; exit 2 ;;
esac
stamp=$venv/.autocompact-installed
want=$(cat scripts/extra_env.sh .venv/.autocompact-installed | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
rm -rf "$venv"
.venv/bin/python -m venv --without-pip "$venv"
site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_path('purelib'))")
.venv/bin/python -c "import sysconfig; print(sysconfig.get_path('purelib'))" > "$site/zz_autocompact_venv.pth"
pip=(.venv/bin/python -m pip --python "$venv/bin/python" install -q --disable-pip-version-check)
"${pip[@]}" "${packages[@]}"
"${pip[@]}" --no-deps "${main[@]}"
echo "$want" > "$stamp"
echo "extra_env: $venv ready"
