"""A tiny task for the sandbox and grading tests: a one-commit repo with a bug in ``add``,
a failing and a passing test, a gold patch, and (optionally) a hidden test in test_patch."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

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
HIDDEN_TEST = """from calc.ops import add


def test_add_negative():
    assert add(-2, -3) == -5
"""


GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        [*GIT, *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def diff_after(repo: Path, files: dict[str, str]) -> str:
    """The patch that writes ``files`` into ``repo`` (left untouched afterwards)."""
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    patch = git(repo, "diff", "--cached", "--binary")
    git(repo, "reset", "-q", "--hard")
    return patch


def make_task(root: Path, *, hidden_test: bool = False, instance_id: str = "calc-add") -> Task:
    repo = root / "calc-repo"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text(BUGGY)
    (repo / "tests" / "test_ops.py").write_text(TESTS)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    gold = diff_after(repo, {"calc/ops.py": BUGGY.replace("a - b", "a + b")})
    test_patch = diff_after(repo, {"tests/test_hidden.py": HIDDEN_TEST}) if hidden_test else ""
    fail_to_pass = ["tests/test_ops.py::test_add"]
    if hidden_test:
        fail_to_pass.append("tests/test_hidden.py::test_add_negative")
    return Task(
        instance_id=instance_id,
        repo="local/calc",
        problem_statement="add(2, 3) returns -1",
        patch=gold,
        test_patch=test_patch,
        FAIL_TO_PASS=fail_to_pass,
        PASS_TO_PASS=["tests/test_ops.py::test_mul"],
        snapshot_dir=repo,
        test_files=["tests/test_ops.py", *(["tests/test_hidden.py"] if hidden_test else [])],
        ground_truth=GroundTruth(files=["calc/ops.py"], functions=["calc.ops:add"]),
    )


def processes_mentioning(marker: str, settle_s: float = 3.0) -> list[int]:
    """Host pids whose command line holds ``marker`` (containers' processes included), once
    none is left or after ``settle_s``: the kernel kills a PID namespace's processes when its
    init exits, and on a loaded machine one may still be exiting when the command returns (a
    process that escaped lives far longer: the tests' markers are sleeps of 1000 s or more)."""
    deadline = time.monotonic() + settle_s
    while (found := _mentioning(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def _mentioning(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def apply_at_base(snapshot: Path, patch: str, fresh: Path) -> Path:
    """A copy of ``snapshot`` at ``fresh`` with ``patch`` applied by ``git apply`` (which
    must accept it, non-UTF-8 bytes included); returns ``fresh``."""
    shutil.copytree(snapshot, fresh, symlinks=True)
    applied = subprocess.run(
        ["git", "apply", "-"],
        cwd=fresh,
        input=patch.encode("utf-8", "surrogateescape"),
        capture_output=True,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    return fresh
