"""What the execution history shows when a step is proposed, and what a summary may assert.

The method's Judge "only receives the execution history that exists at that moment". This
module reads that history (the commands run so far, their outputs, the task statement) and
nothing else: no gold patch, no ground truth. The oracle judge decides from it, writes its
summaries from it, and checks the policy's summaries against it; ``unsupported_claims`` is
also the measurement of how often a judge's summaries assert what the history does not show.

**Where the bug is** (``Evidence.places``). A *place* (a function in a product file) is shown
once the history holds both

- a *pointer* to it from a failing run: a traceback frame in product code (pytest's
  ``path:12: in name``, Python's ``File "path", line 12, in name``), the top line of a fault
  ranking of the failing runs (``ac_env.agents.localize``), or a call in a failing test's
  failing statement (``>   assert add(2, 3) == 5``, ``+  where -1 = add(2, 3)``: a name, no
  file); and
- the function's *code*: an output that shows its ``def`` line and its body (``cat``,
  ``sed -n``, ``grep -A``, a long traceback), attributable to that file.

So a bulk read with no failing run behind it points nowhere, a grep hit
(``path:4:def add(a, b):``) shows no body, and a traceback frame alone shows one line, not
the function. A failing run is a pytest run that reports failures or errors, or any output
with a Python traceback (a reproduction snippet).

**Workspace** (``last_change_step``, ``verified``): the last command that may have changed
files (anything but a read, a search or a plain test run), and whether a completed test run at
or after it passed. The real ``git diff`` says *what* changed; this says whether the history
shows it verified.

**Claims** (``unsupported_claims``): a working-state summary's assertions, read from the
template's sections with regular expressions (a heuristic; its rules are listed there).
"""

from __future__ import annotations

import builtins
import keyword
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ac_env.agents.localize import parse_report
from ac_env.analysis.audit import RunTally
from ac_env.analysis.metrics import files_read_by
from ac_env.compaction import parse_sections
from ac_env.pytest_log import FRAME, failing_lines, summarize_pytest_output
from ac_env.trajectory import ToolResult, Trajectory

PointerKind = Literal["frame", "ranking", "call", "gold_patch"]
"""How a place was pointed to; ``gold_patch`` only by the ground-truth oracle, never here."""

_SEARCH_OR_READ = {"grep", "rg", "find", "ls", "tree", "ag", "cat", "head", "tail", "nl", "less"}
_HARMLESS = {"cd", "export", "echo", "true", "[", "test", "printf", "wc", "sort", "uniq", "pwd"}
_GIT_QUERIES = {"diff", "status", "log", "show", "grep", "ls-files", "blame"}
_REDIRECT = re.compile(r"^\d*>>?(?!&)(?P<target>.*)$")
_PYTHON_FRAME = re.compile(
    r'^\s*File "(?P<path>[^"]+\.py)", line \d+, in (?P<function>[A-Za-z_]\w*)$', re.M
)
_LOCATION = re.compile(r"^(?P<path>\S+\.py):\d+: \S", re.M)
_DEF = re.compile(r"^(?P<indent>\s*)(?:async\s+)?def\s+(?P<name>[A-Za-z_]\w*)\s*\(")
_GREP_PREFIX = re.compile(r"^(?P<path>[\w./-]+\.py)[:-]\d+[:-]")
_NUMBER_PREFIX = re.compile(r"^\s*\d+(?:\t|[:-])")
_HEAD_HEADER = re.compile(r"^==> (?P<path>\S+\.py) <==$")
_CALL = re.compile(r"(?:\.|\b)([A-Za-z_]\w*)\s*\(")
_WHERE_CALL = re.compile(r"\bwhere\b.*?=\s*(?:[\w.]+\.)?([A-Za-z_]\w*)\s*\(")
_NOT_CALLS = set(dir(builtins)) | set(keyword.kwlist) | {"raises", "approx", "warns", "fail"}
_PATH = re.compile(r"(?<![\w/.-])[\w.-]+(?:/[\w.-]+)*\.py\b(?!::)")
_TEST_ID = re.compile(r"[\w./-]+\.py::[\w\[\].=-]+")
_BACKTICKED_NAME = re.compile(r"`([A-Za-z_]\w*)(?:\(\))?`")
_CONCLUSION = re.compile(r"\b(bug|root cause|cause[sd]?|culprit|fault|is wrong)\b", re.I)
_RULED_OUT_FILE = re.compile(r"^\s*[-*]?\s*`?(?P<path>[\w./-]+\.py)\b(?!::)")
_WORDS = {"submit"}  # backticked words of the action format, not of the repository
_VERIFIED = re.compile(r"(?<!not )(?<!un)\bverified\b", re.I)
_NOT_VERIFIED = re.compile(r"\bnot verified\b|\bunverified\b", re.I)


@dataclass(frozen=True)
class Pointer:
    """A failing run pointing at a function: ``path`` None when only its name is known."""

    kind: PointerKind
    function: str
    path: str | None
    step: int


@dataclass(frozen=True)
class Place:
    """A function the history shows the bug to be in (module docstring): its file, the step
    from which both the pointer and the code were in the history, and how it was pointed to."""

    path: str
    function: str
    step: int
    pointer: PointerKind
    code_step: int

    def evidence(self) -> str:
        """One sentence of what the history shows, for a summary's ``## Known``."""
        how = {
            "frame": "a failing run's traceback passes through it",
            "ranking": "the fault ranking of the failing runs puts it first",
            "call": "a failing test's failing statement calls it",
        }.get(self.pointer)
        if how is None:  # ground truth: no history behind it
            return f"The bug is in `{self.function}` in {self.path}."
        return (
            f"`{self.function}` in {self.path}: {how}; its code was read at step {self.code_step}."
        )


@dataclass(frozen=True)
class Evidence:
    """The history at one step (module docstring). ``failing``: the failing tests of the
    last pytest run (complete or not); ``last_run``: the tally of the last completed one,
    every pytest session in its output counted (``RunTally.of``)."""

    places: tuple[Place, ...]
    failing: tuple[str, ...]
    last_run: RunTally | None
    last_run_step: int | None
    last_change_step: int | None
    files_read: tuple[str, ...]
    shown: str
    """Every command and output, and the task statement: what the history has shown."""

    @classmethod
    def of(cls, results: Sequence[ToolResult], task_statement: str = "") -> Evidence:
        pointers: list[Pointer] = []
        code: list[tuple[str, str, int]] = []  # (path, function, step)
        failing: tuple[str, ...] = ()
        last_run: RunTally | None = None
        last_run_step = last_change_step = None
        read: dict[str, None] = {}
        for result in results:
            if "pytest" in result.command:
                run = summarize_pytest_output(result.output)
                failing = run.failing
                if run.completed:  # every session of the output counted, as the audit does
                    last_run, last_run_step = RunTally.of(result.output), result.step
            if may_change_workspace(result.command):
                last_change_step = result.step
            pointers.extend(_pointers(result))
            code.extend(_code_shown(result))
            read.update(dict.fromkeys(files_read_by(result)))
        shown = "\n".join([task_statement, *(f"{r.command}\n{r.output}" for r in results)])
        return cls(
            places=_places(pointers, code),
            failing=failing,
            last_run=last_run,
            last_run_step=last_run_step,
            last_change_step=last_change_step,
            files_read=tuple(read),
            shown=shown,
        )

    @property
    def located(self) -> bool:
        return bool(self.places)

    @property
    def verified(self) -> bool:
        """A completed test run passed (no failure, some pass) at or after the last change."""
        if self.last_run is None or self.last_run_step is None:
            return False
        after_change = self.last_change_step is None or self.last_run_step >= self.last_change_step
        return after_change and self.last_run.failed == 0 and self.last_run.passed > 0

    def located_since(self, step: int) -> Place | None:
        """The first place shown after ``step``."""
        return next((p for p in self.places if p.step > step), None)


# ---- pointers and code ---------------------------------------------------------------------


def is_product_path(path: str) -> bool:
    """Repository code that is not a test: no test directory or test file, no installed
    library, no interpreter-internal frame."""
    if path.startswith("<") or "site-packages" in path or "/lib/python" in path:
        return False
    parts = path.split("/")
    name = parts[-1]
    if any(part in ("tests", "test", "testing") for part in parts[:-1]):
        return False
    return not (name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py")


def _is_failing_run(result: ToolResult) -> bool:
    output = result.output
    if "Traceback (most recent call last):" in output:
        return True
    if "pytest" in result.command or "suspicious lines" in output:
        run = summarize_pytest_output(output)
        failed_tests = any("::" in test for test in failing_lines(output))
        return run.failed > 0 or failed_tests or "\nE   " in output
    return False


def _pointers(result: ToolResult) -> list[Pointer]:
    if not _is_failing_run(result):
        return []
    output = result.output
    found: list[Pointer] = []
    for pattern in (FRAME, _PYTHON_FRAME):
        for match in pattern.finditer(output):
            if is_product_path(match["path"]) and match["function"].isidentifier():
                found.append(Pointer("frame", match["function"], match["path"], result.step))
    suspects = parse_report(output)
    if suspects:
        top = suspects[0].score
        for suspect in suspects:
            if suspect.score == top and is_product_path(suspect.path):
                found.append(Pointer("ranking", suspect.function, suspect.path, result.step))
    for name in _failing_calls(output):
        found.append(Pointer("call", name, None, result.step))
    return found


def _failing_calls(output: str) -> list[str]:
    """Names called in a failing test's failing statement: pytest's ``>`` line, the statement
    under a test file's short-traceback frame, and its ``+  where x = name(...)`` lines."""
    lines = output.splitlines()
    statements: list[str] = []
    names: dict[str, None] = {}
    for index, line in enumerate(lines):
        if line.startswith(">"):
            statements.append(line[1:])
        elif line.startswith("E ") and "where" in line:
            names.update(dict.fromkeys(_WHERE_CALL.findall(line)))
        frame = FRAME.match(line)
        if frame and not is_product_path(frame["path"]) and index + 1 < len(lines):
            statements.append(lines[index + 1])
    for statement in statements:
        names.update(dict.fromkeys(_CALL.findall(statement)))
    return [n for n in names if n not in _NOT_CALLS and not n.startswith("test")]


def _code_shown(result: ToolResult) -> list[tuple[str, str, int]]:
    """(path, function, step) for each ``def`` shown with its body, in a product file. The
    file: a grep hit's path, a ``head`` header, else the one Python file the command reads or
    names, else (a long pytest traceback) the location line closing the frame."""
    read = [p for p in files_read_by(result) if p.endswith(".py")]
    named = list(dict.fromkeys(_PATH.findall(result.command)))
    only_file = read[0] if len(read) == 1 else (named[0] if len(named) == 1 else None)
    lines = result.output.splitlines()
    shown: list[tuple[str, str, int]] = []
    header: str | None = None
    for index, raw in enumerate(lines):
        head = _HEAD_HEADER.match(raw)
        if head:
            header = head["path"]
            continue
        prefix = _GREP_PREFIX.match(raw)
        line = _strip_prefix(raw)
        definition = _DEF.match(line)
        if definition is None:
            continue
        body = next((_strip_prefix(n) for n in lines[index + 1 :] if _strip_prefix(n).strip()), "")
        if len(body) - len(body.lstrip()) <= len(definition["indent"]):
            continue
        path = (
            prefix["path"]
            if prefix
            else header or only_file or _next_location(lines, index, result)
        )
        if path is not None and is_product_path(path.removeprefix("./")):
            shown.append((path.removeprefix("./"), definition["name"], result.step))
    return shown


def _strip_prefix(line: str) -> str:
    """The source text of an output line: without ``cat -n``'s / ``grep -n``'s line numbers,
    a grep hit's path, or pytest's ``>`` marker."""
    prefix = _GREP_PREFIX.match(line)
    if prefix:
        return line[prefix.end() :]
    number = _NUMBER_PREFIX.match(line)
    if number:
        return line[number.end() :]
    return " " + line[1:] if line.startswith(">") else line


def _next_location(lines: list[str], index: int, result: ToolResult) -> str | None:
    """In a long pytest traceback, the ``path:12: ...`` line that closes a frame's code."""
    if "pytest" not in result.command:
        return None
    for line in lines[index + 1 :]:
        match = _LOCATION.match(line)
        if match:
            return match["path"]
    return None


def _places(pointers: list[Pointer], code: list[tuple[str, str, int]]) -> tuple[Place, ...]:
    by_name: dict[str, list[tuple[str, int]]] = {}
    for path, function, step in code:
        by_name.setdefault(function, []).append((path, step))
    places: dict[tuple[str, str], Place] = {}
    for pointer in pointers:
        for path, code_step in by_name.get(pointer.function, []):
            if pointer.path is not None and not _same_file(pointer.path, path):
                continue
            step = max(pointer.step, code_step)
            known = places.get((path, pointer.function))
            if known is None or step < known.step:
                places[(path, pointer.function)] = Place(
                    path, pointer.function, step, pointer.kind, code_step
                )
    return tuple(sorted(places.values(), key=lambda p: (p.step, p.path, p.function)))


def _same_file(a: str, b: str) -> bool:
    """Paths to one file, one possibly absolute (``/testbed/pkg/mod.py`` and ``pkg/mod.py``)."""
    a, b = a.removeprefix("./"), b.removeprefix("./")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


# ---- commands ------------------------------------------------------------------------------


def command_parts(command: str) -> list[list[str]]:
    """The words of each simple command of ``command`` (split at ``&&``, ``||``, ``;``,
    ``|`` and newlines; comments dropped)."""
    parts = []
    for part in re.split(r"&&|\|\||;|\||\n", command):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            words = part.split()
        if words:
            parts.append(words)
    return parts


def _only_looks(words: list[str]) -> bool:
    first = words[0]
    in_place = any(w == "-i" or w.startswith("-i.") for w in words[1:])
    return first in _SEARCH_OR_READ or (first in {"sed", "awk"} and not in_place)


def is_search_or_read(command: str) -> bool:
    """A command that only looks: grep/find/ls, or shows a file (cat, head, ``sed -n``)."""
    parts = command_parts(command)
    return bool(parts) and all(_only_looks(words) for words in parts)


def may_change_workspace(command: str) -> bool:
    """Anything but reads, searches, plain test runs, ``git`` queries and shell bookkeeping
    (``cd``, ``export``, ``[ -d src ]``); a redirection into a file counts as a change."""
    for words in command_parts(command):
        if _redirects_to_file(words):
            return True
        if words[0] == "timeout" and len(words) > 2:
            words = words[2:]
        if _only_looks(words) or words[0] in _HARMLESS or "pytest" in words:
            continue
        if words[0] == "git" and len(words) > 1 and words[1] in _GIT_QUERIES:
            continue
        return True
    return False


def _redirects_to_file(words: list[str]) -> bool:
    for index, word in enumerate(words):
        match = _REDIRECT.match(word)
        if match is None:
            continue
        target = match["target"] or (words[index + 1] if index + 1 < len(words) else "")
        if target and target != "/dev/null":
            return True
    return False


# ---- what a summary asserts ----------------------------------------------------------------


def unsupported_claims(summary: str, evidence: Evidence) -> list[str]:
    """The assertions of ``summary`` that ``evidence`` (the history when it was written) does
    not support, one line each. The rules, by claim class:

    - **location**: a ``## Known`` line that says where the bug is or what causes it (``bug``,
      ``root cause``, ``cause``, ``culprit``, ``fault``, ``is wrong``), or that names both a
      backticked function and a product file: each function and file it names must be a
      shown place's (``Evidence.places``);
    - **named, never shown**: a file path, test id or backticked name in ``Known``,
      ``Ruled out``, ``Workspace``, ``Tests`` or ``Next`` that no command, output or the task
      statement contains;
    - **ruled out**: a file a ``## Ruled out`` line starts with must have been read, and a
      place must be shown in another file (else only the gold patch could rule it out);
    - **verified**: a ``Workspace`` that calls a change verified needs a completed test run
      at or after the last change that passed (``Evidence.verified``).
    """
    sections = parse_sections(summary)
    known = sections.get("known", "")
    ruled_out = sections.get("ruled out", "")
    workspace = sections.get("workspace", sections.get("workspace state", ""))
    tests = sections.get("tests", "")
    next_step = next(
        (sections[a] for a in ("next", "next step", "next steps", "plan") if a in sections), ""
    )
    problems = [_location_problem(line, evidence) for line in known.splitlines()]
    checked = {
        "known": known,
        "ruled out": ruled_out,
        "workspace": workspace,
        "tests": tests,
        "next": next_step,
    }
    for section, text in checked.items():
        named = _PATH.findall(text) + _TEST_ID.findall(text) + _BACKTICKED_NAME.findall(text)
        never = [n for n in dict.fromkeys(named) if n not in _WORDS and not _shown(n, evidence)]
        if never:
            problems.append(f"{section}: names {', '.join(never)}, never shown in the history")
    place_files = [p.path for p in evidence.places]
    for line in ruled_out.splitlines():
        match = _RULED_OUT_FILE.match(line)
        if match is None:
            continue
        path = match["path"].removeprefix("./")
        if path not in evidence.files_read:
            problems.append(f"ruled out: {path} was never read")
        elif not any(not _same_file(path, f) for f in place_files):
            problems.append(f"ruled out: {path}, while no place is shown in another file")
    claims_verified = _VERIFIED.search(workspace) and not _NOT_VERIFIED.search(workspace)
    if claims_verified and not evidence.verified:
        problems.append(
            "workspace: claims a verified change; no test run after the last change passed"
        )
    return [p for p in problems if p]


def _location_problem(line: str, evidence: Evidence) -> str:
    names = [n for n in _BACKTICKED_NAME.findall(line) if n not in _NOT_CALLS]
    paths = [p for p in _PATH.findall(line) if is_product_path(p)]
    if not (_CONCLUSION.search(line) or (names and paths)):
        return ""
    unshown = [n for n in names if n not in {p.function for p in evidence.places}]
    unshown += [p for p in paths if not any(_same_file(p, q.path) for q in evidence.places)]
    if not unshown:
        return ""
    return (
        f"location: '{line.strip()[:80]}' names {', '.join(unshown)}, where no failing run "
        "points with its code read"
    )


def _shown(name: str, evidence: Evidence) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", evidence.shown) is not None


@dataclass(frozen=True)
class SummaryClaims:
    """The unsupported assertions of one summary a trajectory's compaction kept."""

    step: int
    summarizer: str
    problems: list[str]


def summary_claims(trajectory: Trajectory, task_statement: str) -> list[SummaryClaims]:
    """Each summary a compaction of ``trajectory`` kept (the policy's, a judge's or the
    fallback's), checked against the history before it."""
    results = trajectory.tool_results()
    found = []
    for event in trajectory.compactions():
        if event.trigger == "masking" or not event.summary:
            continue
        before = [r for r in results if r.step < event.step]
        problems = unsupported_claims(event.summary, Evidence.of(before, task_statement))
        found.append(SummaryClaims(event.step, event.summarizer, problems))
    return found
