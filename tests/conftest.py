"""Shared fixtures: a tiny but real task (a git repo with a bug, pytest tests, a gold patch)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ac_env.tasks.model import GroundTruth, Task

BUGGY = '''"""Arithmetic helpers."""


def add(a, b):
    """Return a + b."""
    return a - b


def mul(a, b):
    """Return a * b."""
    return a * b
'''

TESTS = """from calc.ops import add, mul


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6
"""

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        [*GIT, *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def make_tiny_task(root: Path, instance_id: str = "tiny-calc-1") -> Task:
    repo = root / instance_id
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text(BUGGY)
    (repo / "tests" / "test_ops.py").write_text(TESTS)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    (repo / "calc" / "ops.py").write_text(BUGGY.replace("return a - b", "return a + b"))
    patch = _git(repo, "diff")
    _git(repo, "checkout", "-q", "--", ".")
    return Task(
        instance_id=instance_id,
        repo="local/calc",
        problem_statement="add(2, 3) returns -1 instead of 5.",
        patch=patch,
        FAIL_TO_PASS=["tests/test_ops.py::test_add"],
        PASS_TO_PASS=["tests/test_ops.py::test_mul"],
        snapshot_dir=repo,
        test_files=["tests/test_ops.py"],
        ground_truth=GroundTruth(files=["calc/ops.py"], functions=["calc/ops.py:add"]),
    )


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
