"""The reference agent's working state, and its round trip through a working-state summary.

The agent is stateless between calls: it rebuilds this state from the observation each turn.
After a compaction the only record of earlier turns is the summary, so the summary holds every
field the agent needs (as readable Markdown lines under ``SUMMARY_TEMPLATE``'s sections; edits
as one JSON object per line). A summary without the suspect locations makes the agent locate
again; without the failing tests, it runs the suite again.
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
_FROM_ISSUE = "- failing signal: the issue's reproduction snippet (no test in the repo fails)"
_TRIED = "- tried: "
_FIX = "- candidate fix applied (the failing runs pass with it): "
_PENDING = "- unhelpful edit still applied (revert it first): "
_VERIFIED = "- verified: the whole test suite passes with the fix"
_NO_CHANGES = "- no changes yet"


@dataclass
class WorkingState:
    """``failing``: None = not known yet; empty = the repo's tests pass, so the failing
    signal is the issue's snippet. ``read``: the functions read since the last summary (as the
    ``read`` steps name them). ``sources``: the lines read so far (path -> line number ->
    text) as the files hold them with the ``fix``; the ``pending`` unhelpful edit, which the
    next command reverts first, is not shown in them. Only an edit that makes every failing run
    pass becomes the ``fix``; the whole suite then decides whether it stays."""

    failing: list[str] | None = None
    suspects: list[Suspect] | None = None
    sources: dict[str, dict[int, str]] = field(default_factory=dict)
    read: set[str] = field(default_factory=set)
    tried: list[str] = field(default_factory=list)
    fix: Edit | None = None
    pending: Edit | None = None
    verified: bool = False
    reproduced: bool = False
    last_run: str = ""

    @property
    def from_issue(self) -> bool:
        return self.failing == []

    def note_read(self, path: str, lines: dict[int, str]) -> None:
        self.sources.setdefault(path, {}).update(lines)

    def note_edit(self, edit: Edit, reverse: bool = False) -> None:
        """Keep the model of read lines in step with an edit applied (or reverted)."""
        lines = self.sources.get(edit.path)
        if lines is not None and edit.line in lines:
            lines[edit.line] = edit.old if reverse else edit.new


def _edit_json(edit: Edit) -> str:
    data = {
        "path": edit.path,
        "line": edit.line,
        "old": edit.old,
        "new": edit.new,
        "label": edit.label,
        "priority": edit.priority,
    }
    return json.dumps(data)


def _edit_from_json(text: str) -> Edit | None:
    try:
        data = json.loads(text)
        return Edit(
            str(data["path"]),
            int(data["line"]),
            str(data["old"]),
            str(data["new"]),
            str(data["label"]),
            int(data["priority"]),
        )
    except (ValueError, KeyError, TypeError):
        return None


def write_summary(state: WorkingState, task_line: str, next_step: str) -> str:
    known: list[str] = []
    if state.failing is not None:
        known.append(
            _FROM_ISSUE if state.from_issue else _FAILING_TESTS + json.dumps(state.failing)
        )
    for suspect in state.suspects or []:
        known.append(
            f"- suspect: {suspect.path}:{suspect.line} in {suspect.function} "
            f"[{suspect.start}-{suspect.end}] score {suspect.score:.2f}"
        )
    workspace = [_FIX + _edit_json(state.fix)] if state.fix else []
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
    for line in sections.get("ruled out", "").splitlines():
        if line.strip().startswith(_TRIED):
            state.tried.append(line.strip()[len(_TRIED) :])
    for line in sections.get("workspace", "").splitlines():
        line = line.strip()
        if line.startswith(_FIX):
            state.fix = _edit_from_json(line[len(_FIX) :])
        elif line.startswith(_PENDING):
            state.pending = _edit_from_json(line[len(_PENDING) :])
        elif line == _VERIFIED:
            state.verified = True
    tests = sections.get("tests", "").strip()
    state.last_run = tests.removeprefix("- ")
    return state
