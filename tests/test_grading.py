"""Grading: SWE-bench semantics on a tiny real task, in real (bubblewrap or plain) sandboxes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from sandbox_task import BUGGY, TESTS, diff_after, git, make_task

from ac_env.grading import GradeResult, grade
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks.model import Task

F2P, P2P = "tests/test_ops.py::test_add", "tests/test_ops.py::test_mul"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


def grade_patch(task: Task, patch: str, timeout_s: float = 60.0, **settings: Any) -> GradeResult:
    return grade(task, patch, LocalSandbox(isolation=ISOLATION), timeout_s, **settings)


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return make_task(tmp_path)


def repo(task: Task) -> Path:
    assert task.snapshot_dir is not None
    return task.snapshot_dir


def test_gold_patch_resolves_with_per_test_outcomes(task: Task):
    result = grade_patch(task, task.patch)
    assert result.resolved is True and result.reward == 1.0 and result.infra_error is None
    assert result.tests == {F2P: "PASSED", P2P: "PASSED"}
    assert result.fail_to_pass.passed == [F2P] and result.pass_to_pass.passed == [P2P]
    assert result.patch_applied and "2 passed" in result.log and result.duration_s > 0


def test_empty_patch_is_not_resolved(task: Task):
    result = grade_patch(task, "")
    assert result.resolved is False and result.reward == 0.0 and result.infra_error is None
    assert result.tests == {F2P: "FAILED", P2P: "PASSED"}
    assert result.fail_to_pass.failed == [F2P] and F2P in result.reason


def test_changes_to_test_files_and_conftest_are_dropped(task: Task):
    cheat = diff_after(
        repo(task),
        {
            "tests/test_ops.py": TESTS.replace("== 5", "== -1"),
            "conftest.py": "import pytest\n\n@pytest.fixture(autouse=True)\ndef x(): pass\n",
            "tests/conftest.py": "def pytest_collection_modifyitems(items): items.clear()\n",
        },
    )
    result = grade_patch(task, cheat)
    assert result.patch_applied and result.reward == 0.0
    assert result.tests == {F2P: "FAILED", P2P: "PASSED"}

    fix_and_cheat = diff_after(
        repo(task),
        {
            "calc/ops.py": BUGGY.replace("a - b", "a + b"),
            "tests/test_ops.py": TESTS.replace("== 6", "== 7"),
        },
    )
    assert grade_patch(task, fix_and_cheat).reward == 1.0


def test_patch_that_does_not_apply_is_the_policys_fault(task: Task):
    broken = task.patch.replace("-    return a - b", "-    return a ** b")
    result = grade_patch(task, broken)
    assert result.resolved is False and result.reward == 0.0 and result.infra_error is None
    assert not result.patch_applied and result.reason.startswith("patch does not apply")
    assert "calc/ops.py" in result.reason


def test_patch_breaking_imports_is_zero_not_infra(task: Task):
    broken = diff_after(repo(task), {"calc/ops.py": "def add(:\n"})
    result = grade_patch(task, broken, capability_gate="off")
    assert result.reward == 0.0 and result.infra_error is None
    assert result.tests == {F2P: "MISSING", P2P: "MISSING"}
    gated = grade_patch(task, broken)  # the gate cannot read it, so it vouches for nothing
    assert gated.reward == 0.0 and gated.infra_error is None
    assert [(u.file, u.capability) for u in gated.rejected] == [("calc/ops.py", "unparseable")]


def test_hanging_tests_time_out_as_zero(task: Task):
    hang = diff_after(
        repo(task), {"calc/ops.py": BUGGY.replace("a * b", "__import__('time').sleep(60)")}
    )
    result = grade_patch(task, hang, timeout_s=3)
    assert result.timed_out and result.reward == 0.0 and result.infra_error is None
    assert "timed out" in result.reason and result.duration_s < 20


def test_hidden_tests_arrive_with_test_patch(tmp_path: Path):
    task = make_task(tmp_path, hidden_test=True)
    resolved = grade_patch(task, task.patch)
    assert resolved.reward == 1.0
    assert resolved.tests["tests/test_hidden.py::test_add_negative"] == "PASSED"
    empty = grade_patch(task, "")
    assert (
        empty.reward == 0.0 and empty.tests["tests/test_hidden.py::test_add_negative"] == "FAILED"
    )


def test_missing_snapshot_is_an_infra_error(task: Task):
    shutil.rmtree(repo(task))
    result = grade_patch(task, task.patch)
    assert result.reward is None and result.resolved is None
    assert result.infra_error and "snapshot_dir" in result.infra_error


def test_test_patch_that_does_not_apply_is_an_infra_error(task: Task):
    broken = task.model_copy(update={"test_patch": task.patch.replace("a - b", "a / b")})
    result = grade_patch(broken, task.patch)
    assert result.reward is None and "test_patch does not apply" in (result.infra_error or "")


@pytest.mark.parametrize(
    ("test_command", "expected"),
    [
        ("python3 -m no_such_runner", "not a pytest invocation"),
        ("/no/such/python3 -m pytest -rA", "did not start (exit code 127)"),
        ("python3 -m pytest -rA -p no:cacheprovider --no-such-option", "code 4"),
    ],
)
def test_a_runner_that_cannot_report_is_an_infra_error(
    task: Task, test_command: str, expected: str
):
    result = grade_patch(task.model_copy(update={"test_command": test_command}), task.patch)
    assert result.reward is None and expected in (result.infra_error or "")


def test_workspace_diff_grades_like_the_gold_patch(task: Task):
    with LocalSandbox(isolation=ISOLATION) as box:
        box.start(task)
        box.exec("sed -i 's/a - b/a + b/' calc/ops.py && echo scratch > notes.txt", 10, 1000)
        patch = box.diff()
    assert grade_patch(task, patch).reward == 1.0


ORDER_DEPENDENT_TESTS = """from calc.ops import add, mul

SEEN = []


def test_mul():
    SEEN.append(mul(2, 3))


def test_add():
    assert SEEN == [6], "needs test_mul to have run first, as in the suite"
    assert add(2, 3) == 5
"""


def test_graded_tests_run_in_the_tasks_test_order(task: Task):
    (repo(task) / "tests" / "test_ops.py").write_text(ORDER_DEPENDENT_TESTS)
    git(repo(task), "commit", "-q", "--amend", "-am", "tests that depend on order")
    # FAIL_TO_PASS first breaks test_add even when fixed; the suite's order does not
    assert grade_patch(task, task.patch).tests == {F2P: "FAILED", P2P: "PASSED"}
    in_order = task.model_copy(update={"test_order": [P2P, F2P]})
    assert grade_patch(in_order, task.patch).resolved is True
    # the order only orders: a test it adds is not run, one it lacks still is
    other = task.model_copy(update={"test_order": ["tests/test_ops.py::test_other", P2P]})
    assert set(grade_patch(other, task.patch).tests) == {F2P, P2P}
