"""What each failing test showed, read from a ``pytest -rA --tb=short`` log: the statement of
the test that failed and pytest's ``E`` lines (the assertion or the exception), plus the
per-test durations of ``--durations=0``."""

from __future__ import annotations

import re
from collections import defaultdict, deque

from pydantic import BaseModel, ConfigDict

_SECTION = re.compile(r"^_{3,} (?:ERROR at (?:setup|teardown) of )?(.+?) _{3,}$")
_FRAME = re.compile(r"^(?P<path>\S+\.py):\d+: in (?P<function>\S+)$")
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
        frame = _FRAME.match(line)
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


def parse_durations(log: str) -> dict[str, float]:
    """Seconds per test id (setup, call and teardown added) from a ``--durations=0`` log."""
    seconds: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        match = _DURATION.match(line.strip())
        if match is not None:
            seconds[match["test"].strip()] += float(match["seconds"])
    return dict(seconds)
