"""Strengthening with the library's own tests: a test of the whole suite that rejects an
accepted wrong patch joins the task; a wrong patch the whole suite accepts drops the task."""

from __future__ import annotations

import shutil
from pathlib import Path

from ac_env.mining.sdist import commit_tree
from ac_env.mining.strengthen import strengthen
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks.model import Task
from ac_env.tasks.synthetic.project import unified_diff
from ac_env.tasks.wrong_patches import wrong_patches

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
FIXED = "def sign(x):\n    if x < 0:\n        return -1\n    return 1\n"
BUGGY = FIXED.replace("x < 0", "x < -1")
TESTS = (
    "from demo.core import sign\n\n\n"
    "def test_minus_one():\n    assert sign(-1) == -1\n\n\n"
    "def test_plus_one():\n    assert sign(1) == 1\n\n\n"
    "def test_zero():\n    assert sign(0) == 1\n"
)


def _task(tmp_path: Path, fail_to_pass: list[str], tests: str = TESTS) -> Task:
    repo = tmp_path / "repo"
    (repo / "demo").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "demo" / "__init__.py").write_text("")
    (repo / "demo" / "core.py").write_text(BUGGY)
    (repo / "tests" / "test_core.py").write_text(tests)
    commit = commit_tree(repo, "Import demo 1.0")
    return Task(
        instance_id="demo__sign",
        repo="pypi/demo",
        problem_statement="sign(-1) is 1",
        patch=unified_diff("demo/core.py", BUGGY, FIXED),
        FAIL_TO_PASS=fail_to_pass,
        PASS_TO_PASS=[],
        base_commit=commit,
        split="real",
        snapshot_dir=repo,
        test_files=["tests/test_core.py"],
        test_command="python3 -m pytest -rA -p no:cacheprovider -o addopts=",
    )


def _sandbox() -> LocalSandbox:
    return LocalSandbox(isolation=ISOLATION)


def test_a_suite_test_that_rejects_the_wrong_patch_joins_the_task(tmp_path: Path):
    task = _task(tmp_path, ["tests/test_core.py::test_minus_one"])
    # ``x <= 0``: sign(0) is -1; the task's one test cannot tell, test_zero can.
    wrong = [w for w in wrong_patches(task) if "'<' -> '<='" in w.description]
    assert len(wrong) == 1
    result = strengthen(task, wrong, _sandbox, timeout_s=120)
    assert result.task is not None, result.reason
    assert result.added == ["tests/test_core.py::test_zero"]
    assert result.task.PASS_TO_PASS == ["tests/test_core.py::test_zero"]


def test_a_wrong_patch_the_whole_suite_accepts_drops_the_task(tmp_path: Path):
    without_zero = TESTS.split("\n\n\ndef test_zero")[0] + "\n"
    task = _task(tmp_path, ["tests/test_core.py::test_minus_one"], without_zero)
    wrong = [w for w in wrong_patches(task) if "'<' -> '<='" in w.description]
    dropped = strengthen(task, wrong, _sandbox, timeout_s=120)
    assert dropped.task is None and dropped.undecided == [wrong[0].description]
