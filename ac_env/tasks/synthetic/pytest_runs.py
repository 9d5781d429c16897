"""Run a task repo's tests with a time limit and read the per-test outcomes.

Tests run with the interpreter task code runs with in sandboxes (Debian's ``/usr/bin/python3``
when present). No isolation: this module only ever runs the suite's own, known code.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

DEBIAN_PYTHON = Path("/usr/bin/python3")
DEFAULT_TEST_PYTHON = str(DEBIAN_PYTHON) if DEBIAN_PYTHON.exists() else sys.executable
SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL) (\S+)")
SECTION_HEADER = re.compile(r"^_{3,} (?:ERROR at \w+ of )?(\S+) _{3,}$")


@dataclass(frozen=True)
class TestRun:
    """What one pytest run reported: outcome per node id (``passed``, ``failed``,
    ``error``, ...), per failure the failing test statement followed by pytest's ``E``
    lines, and whether it timed out or could not collect a test file."""

    outcomes: dict[str, str]
    messages: dict[str, str] = field(default_factory=dict)
    timed_out: bool = False
    collection_error: bool = False
    duration_s: float = 0.0
    output: str = ""

    def failing(self) -> set[str]:
        return {test for test, outcome in self.outcomes.items() if outcome in ("failed", "error")}

    def passing(self) -> set[str]:
        return {test for test, outcome in self.outcomes.items() if outcome == "passed"}


def parse_report(output: str) -> tuple[dict[str, str], dict[str, str], bool]:
    """(outcomes, failure messages, collection error) from ``pytest -rA --tb=short`` text."""
    outcomes: dict[str, str] = {}
    collection_error = False
    for line in output.splitlines():
        match = SUMMARY_LINE.match(line)
        if match is None:
            continue
        kind, test = match.groups()
        if "::" not in test:
            collection_error = True
            continue
        outcomes[test] = kind.lower()
    return outcomes, _failure_messages(output, outcomes), collection_error


def _failure_messages(output: str, outcomes: dict[str, str]) -> dict[str, str]:
    """Each failure section's test statement and ``E`` lines, keyed by node id.

    The first line is the statement of the test function that failed (the line after the
    section's first ``tests/...: in test_x`` frame), the rest are the ``E`` lines.
    """
    by_name = {test.split("::", 1)[1].replace("::", "."): test for test in outcomes}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    expect_statement = False
    for line in output.splitlines():
        header = SECTION_HEADER.match(line)
        if header is not None:
            test = by_name.get(header.group(1))
            current = sections.setdefault(test, [""]) if test else None
            expect_statement = False
        elif line.startswith("=") and "short test summary" in line:
            current = None
        elif current is None:
            continue
        elif expect_statement:
            current[0] = current[0] or line.strip()
            expect_statement = False
        elif line.startswith("tests/") and ": in test" in line:
            expect_statement = not current[0]
        elif line.startswith("E "):
            current.append(line[1:].strip())
    return {test: "\n".join(lines) for test, lines in sections.items()}


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
    outcomes, messages, collection_error = parse_report(output)
    return TestRun(outcomes, messages, False, collection_error, time.monotonic() - started, output)
