"""Other copies of a function in the repository, and the candidate edits their differences give.

Repositories often keep a function twice: a deprecated copy for old callers, a vendored or
backported version. Where a copy differs from the function being read, each difference is a
candidate repair made of code that exists, not guessed. It is also the only kind of candidate
that can bring back a deleted statement: the lines around a gap say nothing about what was
there. A copy is only evidence: it may be older and wrong in places of its own, so each
difference is tried and kept only when the tests say so, like any other candidate.

The command is a stdlib script run with the task's ``python3``: it finds every other
definition of the same name in the repo's non-test code, keeps those similar enough to be
copies, and prints each difference as a hunk on the file's own line numbers (an insertion or a
deletion is anchored on the line before it), which ``parse_twins`` turns into edits.
"""

from __future__ import annotations

import re

from ac_env.agents.repairs import Edit

HEREDOC_END = "AC_TWINS_END"
MIN_SIMILARITY = 0.6
MAX_COPIES = 3
PRIORITY = -1  # before every template at the same rank

_SCRIPT = """\
import ast, difflib, os

PATH, NAME, START, END = {path!r}, {name!r}, {start}, {end}


def definitions(path):
    try:
        with open(path) as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []
    return [(n.lineno, n.end_lineno) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == NAME]


def source_files():
    for folder, dirs, files in os.walk("."):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("tests", "test"))
        for name in sorted(files):
            if name.endswith(".py") and not name.startswith("test_") and name != "conftest.py":
                yield os.path.relpath(os.path.join(folder, name))


with open(PATH) as handle:
    mine = handle.read().split("\\n")[START - 1 : END]
copies = []
for path in source_files():
    for start, end in definitions(path):
        if (path, start) == (PATH, START):
            continue
        with open(path) as handle:
            theirs = handle.read().split("\\n")[start - 1 : end]
        ratio = difflib.SequenceMatcher(None, mine, theirs, autojunk=False).ratio()
        if ratio >= {min_similarity}:
            copies.append((-ratio, path, start, end, theirs))
copies.sort()
print(f"other copies of {{NAME}} ({{PATH}}:{{START}}-{{END}}): {{len(copies)}}")
for negative, path, start, end, theirs in copies[:{max_copies}]:
    if theirs == mine:
        print(f"copy {{path}}:{{start}}-{{end}} is identical")
        continue
    print(f"copy {{path}}:{{start}}-{{end}} (similarity {{-negative:.2f}})")
    matcher = difflib.SequenceMatcher(None, mine, theirs, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i1 == i2 or j1 == j2:  # an insertion or a deletion: anchor it on the line before
            if i1 == 0:
                continue
            i1, j1 = i1 - 1, j1 - 1
        print(f"@@ {{PATH}}:{{START + i1}}")
        print("\\n".join(["-" + line for line in mine[i1:i2]]
                        + ["+" + line for line in theirs[j1:j2]]))
"""

_COPY = re.compile(r"^copy (?P<path>\S+):\d+-\d+ \(similarity [\d.]+\)$")
_HUNK = re.compile(r"^@@ (?P<path>\S+):(?P<line>\d+)$")


def twins_command(path: str, name: str, start: int, end: int) -> str:
    """The shell command comparing ``path``'s function ``name`` (lines ``start``-``end``)
    with every other copy of it in the repository."""
    script = _SCRIPT.format(
        path=path,
        name=name,
        start=start,
        end=end,
        min_similarity=MIN_SIMILARITY,
        max_copies=MAX_COPIES,
    )
    return f"python3 - <<'{HEREDOC_END}'\n{script}{HEREDOC_END}"


def parse_twins(output: str) -> list[Edit]:
    """One edit per difference the report shows: make these lines read as the copy's."""
    edits: list[Edit] = []
    copy = ""
    anchor: tuple[str, int] | None = None  # where the hunk being read applies
    old: list[str] = []
    new: list[str] = []
    for row in [*output.splitlines(), ""]:
        if anchor is not None and row.startswith("-") and not new:
            old.append(row[1:])
            continue
        if anchor is not None and row.startswith("+"):
            new.append(row[1:])
            continue
        if anchor is not None and old and new:
            path, line = anchor
            edits.append(
                Edit(path, line, "\n".join(old), "\n".join(new), f"as in {copy}", PRIORITY)
            )
        anchor, old, new = None, [], []
        if match := _COPY.match(row):
            copy = match["path"]
        elif match := _HUNK.match(row):
            anchor = (match["path"], int(match["line"]))
    return edits
