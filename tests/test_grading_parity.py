"""Grading parity with SWE-bench: our grader and swebench's (``get_logs_eval``,
``get_eval_tests_report``, ``get_resolution_status``) read the same real pytest logs, from our
own grading runs in the local sandbox, and must reach the same verdict: resolved, unresolved,
skipped tests, errors in fixtures, a collection failure, a crashed test process and a hang.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sandbox_task import diff_after, git
from swebench_verdict import swebench_resolved

from ac_env.grading import GradeResult, grade
from ac_env.grading.capability_gate import GateMode
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks.model import Task

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
OPS = '''"""Arithmetic helpers."""
import os

FEATURE = True


def check():
    return True


def add(a, b):
    return a - b


def mul(a, b):
    return a * b


def feature():
    return 1
'''
TESTS = """import pytest

from calc import ops


@pytest.fixture
def ready():
    assert ops.check()
    return True


def test_add(ready):
    assert ops.add(2, 3) == 5


def test_mul(ready):
    assert ops.mul(2, 3) == 6


def test_feature():
    if not ops.FEATURE:
        pytest.skip("feature off")
    assert ops.feature() == 1
"""
FIXED = OPS.replace("return a - b", "return a + b")
# Each case: the file the policy leaves, our expected reward, and what its log must show (so
# the parity is never between two empty logs).
CASES = {
    "resolved": (FIXED, 1.0, "PASSED tests/test_ops.py::test_add"),
    "unresolved": (OPS, 0.0, "FAILED tests/test_ops.py::test_add"),
    "pass_to_pass_skipped": (
        FIXED.replace("FEATURE = True", "FEATURE = False"),
        0.0,
        "SKIPPED [1] tests/test_ops.py",
    ),
    "fail_to_pass_skipped": (
        FIXED.replace("return a + b", "import pytest\n    pytest.skip('later')"),
        0.0,
        "SKIPPED [1] calc/ops.py",
    ),
    "fixture_errors": (
        FIXED.replace("def check():\n    return True", "def check():\n    1/0"),
        0.0,
        "ERROR tests/test_ops.py::test_add",
    ),
    "collection_error": (
        FIXED.replace("def mul(a, b):", "def mul(a, b)"),
        0.0,
        "ERROR: not found:",
    ),
    "crashed_run": (FIXED.replace("return a * b", "os._exit(1)"), 0.0, "died"),
    "hang": (FIXED.replace("return a * b", "while True:\n        pass"), 0.0, "timed out"),
}


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    repo = tmp_path_factory.mktemp("parity") / "calc"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text(OPS)
    (repo / "tests" / "test_ops.py").write_text(TESTS)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return Task(
        instance_id="parity-calc",
        repo="autocompact/parity-calc",
        problem_statement="add(2, 3) returns -1",
        patch=diff_after(repo, {"calc/ops.py": FIXED}),
        FAIL_TO_PASS=["tests/test_ops.py::test_add"],
        PASS_TO_PASS=["tests/test_ops.py::test_mul", "tests/test_ops.py::test_feature"],
        snapshot_dir=repo,
        test_files=["tests/test_ops.py"],
    )


def run_case(task: Task, ops: str, gate: GateMode = "off") -> GradeResult:
    """Grade with the static capability gate off by default: parity is about reading pytest's
    logs, and the gate refuses some cases (an unparseable file) before pytest ever runs."""
    assert task.snapshot_dir is not None
    patch = diff_after(task.snapshot_dir, {"calc/ops.py": ops}) if ops != OPS else ""
    return grade(
        task, patch, LocalSandbox(isolation=ISOLATION), timeout_s=4.0, capability_gate=gate
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_our_verdict_equals_swebench(task: Task, case: str, tmp_path: Path):
    ops, reward, shown = CASES[case]
    result = run_case(task, ops)
    assert result.infra_error is None, result.reason
    assert result.reward == reward, result.reason
    assert shown in result.log + result.reason
    assert result.resolved is swebench_resolved(task, result, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["resolved", "collection_error"])
def test_the_gate_never_changes_the_verdict(task: Task, case: str):
    """With the gate on, a case swebench resolves is still resolved, and one it fails still
    fails (the unparseable file is refused before pytest runs, with a reason that says so)."""
    ops, reward, _ = CASES[case]
    result = run_case(task, ops, gate="relative")
    assert result.infra_error is None, result.reason
    assert result.reward == reward, result.reason
    if case == "collection_error":
        assert result.rejected and "unparseable" in result.reason
