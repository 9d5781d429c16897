"""Summary audit, grounded in what the workspace and the trajectory held when a summary was
written (beyond a keyword screen for the template's sections).

Each summary the policy wrote is checked (a skipped compaction, summary-ignored, writes none),
claim class by claim class:

- **key state**: once a file the bug is in has been read, the summary names it (or the
  function); every file the workspace has changed (``git diff`` at that moment) is named;
- **workspace claims**: "no changes" while ``git diff`` shows changes, or a file a line of
  the Workspace section is about (the first file the line names; later ones, such as the
  function an edit was modelled on, are references) that the diff does not change, is false;
  so is a test status claimed in the Tests section (a pytest tally wins over words) that the
  last real test run contradicts;
- **next step**: a ``## Next`` section holding a concrete action (a path, a command, or an
  action verb);
- **plan consistency**: a next step that ends the work (submit, done, stop) while the summary
  itself states failing tests or an unresolved error (the django-13809 failure).

Claims are read with regular expressions over the template's sections: a heuristic, stated
here so its limits are known (a file named in the Workspace section as reverted counts as a
claimed change; a second file one line names as changed is not checked).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
from pydantic import BaseModel

from ac_env.compaction import parse_sections
from ac_env.pytest_log import last_test_run, tally_counts
from ac_env.sandbox.base import WorkspaceError
from ac_env.tasks import Task
from ac_env.tasks.model import GroundTruth
from ac_env.trajectory import Trajectory

_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/", re.MULTILINE)
_PATH = re.compile(r"[\w.-]+(?:/[\w.-]+)*\.py\b(?!::)")
"""A file path; one followed by ``::`` is part of a test id (a test that still fails), not
a file the summary says it changed."""
_FAIL_WORDS = re.compile(r"\bfail(s|ed|ing|ures?)?\b|\berrors?\b", re.IGNORECASE)
_PASS_WORDS = re.compile(r"\b(all )?(tests? )?pass(es|ed|ing)?\b", re.IGNORECASE)
_NO_CHANGES = re.compile(r"\bno (changes|edits|modifications)\b", re.IGNORECASE)
_ACTION_VERBS = re.compile(
    r"\b(run|rerun|re-run|read|open|inspect|grep|search|locate|find|fix|edit|change|replace|"
    r"apply|try|revert|undo|add|remove|test|verify|check|submit|write|implement)\b",
    re.IGNORECASE,
)
_TERMINAL = re.compile(
    r"\b(submit|done|stop|finish(ed)?|nothing (left|more) to do)\b", re.IGNORECASE
)
_UNRESOLVED = re.compile(
    r"error remains|still (fails?|failing|broken)|syntax error|not (yet )?(fixed|verified)|"
    r"unverified|unresolved",
    re.IGNORECASE,
)


def changed_files(diff: str) -> list[str]:
    return list(dict.fromkeys(_DIFF_FILE.findall(diff)))


class SummaryWorkspace(gym.Wrapper[Any, Any, Any, Any]):
    """Keeps the files ``git diff`` shows changed at each step whose model call was a summary
    (a summary never changes the workspace, so the diff after that step is the diff then)."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.changed: dict[int, list[str]] = {}

    def reset(self, **kwargs: Any) -> Any:
        self.changed = {}
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        result = self.env.step(action)
        base = self.env.unwrapped
        last = base.trajectory.model_calls()[-1]  # type: ignore[attr-defined]
        if last.action.get("kind") == "compact":
            try:
                diff = base.sandbox.diff()  # type: ignore[attr-defined]
            except WorkspaceError:  # the agent made its workspace unreadable: nothing shown
                diff = ""
            self.changed[last.step] = changed_files(diff)
        return result


class RunTally(BaseModel):
    """The counts of a test run (or of a tally a summary quotes)."""

    failed: int
    passed: int

    @classmethod
    def of(cls, output: str) -> RunTally | None:
        """The counts a command's output shows, summed over every pytest session in it (the
        reference agent's localization runs the failing tests, then the rest)."""
        counts = tally_counts(output)
        return None if counts is None else cls(passed=counts[0], failed=counts[1])

    @property
    def status(self) -> str:
        return "fail" if self.failed else "pass"


class SummaryAudit(BaseModel):
    step: int
    missed_key_state: bool
    missed_next_step: bool
    false_workspace_claim: bool
    inconsistent_plan: bool
    problems: list[str]


def _claimed_test_status(text: str) -> str | None:
    counts = tally_counts(text)
    if counts is not None:
        return "fail" if counts[1] else "pass"
    if _FAIL_WORDS.search(text):
        return "fail"
    if _PASS_WORDS.search(text):
        return "pass"
    return None


def audit_summary(
    summary: str,
    step: int,
    changed: Sequence[str],
    last_run: RunTally | None,
    ground_truth: GroundTruth | None,
    root_cause_read: bool,
) -> SummaryAudit:
    """``ground_truth``: the task's, read only when ``root_cause_read`` (None: not checked)."""
    sections = parse_sections(summary)
    workspace = sections.get("workspace", sections.get("workspace state", ""))
    tests = sections.get("tests", "")
    next_step = next(
        (sections[a] for a in ("next", "next step", "next steps", "plan") if a in sections), ""
    )
    key_state: list[str] = []
    if root_cause_read and ground_truth is not None:
        names = ground_truth.files + [
            f.split(":")[-1].split(".")[-1] for f in ground_truth.functions
        ]
        if not any(name in summary for name in names):
            key_state.append("key state: the root-cause file was read but is not named")
    unnamed = [path for path in changed if path not in summary]
    if unnamed:
        key_state.append(f"key state: changed files not named: {', '.join(unnamed)}")

    claims: list[str] = []
    if _NO_CHANGES.search(workspace) and changed:
        claims.append(f"workspace: claims no changes, git diff changes {', '.join(changed)}")
    subjects = (_PATH.search(line) for line in workspace.splitlines())
    named = [p for p in dict.fromkeys(m.group() for m in subjects if m) if p not in changed]
    if named:
        claims.append(f"workspace: names {', '.join(named)}, which git diff does not change")
    claimed_status = _claimed_test_status(tests)
    if claimed_status is not None and last_run is None:
        claims.append(f"tests: claims tests {claimed_status}, but no test run yet")
    elif claimed_status is not None and last_run and claimed_status != last_run.status:
        claims.append(
            f"tests: claims tests {claimed_status}; the last run had {last_run.failed} "
            f"failed, {last_run.passed} passed"
        )

    plan: list[str] = []
    if not (_PATH.search(next_step) or "`" in next_step or _ACTION_VERBS.search(next_step)):
        plan.append("next step: missing or not a concrete action")
    states_unresolved = claimed_status == "fail" or bool(_UNRESOLVED.search(workspace + tests))
    inconsistent = bool(_TERMINAL.search(next_step)) and states_unresolved
    if inconsistent:
        plan.append("plan: ends the work while the summary states an unresolved failure")

    return SummaryAudit(
        step=step,
        missed_key_state=bool(key_state),
        missed_next_step=any(p.startswith("next step") for p in plan),
        false_workspace_claim=bool(claims),
        inconsistent_plan=inconsistent,
        problems=key_state + claims + plan,
    )


def audit_trajectory(
    trajectory: Trajectory, task: Task, changed_at: dict[int, list[str]], root_step: int | None
) -> list[SummaryAudit]:
    """Every summary the policy wrote in ``trajectory`` (``changed_at``: ``SummaryWorkspace``'s
    record of the files changed when each was written)."""
    results = trajectory.tool_results()
    written = {e.step for e in trajectory.compactions() if e.trigger != "masking"}
    audits = []
    for call in trajectory.model_calls():
        if call.action.get("kind") != "compact" or call.step not in written:
            continue
        last_run = last_test_run([r for r in results if r.step < call.step], completed=True)
        audits.append(
            audit_summary(
                str(call.action.get("summary", call.output)),
                call.step,
                changed_at.get(call.step, []),
                RunTally.of(last_run[0].output) if last_run else None,
                task.ground_truth,
                root_cause_read=root_step is not None and root_step < call.step,
            )
        )
    return audits
