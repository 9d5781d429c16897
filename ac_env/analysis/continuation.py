"""How an episode continues after each compaction: does it redo work the summary recorded,
and does its first action follow the summary's next step?

In the first ``window`` steps after a rewrite that carried a summary, a *re-read* reads again
a file that was read before the compaction and that the summary names (its content was known
and recorded by name); a *re-search* repeats a search command (grep, find, ...) that ran
before the compaction. The first action *follows* the next step when it
touches a file the ``## Next`` section names, runs the tests the section asks for, or submits
when the section says so (None: the section names nothing checkable).
"""

from __future__ import annotations

import re
import shlex

from pydantic import BaseModel

from ac_env.analysis.metrics import files_read_by
from ac_env.compaction import parse_sections
from ac_env.trajectory import Trajectory

WINDOW = 5
_PATH = re.compile(r"[\w.-]+(?:/[\w.-]+)*\.py\b")
_SEARCHES = {"grep", "rg", "find", "ag"}


class Continuation(BaseModel):
    step: int
    rereads: int
    researches: int
    follows_next_step: bool | None


def _is_search(command: str) -> bool:
    lines = [line for line in command.splitlines() if line.strip() and not line.startswith("#")]
    try:
        words = shlex.split(lines[0]) if lines else []
    except ValueError:
        words = lines[0].split()
    return bool(words) and words[0] in _SEARCHES


def follows(next_step: str, action: dict[str, object], command: str) -> bool | None:
    paths = set(_PATH.findall(next_step))
    wants_tests = bool(re.search(r"\btests?\b|pytest", next_step, re.IGNORECASE))
    wants_submit = bool(re.search(r"\bsubmit\b", next_step, re.IGNORECASE))
    if not (paths or wants_tests or wants_submit):
        return None
    if action.get("kind") == "submit":
        return wants_submit
    return any(p in command for p in paths) or (wants_tests and "pytest" in command)


def continuations(trajectory: Trajectory, window: int = WINDOW) -> list[Continuation]:
    calls = trajectory.model_calls()
    results = trajectory.tool_results()
    found = []
    for event in trajectory.compactions():
        if event.trigger == "masking" or not event.summary:
            continue
        named = set(_PATH.findall(event.summary))
        before = [r for r in results if r.step < event.step]
        after = [r for r in results if event.step < r.step <= event.step + window]
        read_before = named & {f for r in before for f in files_read_by(r)}
        rereads = sum(1 for r in after if read_before & set(files_read_by(r)))
        searched_before = {r.command.strip() for r in before if _is_search(r.command)}
        researches = sum(1 for r in after if r.command.strip() in searched_before)
        first = next((c for c in calls if c.step > event.step), None)
        sections = parse_sections(event.summary)
        next_step = next((sections[a] for a in ("next", "next step", "plan") if a in sections), "")
        command = str(first.action.get("command", "")) if first else ""
        found.append(
            Continuation(
                step=event.step,
                rereads=rereads,
                researches=researches,
                follows_next_step=follows(next_step, first.action, command) if first else None,
            )
        )
    return found
