"""The oracle judge: decides from the task's ground truth and the real workspace.

The method's Judge "only receives the execution history that exists at that moment": it may
not use knowledge the agent has not earned. The *phase* of an episode is read from what really
happened: the bug is **located** once a command has shown the agent the buggy function's changed
lines (``located_step``: a read whose output covers every changed line of a hunk of the gold
patch, or a traceback or ranking line naming a buggy function together with its file); a
command that showed any other line of the file (its imports, its docstring) does not locate it.
The workspace is **edited** once ``git diff`` is non-empty. Three checks, in this order:

- **trigger**. *Compact now*: the bug was located in the current segment at least
  ``solved_patience`` steps ago, nothing is edited yet, the history holds at least
  ``min_history_chars`` characters, and the candidate is another search or read. *Not yet*: a
  proactive compaction before the bug is located and before any edit, or within
  ``recompact_gap`` steps of the last one; the replacement is the next investigative command
  of the model-free ``ReferenceAgent`` on the same observation.
- **working_state** (every summary, proactive or forced; and a forced request answered by
  something that is not a summary): the summary audit's claim classes
  (``ac_env.bench.audit``: the located file unnamed, changed files unnamed, false workspace
  or test claims, no concrete next step, a plan that stops while failures remain), and the
  task not restated (its constraints dropped).
- **continuation** (within ``continuation_window`` steps after a compaction whose summary
  plans a command): the candidate re-reads a file the summary recorded, repeats a search
  from before the compaction, or, as the first step, ignores the plan; the replacement is the
  planned command.

Every summary the oracle writes follows the template and is grounded in the real diff, the
last real test run and the files really read; its ``## Next`` section always plans one command
in backticks. Nothing derived from ground truth appears in it before the bug is located: no
buggy file or function, no file "ruled out" (before, the files read are listed as read, with no
conclusion drawn), no plan that names the buggy function.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from ac_env.actions import SUMMARY_HEADER, Bash, Compact, ParseResult, Submit
from ac_env.agents.reference import ReferenceAgent
from ac_env.bench.audit import RunTally, audit_summary, changed_files
from ac_env.bench.continuation import follows
from ac_env.compaction import CommandRecord, files_read, parse_sections
from ac_env.compaction.texts import COMPACTION_REQUEST
from ac_env.policy import PolicyOutput
from ac_env.tasks import Task
from ac_env.test_log import last_test_run
from ac_env.trajectory import CompactionEvent, ToolResult
from ac_train.judge import ACCEPT, JudgeView, Verdict

_BACKTICKED = re.compile(r"```(?:bash)?\s*\n(.+?)\n```|`([^`\n]+)`", re.DOTALL)
_SEARCH_OR_READ = {"grep", "rg", "find", "ls", "tree", "ag", "cat", "head", "tail", "nl", "less"}
_TEST_COMMAND = "python3 -m pytest -q -p no:cacheprovider"


@dataclass(frozen=True)
class Facts:
    """The episode's state when a step is proposed, read from the view."""

    results: list[ToolResult]
    last_compaction: CompactionEvent | None
    located_step: int | None
    changed: list[str]
    last_run: RunTally | None
    failing: list[str]
    forced: bool
    history_chars: int

    @classmethod
    def of(cls, view: JudgeView) -> Facts:
        results = view.trajectory.tool_results()
        compactions = [e for e in view.trajectory.compactions() if e.trigger != "masking"]
        earlier = [r for r in results if r.step < view.step]
        last_run, last_pytest = last_test_run(earlier, completed=True), last_test_run(results)
        return cls(
            results=results,
            last_compaction=compactions[-1] if compactions else None,
            located_step=located_step(results, view.task),
            changed=changed_files(view.diff),
            last_run=RunTally.of(last_run[0].output) if last_run else None,
            failing=list(last_pytest[1].failing) if last_pytest else [],
            forced=bool(view.observation) and view.observation[-1]["content"] == COMPACTION_REQUEST,
            history_chars=sum(len(m["content"]) for m in view.observation[2:]),
        )

    @property
    def located(self) -> bool:
        return self.located_step is not None

    @property
    def located_in_segment(self) -> bool:
        since = self.last_compaction.step if self.last_compaction else -1
        return self.located_step is not None and self.located_step > since


class OracleJudge:
    """Implements ``Judge`` for tasks with ground truth; see the module docstring."""

    def __init__(
        self,
        solved_patience: int = 1,
        min_history_chars: int = 4_000,
        recompact_gap: int = 2,
        continuation_window: int = 3,
    ) -> None:
        self.solved_patience = solved_patience
        self.min_history_chars = min_history_chars
        self.recompact_gap = recompact_gap
        self.continuation_window = continuation_window
        self._investigator = ReferenceAgent("never")

    def review(self, view: JudgeView, candidate: PolicyOutput) -> Verdict:
        if view.task.ground_truth is None:
            return ACCEPT
        facts = Facts.of(view)
        action = view.parse(candidate)
        if facts.forced:
            return self._review_summary(view, facts, action)
        if isinstance(action, Compact):
            return self._premature(view, facts) or self._review_summary(view, facts, action)
        if isinstance(action, Bash | Submit):
            return (
                self._continuation(view, facts, action)
                or self._keeps_searching(view, facts, action)
                or ACCEPT
            )
        return ACCEPT  # a format error is the env's to answer, not a correction type

    # -- trigger --------------------------------------------------------------------------------

    def _keeps_searching(
        self, view: JudgeView, facts: Facts, action: Bash | Submit
    ) -> Verdict | None:
        if not (
            isinstance(action, Bash)
            and facts.located_in_segment
            and not facts.changed
            and facts.located_step is not None
            and view.step - facts.located_step > self.solved_patience
            and facts.history_chars >= self.min_history_chars
            and is_search_or_read(action.command)
        ):
            return None
        return Verdict(
            decision="correct",
            correction="trigger",
            replacement=oracle_summary(view, facts),
            reason=f"the bug was located at step {facts.located_step} and the policy keeps "
            "searching: compact now",
        )

    def _premature(self, view: JudgeView, facts: Facts) -> Verdict | None:
        last = facts.last_compaction
        if last is not None and view.step - last.step <= self.recompact_gap:
            reason = f"compacted {view.step - last.step} steps ago and little happened since"
        elif not facts.located and not facts.changed:
            reason = "the bug is not located yet: continue the investigation"
        else:
            return None
        investigate = self._investigator.act(view.observation)
        if not isinstance(view.parse(investigate), Bash):
            return None
        return Verdict(
            decision="correct",
            correction="trigger",
            replacement=investigate.text,
            reason=f"do not compact yet: {reason}",
        )

    # -- working state --------------------------------------------------------------------------

    def _review_summary(self, view: JudgeView, facts: Facts, action: ParseResult) -> Verdict:
        if not isinstance(action, Compact):
            problems = ["the answer to the compaction request is not a valid summary"]
        else:
            problems = summary_problems_against_state(view, facts, action.summary)
        if not problems:
            return ACCEPT
        return Verdict(
            decision="correct",
            correction="working_state",
            replacement=oracle_summary(view, facts),
            reason="; ".join(problems),
        )

    # -- continuation ---------------------------------------------------------------------------

    def _continuation(self, view: JudgeView, facts: Facts, action: Bash | Submit) -> Verdict | None:
        event = facts.last_compaction
        if event is None or not event.summary:
            return None
        if view.step - event.step > self.continuation_window:
            return None
        next_step = next_section(event.summary)
        planned = planned_command(next_step)
        command = action.command if isinstance(action, Bash) else "submit"
        if planned is None or command.strip() == planned:
            return None
        before = [r for r in facts.results if r.step < event.step]
        recorded = set(_paths(event.summary)) & {
            f for r in before for f in files_read([CommandRecord(r.command, "", 0)])
        }
        rereads = recorded & set(files_read([CommandRecord(command, "", 0)]))
        researched = is_search_or_read(command) and command.strip() in {
            r.command.strip() for r in before
        }
        followed = follows(next_step, action.model_dump(), command)
        if followed is True:
            return None
        if rereads:
            reason = f"re-reads {', '.join(sorted(rereads))}, which the summary records"
        elif researched:
            reason = "repeats a search from before the compaction"
        elif view.step == event.step + 1 and followed is False:
            reason = "ignores the summary's planned next step"
        else:
            return None
        return Verdict(
            decision="correct",
            correction="continuation",
            replacement=f"THOUGHT: continue from the summary's plan.\n```bash\n{planned}\n```",
            reason=reason,
        )


# ---- where the bug is, as the agent has seen it -------------------------------------------------

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")


@dataclass(frozen=True)
class Hunk:
    """One hunk of the gold patch: its file and the lines of the buggy code it changes, as the
    workspace holds them (stripped; for a pure insertion, the line it follows)."""

    path: str
    lines: tuple[str, ...]


def gold_hunks(task: Task) -> list[Hunk]:
    """The hunks of ``task.patch`` in the ground truth's files (test files left out)."""
    if task.ground_truth is None:
        return []
    wanted = set(task.ground_truth.files)
    hunks: list[Hunk] = []
    path: str | None = None
    removed: list[str] = []
    before: str | None = None

    def close() -> None:
        lines = [line for line in removed if line] or ([before] if before else [])
        if path in wanted and lines:
            hunks.append(Hunk(path, tuple(lines)))

    for line in task.patch.splitlines():
        if line.startswith("diff --git ") or _HUNK.match(line):
            close()
            removed, before = [], None
            if line.startswith("diff --git "):
                path = None
        elif line.startswith("+++ "):
            path = line[4:].removeprefix("b/").strip()
        elif line.startswith("--- "):
            continue
        elif line.startswith("-"):
            removed.append(line[1:].strip())
        elif line.startswith(" ") and not removed and line.strip():
            before = line[1:].strip()
    close()
    return hunks


def located_step(results: Sequence[ToolResult], task: Task) -> int | None:
    """The step of the first command that showed the agent the buggy function's changed lines:
    its output holds every changed line of a hunk of the gold patch (a read covering them:
    ``cat``, ``sed -n``, ``grep -n``, a long pytest traceback) and its command or output names
    that hunk's file; or its output names a buggy function together with its file (a traceback
    frame ``path:54: in name`` or ``File "path", line 54, in name``, a ranking ``path::name``;
    a grep hit ``path:15:def name`` is not one). None: never, or the task has no ground truth.
    Text matching: a changed line that also occurs elsewhere in the same output counts."""
    if task.ground_truth is None:
        return None
    hunks = gold_hunks(task)
    frames = [
        re.compile(rf"{re.escape(path)}{_FRAME}{re.escape(_short(function))}\b")
        for path in task.ground_truth.files
        for function in task.ground_truth.functions
    ]
    for result in results:
        named = f"{result.command}\n{result.output}"
        for hunk in hunks:
            if _names_file(named, hunk.path) and all(line in result.output for line in hunk.lines):
                return result.step
        if any(frame.search(result.output) for frame in frames):
            return result.step
    return None


# between a file and a function: a pytest frame ``:54: in``, a Python one ``", line 54, in``, a
# ranking's ``::`` or ``:`` (a grep hit ``path:15:def name`` is none of them)
_FRAME = r'(?::\d+: in |", line \d+, in |::?)'


def _names_file(text: str, path: str) -> bool:
    """``path`` or its file name appears in ``text`` (``cd pkg && cat mod.py`` names it)."""
    name = re.escape(path.rsplit("/", 1)[-1])
    return path in text or re.search(rf"(?<![\w.]){name}\b", text) is not None


# ---- facts about commands and summaries ------------------------------------------------------


def is_search_or_read(command: str) -> bool:
    """A command that only looks: grep/find/ls, or shows a file (cat, head, ``sed -n``)."""
    for part in re.split(r"&&|\|\||;|\||\n", command):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            words = part.split()
        if not words:
            continue
        first = words[0]
        in_place = any(w == "-i" or w.startswith("-i.") for w in words[1:])
        if first in _SEARCH_OR_READ or (first in {"sed", "awk"} and not in_place):
            continue
        return False
    return bool(command.strip())


def next_section(summary: str) -> str:
    sections = parse_sections(summary)
    return next(
        (sections[a] for a in ("next", "next step", "next steps", "plan") if a in sections), ""
    )


def planned_command(next_step: str) -> str | None:
    """The command a ``## Next`` section plans: its first fenced block or backticked span."""
    match = _BACKTICKED.search(next_step)
    if match is None:
        return None
    return (match.group(1) or match.group(2)).strip() or None


def _paths(text: str) -> list[str]:
    return re.findall(r"[\w.-]+(?:/[\w.-]+)*\.py\b", text)


def summary_problems_against_state(view: JudgeView, facts: Facts, summary: str) -> list[str]:
    audit = audit_summary(
        summary, view.step, facts.changed, facts.last_run, view.task, facts.located
    )
    problems = list(audit.problems)
    if not parse_sections(summary).get("task"):
        problems.append("constraint: the summary does not restate the task")
    return problems


# ---- the oracle's own summary ----------------------------------------------------------------


def oracle_summary(view: JudgeView, facts: Facts) -> str:
    """A template summary grounded in the real state (see the module docstring)."""
    task = view.task
    assert task.ground_truth is not None
    records = [CommandRecord(r.command, r.output, r.exit_code) for r in facts.results]
    read = files_read(records)
    known = []
    if facts.failing:
        known.append(f"- Failing tests: {', '.join(facts.failing[:10])}")
    if facts.located:
        functions = ", ".join(f"`{_short(f)}`" for f in task.ground_truth.functions)
        known.append(f"- The bug is in {functions} in {', '.join(task.ground_truth.files)}.")
        ruled_out = [f for f in read if f not in task.ground_truth.files and "test" not in f]
        looked_at = f"## Ruled out\n{', '.join(ruled_out) or 'nothing yet'}\n"
    else:  # nothing from the ground truth: the files read, no conclusion drawn from them
        known.append("- The bug is not located yet.")
        looked_at = f"## Read so far\n{', '.join(read) or 'nothing yet'}\n"
    tests = "not run yet"
    if facts.last_run is not None:
        tests = f"last run: {facts.last_run.failed} failed, {facts.last_run.passed} passed"
        if facts.failing:
            tests += "; failing: " + ", ".join(facts.failing[:10])
    if facts.changed:
        verified = facts.last_run is not None and facts.last_run.failed == 0
        state = "verified: the last test run passes" if verified else "not verified yet"
        workspace = "\n".join(f"- {path}: changed, {state}" for path in facts.changed)
    else:
        workspace = "no changes yet"
    return (
        f"{SUMMARY_HEADER}\n"
        f"## Task\n{_first_line(task.problem_statement)}\n"
        f"## Known\n" + "\n".join(known) + "\n"
        f"{looked_at}"
        f"## Workspace\n{workspace}\n"
        f"## Tests\n{tests}\n"
        f"## Next\n{_plan(task.ground_truth.files, task.ground_truth.functions, facts)}\n"
    )


def _plan(files: Sequence[str], functions: Sequence[str], facts: Facts) -> str:
    failing = " ".join(shlex.quote(t) for t in facts.failing)
    if facts.last_run is None:
        return f"Run the test suite: `{_TEST_COMMAND} 2>&1 | tail -n 40`"
    if not facts.located:
        command = f"{_TEST_COMMAND} --tb=short {failing} 2>&1 | tail -n 80"
        return f"Read the failing tests' tracebacks: `{command}`"
    if not facts.changed:
        name = _short(functions[0]) if functions else ""
        return f"Read {name} to edit it: `grep -n -A 30 'def {name}' {shlex.quote(files[0])}`"
    if facts.last_run.failed:
        command = f"{_TEST_COMMAND} {failing} 2>&1 | tail -n 40"
        return f"Fix the edit, then rerun the failing tests: `{command}`"
    return "Submit the verified fix: `submit`"


def _short(function: str) -> str:
    return function.split(":")[-1].split(".")[-1]


def _first_line(text: str) -> str:
    lines = (line.strip().lstrip("#").strip() for line in text.splitlines())
    return next((line for line in lines if line), "(no issue text)")
