"""Reproducing a bug from the issue text when no test in the repo fails (the ``hard`` split).

The issue's first ``python`` code block is the reproduction. Its ``print(x)  # expected: y``
lines say what each value should be, and a sentence such as "I expected `ValueError` to be
raised" names an exception the fixed code raises. The check command runs the snippet with each
such print turned into a comparison and ends with a one-line verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEREDOC_END = "AC_REPRO_END"
TIMEOUT_S = 20
FIXED = "VERDICT: issue fixed"
REPRODUCED = "VERDICT: issue reproduced"

_CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
_EXPECTED_PRINT = re.compile(
    r"^(?P<indent>\s*)print\((?P<actual>.*)\)\s*#\s*expected:\s*(?P<value>.+)$"
)
_EXPECTED_RAISE = re.compile(r"expected `(?P<name>[A-Za-z_][\w.]*)` to be raised", re.IGNORECASE)

_CHECK_SCRIPT = """\
import sys, traceback
sys.path.insert(0, ".")
SOURCE = {source!r}
EXPECTED_EXCEPTION = {exception!r}
results = []


def check(actual, expected, text):
    ok = actual == expected
    results.append(ok)
    note = "" if ok else f"  (expected {{expected!r}})"
    print(f"{{'ok   ' if ok else 'WRONG'}} {{text}} -> {{actual!r}}{{note}}")


raised = None
try:
    exec(compile(SOURCE, "issue_snippet.py", "exec"), {{"__name__": "__main__", "check": check}})
except Exception as error:
    raised = error
    traceback.print_exc(limit=-4)
if EXPECTED_EXCEPTION:
    names = [cls.__name__ for cls in type(raised).__mro__] if raised else []
    fixed = EXPECTED_EXCEPTION.rsplit(".", 1)[-1] in names
    print("raised:", type(raised).__name__ if raised else "nothing",
          "| expected:", EXPECTED_EXCEPTION)
else:
    fixed = raised is None and all(results)
print({fixed_line!r} if fixed else {reproduced_line!r})
"""


@dataclass(frozen=True)
class Reproduction:
    snippet: str
    expected_exception: str | None

    def check_source(self) -> str:
        """The snippet with each ``print(x)  # expected: y`` turned into ``check(x, y)``."""
        lines = []
        for line in self.snippet.splitlines():
            match = _EXPECTED_PRINT.match(line)
            if match:
                actual, value = match["actual"], match["value"].strip()
                lines.append(f"{match['indent']}check(({actual}), ({value}), {actual!r})")
            else:
                lines.append(line)
        return "\n".join(lines) + "\n"

    def command(self) -> str:
        script = _CHECK_SCRIPT.format(
            source=self.check_source(),
            exception=self.expected_exception,
            fixed_line=FIXED,
            reproduced_line=REPRODUCED,
        )
        return f"timeout {TIMEOUT_S} python3 - <<'{HEREDOC_END}'\n{script}{HEREDOC_END}"


def from_issue(issue: str) -> Reproduction | None:
    """The reproduction an issue carries, or None when it has no code block."""
    blocks = [b for b in _CODE_BLOCK.findall(issue) if "import" in b or "(" in b]
    if not blocks:
        return None
    raised = _EXPECTED_RAISE.search(issue)
    return Reproduction(blocks[0].strip("\n"), raised["name"] if raised else None)


def verdict(output: str) -> bool | None:
    """True: fixed; False: still reproduced; None: the check did not finish."""
    if FIXED in output:
        return True
    if REPRODUCED in output:
        return False
    return None
