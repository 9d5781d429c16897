"""Wrong patches that only make the reported symptom go away: the crash silenced, the first
failing input special-cased."""

from __future__ import annotations

import ast
from pathlib import Path

from ac_env.tasks.model import Task
from ac_env.tasks.symptom_patches import symptom_patches
from ac_env.tasks.synthetic.project import unified_diff

FIXED = '''\
def ratio(part, whole):
    """Share of ``part`` in ``whole``; 0 for an empty whole."""
    if whole == 0:
        return 0.0
    return part / whole
'''
BUGGY = FIXED.replace("    if whole == 0:\n        return 0.0\n", "")
TESTS = """\
from demo.core import ratio


def test_empty_whole():
    assert ratio(3, 0) == 0.0
    assert ratio(0, 0) == 0.0
"""


def _task(tmp_path: Path, statement: str) -> Task:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "core.py").write_text(BUGGY)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_core.py").write_text(TESTS)
    return Task(
        instance_id="demo__ratio",
        repo="demo",
        problem_statement=statement,
        patch=unified_diff("demo/core.py", BUGGY, FIXED),
        FAIL_TO_PASS=["tests/test_core.py::test_empty_whole"],
        PASS_TO_PASS=[],
        snapshot_dir=tmp_path,
    )


def _ratio(text: str):
    namespace: dict = {}
    exec(compile(ast.parse(text), "core.py", "exec"), namespace)
    return namespace["ratio"]


def test_the_named_crash_is_silenced_and_the_first_failing_input_special_cased(tmp_path):
    task = _task(tmp_path, "ratio(3, 0) raises ZeroDivisionError instead of returning 0.")
    patches = {w.family: w for w in symptom_patches(task)}
    assert set(patches) == {"silenced_symptom", "special_case"}
    silenced = _ratio(patches["silenced_symptom"].files["demo/core.py"])
    assert silenced(3, 0) is None and silenced(1, 4) == 0.25
    special = _ratio(patches["special_case"].files["demo/core.py"])
    assert special(3, 0) == 0.0 and special(1, 4) == 0.25
    assert special.__doc__ == _ratio(FIXED).__doc__
    assert all(w.patch.startswith("diff --git a/demo/core.py") for w in patches.values())


def test_no_silencing_without_a_named_builtin_exception(tmp_path):
    task = _task(tmp_path, "ratio(3, 0) fails with a LedgerError and an AssertionError.")
    assert [w.family for w in symptom_patches(task)] == ["special_case"]
