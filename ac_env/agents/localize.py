"""Fault localization the reference agent runs as one shell command, and the parser of its report.

The command is a short stdlib-only script (it runs with the task's own ``python3`` inside the
sandbox). It records which lines of the repository's non-test code each test executes, then
ranks the lines by the Ochiai score: executed by every failing run and by few passing ones ranks
first. The failing runs are the failing tests, or, when the repo has no failing test (the
``hard`` split), the issue's reproduction snippet. The known failing tests run first, then the
rest of the suite until ``TRACE_BUDGET_S`` is spent: on a large real suite the ranking then
rests on the passing tests traced so far instead of on nothing (the command's own time limit).
Each reported line names its enclosing function and that function's line range, so the agent
can read exactly that function next.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEREDOC_END = "AC_LOCALIZE_END"
TOP_LINES = 20
TIMEOUT_S = 55
TRACE_BUDGET_S = 40

_SCRIPT = """\
import ast, inspect, linecache, math, os, sys, time
import pytest

ROOT = os.getcwd() + os.sep
SNIPPET = {snippet!r}
FAILING = {failing!r}
DEADLINE = time.monotonic() + {budget}
ARGS = ["-q", "-p", "no:cacheprovider", "--tb=no", "--no-header"]
hits, executed, spans = {{}}, set(), {{}}
runs = {{"failed": 0, "passed": 0}}


def is_source(path):
    rel = path[len(ROOT):]
    name = os.path.basename(rel)
    return (path.startswith(ROOT) and not rel.startswith("tests" + os.sep)
            and os.sep + "tests" + os.sep not in rel and not name.startswith("test_")
            and name != "conftest.py")


def trace(frame, event, arg):
    code = frame.f_code
    if not code.co_flags & inspect.CO_OPTIMIZED or not is_source(code.co_filename):
        return None  # module and class bodies run once, at import
    if event == "line":
        executed.add((code.co_filename[len(ROOT):], frame.f_lineno))
    return trace


def record(failed):
    runs["failed" if failed else "passed"] += 1
    for key in executed:
        hits.setdefault(key, [0, 0])[0 if failed else 1] += 1
    executed.clear()


class Spectrum:
    def __init__(self, skip=()):
        self.skip = set(skip)

    def pytest_collection_modifyitems(self, items):
        items[:] = [item for item in items if item.nodeid not in self.skip]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        executed.clear()
        sys.settrace(trace)
        yield
        sys.settrace(None)

    def pytest_runtest_logreport(self, report):
        if report.when == "call":
            record(report.failed)

    def pytest_runtest_teardown(self, item):
        if time.monotonic() > DEADLINE:
            item.session.shouldstop = "the tracing time budget is spent"


if SNIPPET:
    sys.path.insert(0, ROOT)
    sys.settrace(trace)
    try:
        exec(compile(SNIPPET, "issue_snippet.py", "exec"), {{"__name__": "__main__"}})
    except BaseException as err:
        print("snippet raised", type(err).__name__ + ":", err)
    sys.settrace(None)
    record(True)
if FAILING:
    pytest.main(ARGS + FAILING, plugins=[Spectrum()])
pytest.main(ARGS, plugins=[Spectrum(skip=FAILING)])
failed_runs = max([f for f, _ in hits.values()] + [0])


def span(path, line):
    if path not in spans:
        with open(path) as handle:
            tree = ast.parse(handle.read())
        spans[path] = [(n.lineno, n.end_lineno, n.name) for n in ast.walk(tree)
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    inside = [s for s in spans[path] if s[0] <= line <= s[1]]
    return min(inside, key=lambda s: s[1] - s[0]) if inside else (line, line, "<module>")


scored = []
for (path, line), (failed, passed) in hits.items():
    if failed:
        score = failed / math.sqrt(failed_runs * (failed + passed))
        scored.append((-round(score, 2), passed, path, line))
scored.sort()
print(f"suspicious lines (failing runs: {{runs['failed']}}, passing runs: {{runs['passed']}}):")
for neg_score, passed, path, line in scored[:{top}]:
    start, end, name = span(path, line)
    code = linecache.getline(path, line).strip()
    print(f"{{-neg_score:.2f}} {{path}}:{{line}} in {{name}} [{{start}}-{{end}}] | {{code}}")
"""

_LINE = re.compile(
    r"^(?P<score>\d\.\d\d) (?P<path>\S+):(?P<line>\d+) in (?P<func>\S+) "
    r"\[(?P<start>\d+)-(?P<end>\d+)\] \| (?P<code>.*)$",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Suspect:
    """One suspicious line and the function around it."""

    path: str
    line: int
    score: float
    function: str
    start: int
    end: int


def localize_command(
    snippet: str | None = None,
    failing: list[str] | None = None,
    budget_s: float = TRACE_BUDGET_S,
) -> str:
    """The shell command: the script fed to ``python3`` through a quoted heredoc. It runs
    ``failing`` (test ids), then the rest of the suite within the time budget; ``snippet``,
    the issue's reproduction, counts as one more failing run. ``budget_s``: seconds of
    tracing after which the rest of the suite is left out."""
    script = _SCRIPT.format(
        snippet=snippet or "", failing=list(failing or []), budget=budget_s, top=TOP_LINES
    )
    return f"timeout {TIMEOUT_S} python3 - <<'{HEREDOC_END}'\n{script}{HEREDOC_END}"


def parse_report(output: str) -> list[Suspect]:
    """Suspects in rank order; empty when the report holds none (e.g. the run crashed)."""
    return [
        Suspect(
            path=m["path"],
            line=int(m["line"]),
            score=float(m["score"]),
            function=m["func"],
            start=int(m["start"]),
            end=int(m["end"]),
        )
        for m in _LINE.finditer(output)
    ]
