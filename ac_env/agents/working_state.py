"""The reference agent's working state, and its round trip through a working-state summary.

The agent is stateless between calls: it rebuilds this state from the observation each turn.
After a compaction the only record of earlier turns is the summary, so the summary holds every
field the agent needs (as readable Markdown lines under ``SUMMARY_TEMPLATE``'s sections; edits
as one JSON object per line). A summary without the suspect locations makes the agent locate
again; without the failing tests, it runs the suite again. The relevant code is carried too:
each function read (as its ``read`` step names it) with its numbered lines as the files hold
them, under ``## Relevant code``, so the agent goes on trying edits without reading again.
What other copies of a function showed is carried as a confirmed finding.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ac_env.actions import SUMMARY_HEADER
from ac_env.agents.localize import Suspect
from ac_env.agents.repairs import Edit
from ac_env.compaction import parse_sections

_SUSPECT = re.compile(
    r"^- suspect: (?P<path>\S+):(?P<line>\d+) in (?P<func>\S+) "
    r"\[(?P<start>\d+)-(?P<end>\d+)\] score (?P<score>[\d.]+)$"
)
_FAILING_TESTS = "- failing tests: "
_FAILURES = "- how they fail: "
_FROM_ISSUE = "- failing signal: the issue's reproduction snippet (no test in the repo fails)"
_COMPARED = "- compared with its other copies: "
_TRIED = "- tried: "
_FIX = "- candidate fix applied (the failing runs pass with it): "
_PARTIAL = "- partial fix applied (some failing tests pass with it; the whole suite decides): "
_KEPT = "- kept partial fix (the whole suite fails only where it still should): "
_PENDING = "- unhelpful edit still applied (revert it first): "
_VERIFIED = "- verified: the whole test suite passes with the fix"
_NO_CHANGES = "- no changes yet"
_TIGHT = "- the context is tight: summaries leave out the code (one filled it to the threshold)"
_CODE = "relevant code"
_CODE_HEADING = re.compile(r"^### (?P<detail>\S+ \S+ lines (?P<start>\d+)-(?P<end>\d+))$")
NUMBERED_LINE = re.compile(r"^\s*(\d+)\t(.*)$")


@dataclass(frozen=True)
class KeptFix:
    """A partial fix that stays applied: ``still_failing`` are the tests it leaves failing
    (the next search's target); ``tried_before`` is how many edits were ruled out when it was
    kept, so that dropping it forgets what was tried on top of it."""

    edit: Edit
    still_failing: list[str]
    tried_before: int


@dataclass
class WorkingState:
    """``failing``: None = not known yet; empty = the repo's tests pass, so the failing
    signal is the issue's snippet. ``failures``: how each failing test failed then (its
    one-line reason). ``read``: the functions read whose lines the agent still holds (as the
    ``read`` steps name them: in its history, or in its summary's relevant code); ``twins``:
    for each function compared with its other copies (by its ``read`` name), the edits
    their differences suggest. ``sources``: the lines read so far (path -> line number ->
    text) as the files hold them with the ``fix``; the ``pending`` unhelpful edit, which the
    next command reverts first, is not shown in them. ``tight``: a summary was asked for
    again at once (the context right after the last one was already at the forced
    threshold), so from then on summaries leave the code out and the agent reads it again.

    An edit that makes every failing run pass becomes the ``fix``; one that makes some of them
    pass, the rest failing as they did (another bug's failures do not change), becomes the
    ``fix`` with ``fix_leaves`` (the tests still failing). The whole suite then decides: it
    verifies a fix, and keeps a partial one (``kept``) when exactly ``fix_leaves`` fail, after
    which the search targets those."""

    failing: list[str] | None = None
    failures: dict[str, str] = field(default_factory=dict)
    suspects: list[Suspect] | None = None
    sources: dict[str, dict[int, str]] = field(default_factory=dict)
    read: set[str] = field(default_factory=set)
    twins: dict[str, list[Edit]] = field(default_factory=dict)
    tried: list[str] = field(default_factory=list)
    fix: Edit | None = None
    fix_leaves: list[str] = field(default_factory=list)
    kept: list[KeptFix] = field(default_factory=list)
    pending: Edit | None = None
    verified: bool = False
    reproduced: bool = False
    tight: bool = False
    last_run: str = ""

    @property
    def from_issue(self) -> bool:
        return self.failing == []

    @property
    def target(self) -> list[str]:
        """The failing tests the search is fixing now."""
        return self.kept[-1].still_failing if self.kept else list(self.failing or [])

    def note_read(self, path: str, lines: dict[int, str]) -> None:
        self.sources.setdefault(path, {}).update(lines)

    def forget_reads(self) -> None:
        """The workspace changed under what was read and located: read and locate again."""
        self.suspects = None
        self.sources.clear()
        self.read.clear()
        self.twins.clear()

    def note_edit(self, edit: Edit, reverse: bool = False) -> None:
        """Keep the model of read lines in step with an edit applied (or reverted); an edit
        of several lines moves the lines below it."""
        lines = self.sources.get(edit.path)
        if lines is None or edit.line not in lines:
            return
        old, new = (edit.new, edit.old) if reverse else (edit.old, edit.new)
        removed, added = len(old.split("\n")), new.split("\n")
        moved = {n: t for n, t in lines.items() if n < edit.line}
        moved.update({edit.line + offset: text for offset, text in enumerate(added)})
        shift = len(added) - removed
        moved.update({n + shift: t for n, t in lines.items() if n >= edit.line + removed})
        self.sources[edit.path] = moved

    def keep_fix(self, fix: Edit) -> None:
        """The whole suite confirmed the partial ``fix``: it stays, the rest is searched."""
        self.kept.append(KeptFix(fix, self.fix_leaves, len(self.tried)))
        self.fix, self.fix_leaves = None, []
        self.forget_reads()

    def drop_kept(self) -> None:
        """No edit fixes the rest with the last kept fix: give it up, and search again
        without it (it is ruled out; what was tried on top of it is not)."""
        dropped = self.kept.pop()
        self.tried = [*self.tried[: dropped.tried_before], dropped.edit.key]
        self.forget_reads()


def _edit_data(edit: Edit) -> dict[str, object]:
    return {
        "path": edit.path,
        "line": edit.line,
        "old": edit.old,
        "new": edit.new,
        "label": edit.label,
        "priority": edit.priority,
    }


def _edit_json(edit: Edit, **extra: object) -> str:
    return json.dumps({**_edit_data(edit), **extra})


def _edit_from_json(text: str) -> tuple[Edit, dict[str, object]] | None:
    """The edit and the extra fields stored with it."""
    try:
        return _edit_from_data(json.loads(text))
    except ValueError:
        return None


def _edit_from_data(data: object) -> tuple[Edit, dict[str, object]] | None:
    if not isinstance(data, dict):
        return None
    try:
        edit = Edit(
            str(data["path"]),
            int(data["line"]),
            str(data["old"]),
            str(data["new"]),
            str(data["label"]),
            int(data["priority"]),
        )
    except (ValueError, KeyError, TypeError):
        return None
    return edit, {k: v for k, v in data.items() if k not in _edit_data(edit)}


def _tests(value: object) -> list[str]:
    return [str(t) for t in value] if isinstance(value, list) else []


def write_summary(state: WorkingState, task_line: str, next_step: str) -> str:
    known: list[str] = []
    if state.failing is not None:
        known.append(
            _FROM_ISSUE if state.from_issue else _FAILING_TESTS + json.dumps(state.failing)
        )
    if state.failures:
        known.append(_FAILURES + json.dumps(state.failures))
    for suspect in state.suspects or []:
        known.append(
            f"- suspect: {suspect.path}:{suspect.line} in {suspect.function} "
            f"[{suspect.start}-{suspect.end}] score {suspect.score:.2f}"
        )
    for function, edits in state.twins.items():
        data = {"function": function, "differences": [_edit_data(e) for e in edits]}
        known.append(_COMPARED + json.dumps(data))
    if state.tight:
        known.append(_TIGHT)
    workspace = [
        _KEPT + _edit_json(k.edit, still_failing=k.still_failing, tried_before=k.tried_before)
        for k in state.kept
    ]
    if state.fix is not None and state.fix_leaves:
        workspace.append(_PARTIAL + _edit_json(state.fix, still_failing=state.fix_leaves))
    elif state.fix is not None:
        workspace.append(_FIX + _edit_json(state.fix))
    if state.pending is not None:
        workspace.append(_PENDING + _edit_json(state.pending))
    if state.verified:
        workspace.append(_VERIFIED)
    lines = [
        SUMMARY_HEADER,
        "## Task",
        task_line,
        "## Known",
        *(known or ["- nothing confirmed yet"]),
        *([] if state.tight else _relevant_code(state)),
        "## Ruled out",
        *([_TRIED + key for key in state.tried] or ["- nothing yet"]),
        "## Workspace",
        *(workspace or [_NO_CHANGES]),
        "## Tests",
        f"- {state.last_run or 'no test run yet'}",
        "## Next",
        f"- {next_step}",
    ]
    return "\n".join(lines)


def _relevant_code(state: WorkingState) -> list[str]:
    """Each function read, under a ``###`` heading naming it as its ``read`` step did, with its
    lines numbered as ``cat -n`` prints them (none when nothing is read)."""
    blocks: list[str] = []
    for detail in sorted(state.read):
        heading = _CODE_HEADING.match(f"### {detail}")
        lines = state.sources.get(detail.split(" ", 1)[0], {})
        if heading is None:
            continue
        span = range(int(heading["start"]), int(heading["end"]) + 1)
        body = [f"{n:6d}\t{lines[n]}" for n in span if n in lines]
        blocks += [heading.group(0), "```python", *body, "```"]
    return ["## Relevant code", *blocks] if blocks else []


def _restore_code(state: WorkingState, text: str) -> None:
    detail: str | None = None
    for row in text.splitlines():
        if heading := _CODE_HEADING.match(row.strip()):
            detail = heading["detail"]
            state.read.add(detail)
        elif detail is not None and (numbered := NUMBERED_LINE.match(row)):
            path = detail.split(" ", 1)[0]
            state.note_read(path, {int(numbered.group(1)): numbered.group(2)})


def read_summary(summary: str) -> WorkingState:
    """The state a summary records; whatever it lacks stays unknown."""
    sections = parse_sections(summary)
    state = WorkingState()
    suspects: list[Suspect] = []
    for line in sections.get("known", "").splitlines():
        line = line.strip()
        if line == _FROM_ISSUE:
            state.failing, state.reproduced = [], True
        elif line.startswith(_FAILING_TESTS):
            try:
                state.failing = [str(t) for t in json.loads(line[len(_FAILING_TESTS) :])]
            except ValueError:
                state.failing = None
        elif line.startswith(_FAILURES):
            state.failures = _messages(line[len(_FAILURES) :])
        elif line.startswith(_COMPARED):
            _restore_twins(state, line[len(_COMPARED) :])
        elif line == _TIGHT:
            state.tight = True
        elif match := _SUSPECT.match(line):
            suspects.append(
                Suspect(
                    match["path"],
                    int(match["line"]),
                    float(match["score"]),
                    match["func"],
                    int(match["start"]),
                    int(match["end"]),
                )
            )
    state.suspects = suspects or None
    _restore_code(state, sections.get(_CODE, ""))
    for line in sections.get("ruled out", "").splitlines():
        if line.strip().startswith(_TRIED):
            state.tried.append(line.strip()[len(_TRIED) :])
    for line in sections.get("workspace", "").splitlines():
        line = line.strip()
        for prefix in (_KEPT, _PARTIAL, _FIX, _PENDING):
            if line.startswith(prefix) and (found := _edit_from_json(line[len(prefix) :])):
                _restore_edit(state, prefix, *found)
        if line == _VERIFIED:
            state.verified = True
    tests = sections.get("tests", "").strip()
    state.last_run = tests.removeprefix("- ")
    return state


def _restore_edit(state: WorkingState, prefix: str, edit: Edit, extra: dict[str, object]) -> None:
    if prefix == _KEPT:
        tried_before = extra.get("tried_before")
        count = tried_before if isinstance(tried_before, int) else len(state.tried)
        state.kept.append(KeptFix(edit, _tests(extra.get("still_failing")), count))
    elif prefix == _PARTIAL:
        state.fix, state.fix_leaves = edit, _tests(extra.get("still_failing"))
    elif prefix == _FIX:
        state.fix = edit
    else:
        state.pending = edit


def _restore_twins(state: WorkingState, text: str) -> None:
    try:
        data = json.loads(text)
        function, differences = str(data["function"]), list(data["differences"])
    except (ValueError, KeyError, TypeError):
        return
    found = [_edit_from_data(item) for item in differences]
    state.twins[function] = [f[0] for f in found if f is not None]


def _messages(text: str) -> dict[str, str]:
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
