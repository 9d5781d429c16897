"""Strengthening a task whose tests accept a wrong patch, with the library's own tests.

A mined task grades only the tests the miner kept (those that passed fast at baseline); the
library's whole shipped suite may hold more that tell a wrong patch from the gold one. For each
accepted wrong patch, the whole suite runs with the gold patch and with the wrong one (and
once on the buggy tree): a test that passes with the gold patch and fails with the wrong one
rejects it, and joins the task (FAIL_TO_PASS when it also fails on the buggy tree, else
PASS_TO_PASS). A wrong patch no test of the whole suite rejects is undecided (likely
equivalent, or a behaviour the library never tests): the task cannot be strengthened from the
library's tests and is dropped. The strengthened task is graded again by the env's grader
(gold 1, empty patch 0, every accepted wrong patch 0) before it is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ac_env.grading import grade
from ac_env.mining.runner import SuiteRunner
from ac_env.pytest_log import PASSING
from ac_env.sandbox.base import Sandbox
from ac_env.tasks.model import Task
from ac_env.tasks.wrong_patches import WrongPatch, fixed_files


@dataclass
class Strengthening:
    """What the library's whole suite said about one task's accepted wrong patches."""

    task: Task | None
    """The strengthened task, or None: dropped."""
    added: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    """Descriptions of the wrong patches no test of the whole suite rejects."""
    reason: str = ""


def strengthen(
    task: Task,
    accepted: list[WrongPatch],
    make_sandbox: Callable[[], Sandbox],
    timeout_s: float = 600.0,
) -> Strengthening:
    """``task`` with the library's tests that reject every wrong patch of ``accepted``
    (non-equivalent ones its tests accept) added, or a drop with the reason."""
    runner = SuiteRunner(task, None)
    runner.command = task.test_command  # the task's own, as grading runs it
    try:
        gold = runner.run(fixed_files(task), timeout_s=timeout_s)
        buggy = runner.run({}, timeout_s=timeout_s)
        rejecting: dict[str, list[str]] = {}
        for wrong in accepted:
            outcome = runner.run(wrong.files, timeout_s=timeout_s)
            rejecting[wrong.description] = [
                test
                for test, result in gold.outcomes.items()
                if "::" in test and result in PASSING and outcome.outcomes.get(test) not in PASSING
            ]
    finally:
        runner.close()
    undecided = [description for description, tests in rejecting.items() if not tests]
    if undecided:
        return Strengthening(
            None,
            undecided=undecided,
            reason="the library's whole suite passes with a wrong patch the tests accept",
        )
    graded = {*task.FAIL_TO_PASS, *task.PASS_TO_PASS}
    added = sorted({test for tests in rejecting.values() for test in tests} - graded)
    fail_to_pass = [t for t in added if buggy.outcomes.get(t) not in PASSING]
    pass_to_pass = [t for t in added if t not in fail_to_pass]
    strengthened = task.model_copy(
        update={
            "FAIL_TO_PASS": [*task.FAIL_TO_PASS, *fail_to_pass],
            "PASS_TO_PASS": [*task.PASS_TO_PASS, *pass_to_pass],
        }
    )
    problem = _regrade(strengthened, accepted, make_sandbox)
    if problem:
        return Strengthening(None, added=added, reason=problem)
    return Strengthening(strengthened, added=added)


def _regrade(
    task: Task, accepted: list[WrongPatch], make_sandbox: Callable[[], Sandbox]
) -> str | None:
    """Why the strengthened task is unusable (its gold patch fails, the empty patch or an
    accepted wrong patch passes), or None."""
    if grade(task, task.patch, make_sandbox()).reward != 1.0:
        return "the gold patch fails the strengthened tests"
    if grade(task, "", make_sandbox()).reward != 0.0:
        return "the empty patch passes the strengthened tests"
    for wrong in accepted:
        if grade(task, wrong.patch, make_sandbox()).reward != 0.0:
            return f"the strengthened tests still accept {wrong.description}"
    return None
