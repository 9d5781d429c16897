"""validate_task runs the real tests: F2P fail before the gold patch, pass after; P2P pass."""

import pytest

from ac_env.pytest_log import Outcome
from ac_env.tasks.synthetic.profiles import PROFILES
from ac_env.tasks.synthetic.pytest_runs import TestRun, parse_report
from ac_env.tasks.synthetic.suite import builtin_tasks, plan_suite
from ac_env.tasks.synthetic.validation import validate_task


def first_task(split, cache, subset="train"):
    plan = next(p for p in plan_suite() if p.split == split and p.subset == subset)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUTOCOMPACT_CACHE", str(cache))
        (task,) = builtin_tasks([plan])
    return task


def test_an_easy_task_validates_once(tmp_path):
    report = validate_task(first_task("easy", tmp_path), runs=1)
    assert report.ok, report.problems


def test_validation_catches_a_wrong_test_list(tmp_path):
    task = first_task("easy", tmp_path)
    broken = task.model_copy(update={"FAIL_TO_PASS": [*task.FAIL_TO_PASS, task.PASS_TO_PASS[0]]})
    report = validate_task(broken, runs=1)
    assert not report.ok
    assert any(task.PASS_TO_PASS[0] in problem for problem in report.problems)


def test_validation_catches_a_patch_that_does_not_apply(tmp_path):
    task = first_task("easy", tmp_path)
    lines = task.patch.splitlines(keepends=True)
    context = next(i for i, line in enumerate(lines) if line.startswith(" "))
    lines[context] = " # a line the snapshot does not have\n"
    report = validate_task(task.model_copy(update={"patch": "".join(lines)}), runs=1)
    assert any("gold patch does not apply" in problem for problem in report.problems)


@pytest.mark.slow
@pytest.mark.parametrize("subset", ["train", "eval"])
@pytest.mark.parametrize("split", list(PROFILES))
def test_first_tasks_of_each_split_validate_three_times(split, subset, tmp_path):
    report = validate_task(first_task(split, tmp_path, subset), runs=3)
    assert report.ok, report.problems


def test_a_catalogue_run_holds_the_parsers_outcomes():
    log = "PASSED t.py::a\nFAILED t.py::b - boom\nERROR t.py::c\nERROR t_bad.py\n"
    outcomes, _, collection_error = parse_report(log)
    assert outcomes == {
        "t.py::a": Outcome.PASSED,
        "t.py::b": Outcome.FAILED,
        "t.py::c": Outcome.ERROR,
    }
    assert collection_error
    run = TestRun(outcomes)
    assert (run.passing(), run.failing()) == ({"t.py::a"}, {"t.py::b", "t.py::c"})
