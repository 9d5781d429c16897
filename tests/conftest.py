"""Shared fixtures: a tiny but real task (a git repo with a bug, pytest tests, a gold patch)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_task import make_task

from ac_env.tasks.model import Task


def make_tiny_task(root: Path, instance_id: str = "tiny-calc-1") -> Task:
    """A fresh tiny task with its own snapshot under ``root``."""
    return make_task(root, instance_id=instance_id)


@pytest.fixture(scope="session")
def tiny_task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    return make_tiny_task(tmp_path_factory.mktemp("tasks"))


@pytest.fixture(scope="session")
def tiny_task_file(tmp_path_factory: pytest.TempPathFactory, tiny_task: Task) -> Path:
    path = tmp_path_factory.mktemp("taskfile") / "tasks.jsonl"
    second = make_tiny_task(tmp_path_factory.mktemp("tasks2"), "tiny-calc-2")
    path.write_text(
        "\n".join(json.dumps(t.model_dump(mode="json")) for t in (tiny_task, second)) + "\n"
    )
    return path


@pytest.fixture(scope="session")
def task_factory():
    """Builds a fresh tiny task (its own snapshot) under a given directory."""
    return make_tiny_task


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Torch on one thread during the test: sandboxes and model code share the few cores, and
    on a small machine one thread is faster than contending ones."""
    import torch  # here: tests of ac_env alone run without torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
