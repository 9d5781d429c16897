"""Wrong patches made from a gold patch, and the shipped real-code suite's record of them: no
shipped task whose tests were measured accepts one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ac_env.grading import grade
from ac_env.mining.wrong_patches import changed_lines, wrong_patches
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks import load_tasks
from ac_env.tasks.model import Task
from ac_env.tasks.real.suite import read_rows
from ac_env.tasks.synthetic.project import unified_diff

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
FIXED = """\
def clamp(x, low, high):
    if x < low:
        return low
    return x


def scale(x):
    return x * 2
"""
BUGGY = FIXED.replace("if x < low:", "if x <= low - 1:").replace("x * 2", "x + x + x")


def _task(tmp_path: Path, fixed: str = FIXED, buggy: str = BUGGY) -> Task:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "core.py").write_text(buggy)
    return Task(
        instance_id="demo__clamp",
        repo="demo",
        problem_statement="clamp is wrong",
        patch=unified_diff("demo/core.py", buggy, fixed),
        FAIL_TO_PASS=["tests/test_core.py::test_clamp"],
        PASS_TO_PASS=[],
        snapshot_dir=tmp_path,
    )


def test_near_misses_sit_on_the_changed_lines_and_differ_from_bug_and_fix(tmp_path: Path):
    wrong = wrong_patches(_task(tmp_path))
    descriptions = [w.description for w in wrong if w.family == "near_miss"]
    assert "demo/core.py:2: 'x < low' -> 'True'" in descriptions
    assert "demo/core.py:2: 'x < low' -> 'False'" in descriptions
    assert any("'<' -> '<='" in d for d in descriptions)
    assert any("'2' -> '1'" in d or "'2' -> '3'" in d for d in descriptions)
    assert all(int(d.split(":")[1]) in (2, 8) for d in descriptions)
    texts = [w.files["demo/core.py"] for w in wrong]
    assert FIXED not in texts and BUGGY not in texts and len(set(texts)) == len(texts)
    assert not any(w.equivalent for w in wrong)


def test_a_two_hunk_fix_gives_one_partial_fix_per_hunk(tmp_path: Path):
    filler = "".join(f"\n\ndef f{i}():\n    return {i}\n" for i in range(6))
    fixed = FIXED.replace("\n\ndef scale", filler + "\n\ndef scale")
    buggy = BUGGY.replace("\n\ndef scale", filler + "\n\ndef scale")
    task = _task(tmp_path, fixed, buggy)
    partial = [w for w in wrong_patches(task) if w.family == "partial_fix"]
    assert len(partial) == 2
    assert {w.files["demo/core.py"].count("x + x + x") for w in partial} == {0, 1}
    assert changed_lines(task.patch)["demo/core.py"] == {2, 32}


def test_every_shipped_real_task_records_that_it_accepts_no_wrong_patch():
    rows = read_rows()
    measured = [row.task for row in rows if row.task.wrong_patches_accepted is not None]
    assert len(measured) >= 30
    assert all(task.wrong_patches_accepted == 0 for task in measured)
    assert all((task.wrong_patches_rejected or 0) > 0 for task in measured)


def _smallest_measured() -> str:
    """The measured single-bug task with the fewest graded tests (the quickest to grade)."""
    measured = [
        row.task
        for row in read_rows()
        if row.task.wrong_patches_accepted == 0 and row.task.split == "real"
    ]
    return min(measured, key=lambda task: len(task.PASS_TO_PASS)).instance_id


def _accepted(task: Task) -> list[str]:
    accepted = []
    for wrong in wrong_patches(task):
        result = grade(task, wrong.patch, LocalSandbox(isolation=ISOLATION))
        assert result.infra_error is None, result.reason
        if result.reward == 1.0 and not wrong.equivalent:
            accepted.append(wrong.description)
    return accepted


def test_a_measured_task_rejects_its_wrong_patches_live():
    task = load_tasks("real", task_ids=[_smallest_measured()])[0]
    assert _accepted(task) == []


MEASURED = [row.task.instance_id for row in read_rows() if row.task.wrong_patches_accepted == 0]


@pytest.mark.slow
@pytest.mark.exhaustive
@pytest.mark.parametrize("task_id", MEASURED)
def test_no_measured_shipped_task_accepts_a_wrong_patch(task_id: str):
    assert _accepted(load_tasks("real", task_ids=[task_id])[0]) == []


@pytest.mark.slow
@pytest.mark.parametrize("task_id", MEASURED[::4])
def test_every_fourth_measured_task_rejects_its_wrong_patches(task_id: str):
    """CI's share of the exhaustive check above."""
    assert _accepted(load_tasks("real", task_ids=[task_id])[0]) == []
