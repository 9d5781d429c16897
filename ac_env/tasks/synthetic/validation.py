"""Re-check a task for real: FAIL_TO_PASS fail before the gold patch and pass after it,
PASS_TO_PASS pass both times, and every run agrees (``runs`` runs each way)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ac_env.host_git import HostGitError, git_text
from ac_env.pytest_log import FAILING, Outcome
from ac_env.tasks.model import Task
from ac_env.tasks.synthetic.pytest_runs import DEFAULT_TEST_PYTHON, run_pytest


@dataclass
class ValidationReport:
    """``problems`` is empty when the task is valid."""

    instance_id: str
    problems: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def _apply(repo: Path, patch: str, what: str) -> None:
    try:
        git_text(["apply", "-"], cwd=repo, stdin=patch)
    except HostGitError as error:
        raise ValueError(f"{what} does not apply: {error}") from None


def _check_runs(
    report: ValidationReport,
    repo: Path,
    task: Task,
    runs: int,
    fixed: bool,
    python: str,
    timeout_s: float,
) -> None:
    stage = "after the gold patch" if fixed else "before the gold patch"
    ids = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    for attempt in range(1, runs + 1):
        run = run_pytest(repo, ids, python=python, timeout_s=timeout_s)
        report.duration_s += run.duration_s
        if run.timed_out:
            report.problems.append(f"run {attempt} {stage} timed out")
            continue
        for test in ids:
            outcome = run.outcomes.get(test)
            must_fail = not fixed and test in task.FAIL_TO_PASS
            expected = outcome in FAILING if must_fail else outcome == Outcome.PASSED
            if not expected:
                report.problems.append(f"run {attempt} {stage}: {test} is {outcome or 'missing'}")


def validate_task(
    task: Task, runs: int = 3, python: str = DEFAULT_TEST_PYTHON, timeout_s: float = 60.0
) -> ValidationReport:
    """Run the task's tests ``runs`` times on the buggy snapshot (with ``test_patch``
    applied) and ``runs`` times after the gold patch, in a temporary copy."""
    if task.snapshot_dir is None:
        raise ValueError(f"{task.instance_id}: task has no snapshot_dir to validate")
    report = ValidationReport(task.instance_id)
    with tempfile.TemporaryDirectory(prefix="ac-validate-") as tmp:
        repo = Path(tmp) / "repo"
        shutil.copytree(task.snapshot_dir, repo)
        try:
            if task.test_patch:
                _apply(repo, task.test_patch, "test_patch")
            _check_runs(report, repo, task, runs, False, python, timeout_s)
            _apply(repo, task.patch, "gold patch")
            _check_runs(report, repo, task, runs, True, python, timeout_s)
        except ValueError as error:
            report.problems.append(str(error))
    return report
