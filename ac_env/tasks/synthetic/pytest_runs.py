"""Run a task repo's tests with a time limit and read the per-test outcomes.

Tests run with the interpreter task code runs with in sandboxes (Debian's ``/usr/bin/python3``
when present). No isolation: this module only ever runs the suite's own, known code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ac_env.pytest_log import FAILING, Failure, Outcome, parse_failures, parse_pytest_log

DEBIAN_PYTHON = Path("/usr/bin/python3")
DEFAULT_TEST_PYTHON = str(DEBIAN_PYTHON) if DEBIAN_PYTHON.exists() else sys.executable


@dataclass(frozen=True)
class TestRun:
    """What one pytest run reported: outcome per node id, what each failing test showed, and
    whether it timed out or could not collect a test file."""

    __test__ = False  # not a pytest test class, whatever its name

    outcomes: dict[str, Outcome]
    failures: dict[str, Failure] = field(default_factory=dict)
    timed_out: bool = False
    collection_error: bool = False
    duration_s: float = 0.0
    output: str = ""

    def failing(self) -> set[str]:
        return {test for test, outcome in self.outcomes.items() if outcome in FAILING}

    def passing(self) -> set[str]:
        return {test for test, outcome in self.outcomes.items() if outcome == Outcome.PASSED}


def parse_report(output: str) -> tuple[dict[str, Outcome], dict[str, Failure], bool]:
    """(outcomes, failures, collection error) from ``pytest -rA --tb=short`` text."""
    logged = parse_pytest_log(output)
    outcomes = {test: outcome for test, outcome in logged.items() if "::" in test}
    failing = [test for test, outcome in outcomes.items() if outcome in FAILING]
    return outcomes, parse_failures(output, failing), len(outcomes) < len(logged)


def run_pytest(
    repo: Path,
    test_ids: Sequence[str] = (),
    python: str = DEFAULT_TEST_PYTHON,
    timeout_s: float = 60.0,
) -> TestRun:
    """Run pytest in ``repo`` (all tests when ``test_ids`` is empty), killed after
    ``timeout_s`` seconds with every process it started."""
    command = [python, "-m", "pytest", "-rA", "--tb=short", "-p", "no:cacheprovider", *test_ids]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return TestRun({}, timed_out=True, duration_s=time.monotonic() - started, output=output)
    outcomes, failures, collection_error = parse_report(output)
    return TestRun(outcomes, failures, False, collection_error, time.monotonic() - started, output)
