"""Everything the project reads from pytest's output, in one place.

- ``Outcome``: the one type every pytest run's per-test outcomes are held as (the grader's
  runner, the miner's suite runs, the built-in suite's catalogue builder); ``PASSING`` and
  ``FAILING`` group them.
- ``parse_pytest_log``: per-test outcomes of a ``pytest -rA`` log (the grader, the miner,
  the built-in suite's catalogue).
- ``parse_failures`` / ``parse_durations``: what each failing test showed (its statement and
  ``E`` lines) and per-test seconds (task building, problem statements).
- ``parse_collected``: the test ids of a ``pytest --collect-only -q`` listing, in the suite's
  own order (skipped tests included, which ``-rA`` reports by location only).
- ``summarize_pytest_output``: what a run's terminal output shows an agent, possibly cut to
  its tail: the closing tally, the failing ids and their one-line reasons
  (``TestRunSummary``); ``tally_counts`` reads a tally quoted in any text.
- ``last_test_run``: the last pytest command among executed commands, with its summary
  (extractive summaries, the summary audit, the oracle judge).
- ``FRAME`` and ``failing_lines``: a frame of pytest's short traceback and the
  ``FAILED``/``ERROR`` lines of any output (the judge's evidence).

``parse_pytest_log`` reads the lines that start with an outcome (``PASSED tests/t.py::test_a``,
``FAILED tests/t.py::test_b - AssertionError``), like SWE-bench's ``parse_log_pytest``, with
two differences: when the log has a "short test summary info" section only its last one is
read (so text a test prints cannot pose as an outcome), and a test id may contain spaces
(parametrized ids). A skip reported by location (``SKIPPED [1] tests/t.py:9: reason``) names
no test id and is left out, as ``-rA`` logs give no id for it.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeVar

from pydantic import BaseModel, ConfigDict


class Outcome(StrEnum):
    """A test's outcome in one run: the words pytest's ``-rA`` summary starts a line with, and
    ``MISSING`` for a test asked for that the run named no outcome for (never read from a
    log; the grader counts it failed)."""

    PASSED = "PASSED"
    FAILED = "FAILED"
    ERROR = "ERROR"
    SKIPPED = "SKIPPED"
    XFAIL = "XFAIL"
    XPASS = "XPASS"
    MISSING = "MISSING"


_REPORTED = frozenset(Outcome) - {Outcome.MISSING}


PASSING = frozenset({Outcome.PASSED, Outcome.XFAIL})
"""Outcomes that count as a pass (SWE-bench's rule)."""
FAILING = frozenset({Outcome.FAILED, Outcome.ERROR})
"""Outcomes of a test that ran and failed, in its call (FAILED) or its setup (ERROR)."""

_SUMMARY_HEADER = re.compile(r"^=+ short test summary info =+$")
_SECTION_RULE = re.compile(r"^=+ .* =+$")


def parse_pytest_log(log: str) -> dict[str, Outcome]:
    """Outcome of each test id named in ``log`` (the last report of an id wins)."""
    lines = log.splitlines()
    headers = [i for i, line in enumerate(lines) if _SUMMARY_HEADER.match(line)]
    in_summary = bool(headers)
    outcomes: dict[str, Outcome] = {}
    for line in lines[headers[-1] + 1 :] if headers else lines:
        if in_summary and _SECTION_RULE.match(line):
            break
        word, _, rest = line.partition(" ")
        if word not in _REPORTED:
            continue
        test_id = rest.split(" - ", 1)[0].strip()
        if test_id and not test_id.startswith("["):
            outcomes[test_id] = Outcome(word)
    return outcomes


# What each failing test showed (``pytest -rA --tb=short``) and per-test durations.

_SECTION = re.compile(r"^_{3,} (?:ERROR at (?:setup|teardown) of )?(.+?) _{3,}$")
FRAME = re.compile(r"^(?P<path>\S+\.py):\d+: in (?P<function>\S+)$", re.MULTILINE)
"""A frame of pytest's short traceback (``--tb=short``): ``tests/t.py:12: in test_a``."""
_DURATION = re.compile(r"^(?P<seconds>\d+(?:\.\d+)?)s (?:setup|call|teardown)\s+(?P<test>\S.*)$")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class Failure(BaseModel):
    """``statement``: the line of the test's own file that failed (may be empty);
    ``errors``: pytest's ``E`` lines without ``+ where`` explanations, hints to rerun with
    ``-v``, or object addresses."""

    model_config = ConfigDict(frozen=True)

    statement: str = ""
    errors: list[str] = []

    @property
    def exception(self) -> str | None:
        """The exception's class name when the first ``E`` line names one."""
        first = self.errors[0] if self.errors else ""
        match = re.match(
            r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt))\b", first
        )
        return match.group(1).rsplit(".", 1)[-1] if match else None


def parse_failures(log: str, failing: list[str]) -> dict[str, Failure]:
    """The ``Failure`` of each test id in ``failing`` that has a section in ``log``."""
    by_head: dict[str, deque[str]] = defaultdict(deque)
    for test in failing:
        by_head[test.split("::", 1)[1].replace("::", ".")].append(test)
    found: dict[str, Failure] = {}
    current: str | None = None
    statement, want_statement = "", False
    errors: list[str] = []

    def close() -> None:
        if current is not None and current not in found:
            found[current] = Failure(statement=statement, errors=errors)

    for line in log.splitlines():
        section = _SECTION.match(line)
        if section is not None or (line.startswith("=") and line.endswith("=")):
            close()
            queue = by_head.get(section.group(1)) if section else None
            current = queue.popleft() if queue else None
            statement, errors, want_statement = "", [], False
            continue
        if current is None:
            continue
        frame = FRAME.match(line)
        if frame is not None:
            want_statement = not statement and frame["path"] == current.split("::", 1)[0]
        elif want_statement:
            statement, want_statement = line.strip(), False
        elif line.startswith("E ") and len(errors) < 30:
            text = line[1:].strip()
            if text and not text.startswith(("+", "and ", "Use -v to get")):
                errors.append(_ADDRESS.sub("", text))
    close()
    return found


def parse_collected(log: str) -> list[str]:
    """The test ids a ``pytest --collect-only -q`` log lists (one per line, up to the first
    blank line or section rule), in collection order."""
    ids = []
    for line in log.splitlines():
        if not line.strip() or line.startswith("="):
            break
        if "::" in line:
            ids.append(line)
    return ids


def parse_durations(log: str) -> dict[str, float]:
    """Seconds per test id (setup, call and teardown added) from a ``--durations=0`` log."""
    seconds: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        match = _DURATION.match(line.strip())
        if match is not None:
            seconds[match["test"].strip()] += float(match["seconds"])
    return dict(seconds)


# What a run's terminal output shows (any reporting options; possibly cut to its tail).
_FAILED_LINE = re.compile(r"^(?:FAILED|ERROR) (\S.*?)(?: - (.*))?$", re.MULTILINE)
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|error)\b")
_TALLY = re.compile(
    r"^=*\s*(?:\d+ (?:passed|failed|errors?|skipped|deselected|xfailed|xpassed)"
    r"[^\n]*) in [\d.]+s",
    re.MULTILINE,
)


@dataclass(frozen=True)
class TestRunSummary:
    """What one run showed. ``completed`` is False when no closing tally was printed (a crash,
    a timeout, an edit that failed before the tests ran). ``failed`` counts failures and
    errors. ``messages``: each failing test's one-line reason as the short summary prints it
    (cut to the terminal's width, the same for every run of that test), "" when it prints
    none. ``tally_line``: the closing tally as printed (``2 failed, 8 passed in 0.10s``)."""

    __test__ = False  # not a pytest test class, whatever its name

    completed: bool
    passed: int
    failed: int
    failing: tuple[str, ...]
    messages: dict[str, str] = field(default_factory=dict)
    tally_line: str = ""

    @property
    def all_passed(self) -> bool:
        return self.completed and self.failed == 0 and self.passed > 0

    def tally(self) -> str:
        if not self.completed:
            return "did not complete"
        return f"{self.passed} passed, {self.failed} failed"


def tally_counts(text: str) -> tuple[int, int] | None:
    """(passed, failed-or-error) from the ``N passed`` / ``N failed`` / ``N errors`` words of
    ``text`` (a tally line, or one quoted in a summary); None when it names none."""
    found = _COUNT.findall(text)
    if not found:
        return None
    passed = sum(int(n) for n, kind in found if kind == "passed")
    return passed, sum(int(n) for n, kind in found if kind != "passed")


def failing_lines(output: str) -> dict[str, str]:
    """Each test id (or test file, for a collection error) a ``FAILED`` or ``ERROR`` line of
    ``output`` names, in order, with the line's one-line reason ("" when it gives none). A test
    id may contain spaces (parametrized ids); the reason starts after the first `` - ``."""
    return {test: reason for test, reason in _FAILED_LINE.findall(output)}


def summarize_pytest_output(output: str) -> TestRunSummary:
    tallies = _TALLY.findall(output)
    if not tallies:
        return TestRunSummary(False, 0, 0, ())
    passed, failed = tally_counts(tallies[-1]) or (0, 0)
    messages = failing_lines(output)
    tally_line = tallies[-1].strip("= ")
    return TestRunSummary(True, passed, failed, tuple(messages), messages, tally_line)


class CommandOutput(Protocol):
    """An executed command and what it printed (a trajectory's ``ToolResult``, the
    compaction module's ``CommandRecord``)."""

    @property
    def command(self) -> str: ...

    @property
    def output(self) -> str: ...


Record = TypeVar("Record", bound=CommandOutput)


def last_test_run(
    records: Sequence[Record], completed: bool = False
) -> tuple[Record, TestRunSummary] | None:
    """The last record whose command runs pytest, with what its output shows; with
    ``completed``, the last one that printed a closing tally."""
    for record in reversed(records):
        if "pytest" not in record.command:
            continue
        run = summarize_pytest_output(record.output)
        if run.completed or not completed:
            return record, run
    return None
