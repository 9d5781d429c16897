"""Per-test outcomes from a ``pytest -rA`` log.

Reads the lines that start with an outcome (``PASSED tests/t.py::test_a``,
``FAILED tests/t.py::test_b - AssertionError``), like SWE-bench's ``parse_log_pytest``, with
two differences: when the log has a "short test summary info" section only its last one is
read (so text a test prints cannot pose as an outcome), and a test id may contain spaces
(parametrized ids). A skip reported by location (``SKIPPED [1] tests/t.py:9: reason``) names
no test id and is left out, as ``-rA`` logs give no id for it.
"""

from __future__ import annotations

import re
from enum import StrEnum


class Outcome(StrEnum):
    PASSED = "PASSED"
    FAILED = "FAILED"
    ERROR = "ERROR"
    SKIPPED = "SKIPPED"
    XFAIL = "XFAIL"
    XPASS = "XPASS"


PASSING = frozenset({Outcome.PASSED, Outcome.XFAIL})
"""Outcomes that count as a pass (SWE-bench's rule)."""

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
        if word not in Outcome.__members__:
            continue
        test_id = rest.split(" - ", 1)[0].strip()
        if test_id and not test_id.startswith("["):
            outcomes[test_id] = Outcome(word)
    return outcomes
