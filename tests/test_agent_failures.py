"""What an agent does to its own sandbox is its failure (reward 0), never an infrastructure
error (reward nan, retried, left out of success rates): an agent must not hide a failed
episode by breaking its sandbox."""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import pytest
from sandbox_task import make_task
from test_sandbox_adversarial import BACKENDS

import ac_env  # noqa: F401  (registers the env id)
from ac_env.tasks.model import Task

SABOTAGE = {
    "unreadable workdir": "chmod 000 .",
    "unreadable file": "mkdir -p secret && echo x > secret/f && chmod 000 secret",
    "diff over the size limit": "head -c 70M /dev/urandom > blob.bin",
    "every process killed": "kill -KILL -1; kill -KILL 1",
}


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    task: Task = make_task(tmp_path, hidden_test=True)
    path = tmp_path / "tasks.jsonl"
    path.write_text(task.model_dump_json() + "\n")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("command", SABOTAGE.values(), ids=SABOTAGE.keys())
def test_sabotaging_the_workspace_scores_zero_not_nan(backend: str, command: str, task_file: Path):
    sandbox = "local" if backend == "bwrap" else backend
    env = gym.make("AutoCompact-SWE-v0", task_source=str(task_file), sandbox=sandbox)
    try:
        env.reset(seed=0)
        env.step(f"```bash\n{command}\n```")
        observation, *_ = env.step("```bash\necho next command\n```")
        assert "next command" in observation[-1]["content"]
        _, reward, _, _, info = env.step("```bash\nsubmit\n```")
        assert not math.isnan(reward) and reward == 0.0, info
        assert info["infra_error"] is None
    finally:
        env.close()
