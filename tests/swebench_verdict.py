"""SWE-bench's own verdict on one of our grading runs: the test command's log, as our grader
recorded it, wrapped in the harness's markers and graded offline by ``swebench`` (no Docker
daemon needed): ``get_logs_eval`` -> ``get_eval_tests_report`` -> ``get_resolution_status``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ac_env.grading import GradeResult
from ac_env.grading.runner import RUNNER_DIR
from ac_env.tasks.model import Task

swebench_grading = pytest.importorskip("swebench.harness.grading")
constants = pytest.importorskip("swebench.harness.constants")
swebench_types = pytest.importorskip("swebench.types")


def grading_run_log(task: Task, result: GradeResult) -> tuple[str, int]:
    """(pytest's output, exit code) of the grading run's test command, from its log."""
    start = result.log.rindex("$ ", 0, result.log.index(f"{RUNNER_DIR}/boot.py"))
    body = result.log[start:].split("\n", 1)[1]
    output, _, tail = body.rpartition("\n[exit code ")
    return output, int(tail.split("]", 1)[0])


def swebench_log(output: str, exit_code: int, timed_out: bool) -> str:
    """The log SWE-bench's eval script would have written for a run of the test command."""
    lines = [constants.START_TEST_OUTPUT, output, constants.END_TEST_OUTPUT]
    lines.append(f"{constants.TEST_EXIT_CODE}: {exit_code}")
    if timed_out:
        lines.append(constants.TESTS_TIMEOUT)
    return "\n".join(lines) + "\n"


def swebench_resolved(task: Task, result: GradeResult, scratch: Path) -> bool:
    """True when SWE-bench grades our grading run RESOLVED_FULL."""
    output, exit_code = grading_run_log(task, result)
    return swebench_resolves(task, swebench_log(output, exit_code, result.timed_out), scratch)


def swebench_resolves(task: Task, log: str, scratch: Path) -> bool:
    """True when SWE-bench grades ``log`` (its eval script's log) RESOLVED_FULL."""
    spec = swebench_types.TestSpec(
        instance_id=task.instance_id,
        image="none",
        eval_script_list=[],
        repo=task.repo,
        version=task.version,
        FAIL_TO_PASS=task.FAIL_TO_PASS,
        PASS_TO_PASS=task.PASS_TO_PASS,
        log_parser="parse_log_pytest",
        eval_type=constants.EvalType.PASS_AND_FAIL.value,
    )
    log_path = scratch / f"{task.instance_id}-eval.log"
    log_path.write_text(log)
    status_map, found = swebench_grading.get_logs_eval(spec, str(log_path))
    if not found:
        return False
    gold = {
        constants.FAIL_TO_PASS: task.FAIL_TO_PASS,
        constants.PASS_TO_PASS: task.PASS_TO_PASS,
    }
    report = swebench_grading.get_eval_tests_report(status_map, gold)
    status = swebench_grading.get_resolution_status(report)
    return bool(status == constants.ResolvedStatus.FULL.value)
