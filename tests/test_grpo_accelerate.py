"""Data-parallel GRPO through ``accelerate launch``: two real processes (gloo on CPU) take the
same optimizer steps as one process on the whole batch, and ``ac-train grpo`` runs in two."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from grpo_data_parallel import CONFIG, batch, share, train

from ac_train.grpo.metrics import read_metrics
from ac_train.models.checkpoints import tiny_model_and_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

HELPER = Path(__file__).with_name("grpo_data_parallel.py")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def launch(processes: int, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``accelerate launch`` of the helper on CPUs (``--multi_gpu`` starts the processes through
    torchrun; ``ACCELERATE_USE_CPU`` makes them join over gloo instead of NCCL)."""
    accelerate = Path(sys.executable).with_name("accelerate")
    command = [
        str(accelerate), "launch",
        "--multi_gpu", "--num_processes", str(processes), "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(free_port()),
        str(HELPER), *args,
    ]  # fmt: skip
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_the_batch_splits_unevenly_across_two_processes():
    """What the two-process test relies on: unequal token shares, and an idle process."""
    step0, step1 = batch()
    tokens = [sum(s.trained_tokens for s in share(step0, rank, 2)) for rank in (0, 1)]
    assert tokens[0] > 3 * tokens[1] > 0
    assert len(share(step0, 0, 2)) > CONFIG.micro_batch_size >= len(share(step0, 1, 2))
    assert share(step1, 1, 2) == [] and share(step1, 0, 2)


@pytest.mark.slow
def test_two_processes_take_the_single_process_steps(tmp_path):
    reference_state, reference = train(None)
    initial, _ = tiny_model_and_tokenizer()
    moved = max(
        float((reference_state[k] - v).abs().max()) for k, v in initial.state_dict().items()
    )
    assert moved > 1e-3

    launch(2, "learner", str(tmp_path / "out"))
    for rank in (0, 1):
        result = torch.load(tmp_path / f"out.rank{rank}.pt")
        for name, value in reference_state.items():
            torch.testing.assert_close(result["state"][name], value, rtol=1e-5, atol=1e-6)
        for got, want in zip(result["figures"], reference, strict=True):
            for key in ("trained_tokens", "tokens", "sequences"):
                assert got[key] == want[key]
            for key in ("loss", "clip_fraction", "grad_norm"):
                assert got[key] == pytest.approx(want[key], rel=1e-5, abs=1e-9)
    assert reference[0]["clip_fraction"] > 0  # the batch exercises the clip


@pytest.mark.slow
def test_ac_train_grpo_runs_and_resumes_data_parallel_in_two_processes(tmp_path, tiny_task_file):
    model, tokenizer = tiny_model_and_tokenizer()
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")

    def grpo(steps: int) -> list[str]:
        done = launch(
            2,
            "cli",
            "grpo",
            "--output-dir", str(tmp_path / "run"),
            "--model", str(tmp_path / "model"),
            "--task-source", str(tiny_task_file),
            "--split", "all",
            "--steps", str(steps),
            "--tasks-per-step", "2",
            "--rollouts-per-task", "2",
            "--rollout-max-steps", "1",
            "--max-new-tokens", "8",
            "--learning-rate", "1e-3",
        )  # fmt: skip
        return done.stdout.splitlines()

    printed = grpo(steps=1)
    assert len([line for line in printed if line.startswith("{")]) == 1  # the main process's
    [metrics] = read_metrics(tmp_path / "run")
    assert metrics.rollouts == 4 and metrics.informative_groups == 2  # both processes' groups
    assert metrics.trained_tokens > 0 and metrics.grad_norm is not None
    trained = type(model).from_pretrained(tmp_path / "run" / "checkpoint-1").state_dict()
    assert any(not torch.equal(trained[k], v) for k, v in model.state_dict().items())

    printed = grpo(steps=2)  # both processes resume from checkpoint-1
    assert len([line for line in printed if line.startswith("resumed from")]) == 1
    assert [m.step for m in read_metrics(tmp_path / "run")] == [0, 1]
    assert (tmp_path / "run" / "checkpoint-2" / "trainer_state.pt").is_file()


@pytest.mark.slow
def test_an_uneven_task_split_and_async_are_refused_under_two_processes(tmp_path, tiny_task_file):
    launch(2, "refusals", str(tiny_task_file), str(tmp_path / "refusals"))
    uneven, asynchronous = (tmp_path / "refusals.rank0").read_text().splitlines()
    assert uneven.startswith("tasks_per_step (3) must be a multiple of the number of processes (2)")
    assert asynchronous.startswith("AsyncGRPOTrainer learns in one process")
