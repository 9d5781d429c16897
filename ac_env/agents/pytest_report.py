"""Reading a pytest run from its (possibly tail-cut) terminal output."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)(?: - (.*))?$", re.MULTILINE)
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|error)\b")
_TALLY = re.compile(
    r"^=*\s*(?:\d+ (?:passed|failed|errors?|skipped|deselected|xfailed|xpassed)"
    r"[^\n]*) in [\d.]+s",
    re.MULTILINE,
)


@dataclass(frozen=True)
class TestRun:
    """What one run showed. ``completed`` is False when no closing tally was printed (a crash,
    a timeout, an edit that failed before the tests ran). ``messages``: each failing test's
    one-line reason as the short summary prints it (cut to the terminal's width, the same for
    every run of that test), "" when it prints none."""

    completed: bool
    passed: int
    failed: int
    failing: tuple[str, ...]
    messages: dict[str, str] = field(default_factory=dict)

    @property
    def all_passed(self) -> bool:
        return self.completed and self.failed == 0 and self.passed > 0

    def tally(self) -> str:
        if not self.completed:
            return "did not complete"
        return f"{self.passed} passed, {self.failed} failed"


def parse_pytest(output: str) -> TestRun:
    tallies = _TALLY.findall(output)
    if not tallies:
        return TestRun(False, 0, 0, ())
    counts = {"passed": 0, "failed": 0, "error": 0}
    for number, kind in _COUNT.findall(tallies[-1]):
        counts["error" if kind.startswith("error") else kind] += int(number)
    messages = {test: reason for test, reason in _FAILED.findall(output)}
    failed = counts["failed"] + counts["error"]
    return TestRun(True, counts["passed"], failed, tuple(messages), messages)
