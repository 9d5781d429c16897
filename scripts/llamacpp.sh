#!/usr/bin/env bash
# llama-cpp-python's OpenAI-compatible server in .venv: the real third-party server of the
# served-model tests (tests/test_llamacpp_server.py).
#
#   bash scripts/llamacpp.sh install   # build the wheel once (cached), install it with [server]
#   bash scripts/llamacpp.sh serve [PORT]   # serve the SmolLM2 GGUF on 127.0.0.1 (default 8080)
#   bash scripts/llamacpp.sh test      # install, then run the tests against the real server
#
# The wheel is built from the sdist (CPU, portable x86-64 kernels, no AVX-512 or AMX) into
# $AUTOCOMPACT_CACHE/wheels/portable (default ~/.cache/autocompact/wheels/portable): about
# 13 minutes on two cores the first time, seconds afterwards. Installing it pulls the
# server's own dependencies
# (fastapi, uvicorn, sse-starlette, starlette-context, pydantic-settings) from the index.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.3.36
wheels="${AUTOCOMPACT_CACHE:-$HOME/.cache/autocompact}/wheels/portable"
py=.venv/bin/python

case "${1:-}" in
  install)
    if ! ls "$wheels"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
      echo "llamacpp: building llama-cpp-python $VERSION (once; about 13 minutes)" >&2
      mkdir -p "$wheels"
      # GGML_NATIVE=OFF: the portable AVX2 kernels. The native build crashed (SIGSEGV on
      # the first completion) on an AVX-512/AMX Xeon, so CPU-specific kernels stay off;
      # --no-cache-dir: pip would hand back a wheel it built earlier with other flags.
      CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        nice -n 19 "$py" -m pip wheel -q --no-deps --no-cache-dir \
        --disable-pip-version-check -w "$wheels" "llama-cpp-python==$VERSION"
    fi
    wheel=$(ls "$wheels"/llama_cpp_python-"$VERSION"-*.whl | head -n 1)
    "$py" -m pip install -q --disable-pip-version-check "${wheel}[server]"
    ;;
  serve)
    gguf=$("$py" -c "from ac_train.models import smollm2_gguf_path; print(smollm2_gguf_path())")
    exec "$py" -m llama_cpp.server --model "$gguf" --model_alias smollm2 \
      --host 127.0.0.1 --port "${2:-8080}" --n_ctx 8192
    ;;
  test)
    bash "$0" install
    "$py" -m pytest -q -p no:cacheprovider tests/test_llamacpp_server.py tests/test_served_grpo.py
    ;;
  *)
    echo "usage: bash scripts/llamacpp.sh install | serve [PORT] | test" >&2
    exit 2
    ;;
esac
