"""The oracle judge: reviews each proposed step from what the execution history shows.

The method's Judge "only receives the execution history that exists at that moment". This one
decides from ``ac_train.judge.evidence`` (the commands run so far, their outputs, the task
statement) and the real workspace (``git diff``: what those commands left), by the rubric
every judge follows (``ac_train.judge.CORRECTION_RUBRIC``). The bug is **located** once the
history shows a *place*: a failing run's traceback, fault ranking or failing statement points
to a function and that function's code has been read (``Evidence.places``; a bulk ``cat``
with no failing run behind it locates nothing). The workspace is **edited** once ``git diff``
is non-empty. Three checks, in this order:

- **trigger**. *Compact now*: a place was shown in the current segment at least
  ``solved_patience`` steps ago, nothing is edited yet, the history holds at least
  ``min_history_chars`` characters, and the candidate is another search or read. *Not yet*: a
  proactive compaction before anything is located and before any edit, or within
  ``recompact_gap`` steps of the last one; the replacement is the next investigative command
  of the model-free ``ReferenceAgent`` on the same observation (it, too, reads only that).
- **working_state** (every summary, proactive or forced; and a forced request answered by
  something that is not a summary): the summary audit's workspace, test and plan classes
  (``ac_env.analysis.audit``), a shown place not named, the task not restated, and any assertion
  the history does not support (``ac_train.judge.evidence.unsupported_claims``).
- **continuation** (within ``continuation_window`` steps after a compaction whose summary
  plans a command): the candidate re-reads a file the summary recorded, repeats a search
  from before the compaction, or, as the first step, ignores the plan; the replacement is the
  planned command.

Every summary the oracle writes follows the template and asserts only what the history
shows: the failing tests of the last run, each shown place with how the history points to it,
the files read, the real diff's files with whether a passing test run followed the last
change, and a ``## Next`` section that plans one command in backticks.

**Ground truth** is read only when asked: ``OracleJudge(ground_truth=True)`` (``--judge
oracle:ground-truth``) takes where the bug is from the task's gold patch instead, as soon as a
command has shown the changed lines of a gold hunk and named its file (``gold_located_step``:
a single bulk ``cat`` suffices), and names the gold functions and files from then on. It is a
privileged judge for comparison only (it was the default before): its timing uses knowledge
the policy has not earned and its summaries assert what the history may not show. It is the
only judge given a ``PrivilegedJudgeView`` (``reads_ground_truth``); the default oracle's
view holds a ``PublicTask``, which has no gold field to read.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from ac_env.actions import SUMMARY_HEADER, Bash, Compact, ParseResult, Submit
from ac_env.agents.reference import ReferenceAgent
from ac_env.analysis.audit import audit_summary, changed_files
from ac_env.analysis.continuation import follows
from ac_env.analysis.metrics import files_read_by
from ac_env.compaction import parse_sections
from ac_env.compaction.texts import COMPACTION_REQUEST
from ac_env.policy import PolicyOutput
from ac_env.tasks import Task
from ac_env.trajectory import CompactionEvent, ToolResult
from ac_train.judge.evidence import Evidence, Place, is_search_or_read, unsupported_claims
from ac_train.judge.review import ACCEPT, JudgeView, PrivilegedJudgeView, Verdict

_BACKTICKED = re.compile(r"```(?:bash)?\s*\n(.+?)\n```|`([^`\n]+)`", re.DOTALL)
_TEST_COMMAND = "python3 -m pytest -q -p no:cacheprovider"


@dataclass(frozen=True)
class Facts:
    """The episode's state when a step is proposed, read from the view. ``places``: where the
    bug is as the history shows it (or, with ground truth, as the gold patch says)."""

    evidence: Evidence
    places: tuple[Place, ...]
    ground_truth: bool
    results: list[ToolResult]
    last_compaction: CompactionEvent | None
    changed: list[str]
    forced: bool
    history_chars: int

    @classmethod
    def of(cls, view: JudgeView) -> Facts:
        """Ground truth is read only from a ``PrivilegedJudgeView``."""
        results = [r for r in view.trajectory.tool_results() if r.step < view.step]
        compactions = [e for e in view.trajectory.compactions() if e.trigger != "masking"]
        evidence = Evidence.of(results, view.task.problem_statement)
        return cls(
            evidence=evidence,
            places=(
                gold_places(results, view.gold)
                if isinstance(view, PrivilegedJudgeView)
                else evidence.places
            ),
            ground_truth=isinstance(view, PrivilegedJudgeView),
            results=results,
            last_compaction=compactions[-1] if compactions else None,
            changed=changed_files(view.diff),
            forced=bool(view.observation) and view.observation[-1]["content"] == COMPACTION_REQUEST,
            history_chars=sum(len(m["content"]) for m in view.observation[2:]),
        )

    @property
    def located(self) -> bool:
        return bool(self.places)

    @property
    def located_in_segment(self) -> Place | None:
        """The first place shown since the last compaction."""
        since = self.last_compaction.step if self.last_compaction else -1
        return next((p for p in self.places if p.step > since), None)


class OracleJudge:
    """Implements ``Judge``; see the module docstring. ``ground_truth``: locate the bug from
    the task's gold patch (privileged; off by default)."""

    def __init__(
        self,
        solved_patience: int = 1,
        min_history_chars: int = 4_000,
        recompact_gap: int = 2,
        continuation_window: int = 3,
        ground_truth: bool = False,
    ) -> None:
        self.solved_patience = solved_patience
        self.min_history_chars = min_history_chars
        self.recompact_gap = recompact_gap
        self.continuation_window = continuation_window
        self.reads_ground_truth = ground_truth
        self._investigator = ReferenceAgent("never")

    def review(self, view: JudgeView, candidate: PolicyOutput) -> Verdict:
        if self.reads_ground_truth:
            if not isinstance(view, PrivilegedJudgeView):
                raise TypeError(
                    "the ground-truth oracle needs a PrivilegedJudgeView (judge_view gives one "
                    f"to a judge that reads_ground_truth); got {type(view).__name__}"
                )
            if view.gold.ground_truth is None:
                raise ValueError(
                    f"task {view.task.instance_id}: the ground-truth oracle needs the task's "
                    "ground_truth (files and functions the bug touches); it has none"
                )
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
        # a format error is the env's to answer, except as the first step after a compaction
        # whose summary plans a command: that step ignores the plan
        return self._continuation(view, facts, None) or ACCEPT

    # -- trigger --------------------------------------------------------------------------------

    def _keeps_searching(
        self, view: JudgeView, facts: Facts, action: Bash | Submit
    ) -> Verdict | None:
        place = facts.located_in_segment
        if not (
            isinstance(action, Bash)
            and place is not None
            and not facts.changed
            and view.step - place.step > self.solved_patience
            and facts.history_chars >= self.min_history_chars
            and is_search_or_read(action.command)
        ):
            return None
        return Verdict(
            decision="correct",
            correction="trigger",
            replacement=oracle_summary(view, facts),
            reason=f"`{place.function}` in {place.path} was located at step {place.step} and "
            "the policy keeps searching: compact now",
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

    def _continuation(
        self, view: JudgeView, facts: Facts, action: Bash | Submit | None
    ) -> Verdict | None:
        """``action`` None: the output was no action (a format error)."""
        event = facts.last_compaction
        if event is None or not event.summary:
            return None
        if view.step - event.step > self.continuation_window:
            return None
        next_step = next_section(event.summary)
        planned = planned_command(next_step)
        if planned is not None and action is None:
            if view.step != event.step + 1:
                return None
            return Verdict(
                decision="correct",
                correction="continuation",
                replacement=f"THOUGHT: continue from the summary's plan.\n```bash\n{planned}\n```",
                reason="its first step after the compaction is no action; the summary plans one",
            )
        if action is None:
            return None
        command = action.command if isinstance(action, Bash) else "submit"
        if planned is None or command.strip() == planned:
            return None
        before = [r for r in facts.results if r.step < event.step]
        recorded = set(_paths(event.summary)) & {f for r in before for f in files_read_by(r)}
        rereads = recorded & set(files_read_by(_as_result(command)))
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


def _as_result(command: str) -> ToolResult:
    return ToolResult(
        step=-1,
        command=command,
        output="",
        exit_code=0,
        timed_out=False,
        truncated=False,
        duration_s=0.0,
    )


# ---- ground truth: only for OracleJudge(ground_truth=True) --------------------------------------

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


def gold_located_step(results: Sequence[ToolResult], task: Task) -> int | None:
    """The step of the first command whose output holds every changed line of a gold hunk
    and whose command or output names that hunk's file, or whose output names a gold function
    together with its file (a traceback frame, a ranking line). Ground truth; None: never."""
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


def gold_places(results: Sequence[ToolResult], task: Task) -> tuple[Place, ...]:
    """The gold functions, each in its file, from ``gold_located_step`` on (ground truth)."""
    step = gold_located_step(results, task)
    if step is None or task.ground_truth is None:
        return ()
    files = task.ground_truth.files
    places = []
    for function in task.ground_truth.functions:
        module = function.split(":")[0].replace(".", "/")
        path = next((f for f in files if f.removesuffix(".py").endswith(module)), files[0])
        places.append(Place(path, _short(function), step, "gold_patch", step))
    return tuple(places)


# between a file and a function: a pytest frame ``:54: in``, a Python one ``", line 54, in``, a
# ranking's ``::`` or ``:`` (a grep hit ``path:15:def name`` is none of them)
_FRAME = r'(?::\d+: in |", line \d+, in |::?)'


def _names_file(text: str, path: str) -> bool:
    """``path`` or its file name appears in ``text`` (``cd pkg && cat mod.py`` names it)."""
    name = re.escape(path.rsplit("/", 1)[-1])
    return path in text or re.search(rf"(?<![\w.]){name}\b", text) is not None


# ---- facts about summaries -------------------------------------------------------------------


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
    """What is wrong with ``summary`` given the state (module docstring, working_state)."""
    audit = audit_summary(
        summary, view.step, facts.changed, facts.evidence.last_run, None, False
    )  # the audit's key-state check reads the ground truth: the place check below replaces it
    problems = list(audit.problems)
    if facts.places and not any(_names_place(summary, p) for p in facts.places):
        located = ", ".join(f"{p.function} in {p.path}" for p in facts.places)
        problems.append(f"key state: the summary names no located place ({located})")
    if not parse_sections(summary).get("task"):
        problems.append("constraint: the summary does not restate the task")
    if not facts.ground_truth:  # the privileged judge takes the gold place as known
        problems.extend(unsupported_claims(summary, facts.evidence))
    return problems


def _names_place(summary: str, place: Place) -> bool:
    return (
        place.path in summary or re.search(rf"\b{re.escape(place.function)}\b", summary) is not None
    )


# ---- the oracle's own summary ----------------------------------------------------------------


def oracle_summary(view: JudgeView, facts: Facts) -> str:
    """A template summary of what the history shows (see the module docstring)."""
    evidence = facts.evidence
    known = []
    if evidence.failing:
        known.append(f"- Failing tests (last run): {', '.join(evidence.failing[:10])}")
    known.extend(f"- {place.evidence()}" for place in facts.places[:5])
    if not facts.places:
        known.append(
            "- Not located yet: no failing run's traceback, ranking or failing statement "
            "points to code that was read."
        )
    tests = "not run yet"
    if evidence.last_run is not None:
        tests = (
            f"last completed run (step {evidence.last_run_step}): {evidence.last_run.failed} "
            f"failed, {evidence.last_run.passed} passed"
        )
        if evidence.failing:
            tests += "; failing: " + ", ".join(evidence.failing[:10])
    if facts.changed:
        state = (
            "verified: a test run after the last change passes"
            if evidence.verified
            else "not verified yet"
        )
        workspace = "\n".join(f"- {path}: changed, {state}" for path in facts.changed)
    else:
        workspace = "no changes yet"
    return (
        f"{SUMMARY_HEADER}\n"
        f"## Task\n{_first_line(view.task.problem_statement)}\n"
        f"## Known\n" + "\n".join(known) + "\n"
        f"## Read so far\n{', '.join(evidence.files_read) or 'nothing yet'}\n"
        f"## Workspace\n{workspace}\n"
        f"## Tests\n{tests}\n"
        f"## Next\n{_plan(facts)}\n"
    )


def _plan(facts: Facts) -> str:
    evidence = facts.evidence
    failing = " ".join(shlex.quote(t) for t in evidence.failing)
    if evidence.last_run is None:
        return f"Run the test suite: `{_TEST_COMMAND} 2>&1 | tail -n 40`"
    if not facts.changed and not facts.places:
        command = f"{_TEST_COMMAND} --tb=short {failing} 2>&1 | tail -n 80"
        return f"Read the failing tests' tracebacks: `{command}`"
    if not facts.changed:
        place = facts.places[-1]
        command = f"grep -n -A 30 'def {place.function}' {shlex.quote(place.path)}"
        return f"Read {place.function} to edit it: `{command}`"
    if not evidence.verified:
        command = f"{_TEST_COMMAND} {failing} 2>&1 | tail -n 40"
        return f"Check the edit: rerun the failing tests: `{command}`"
    return "Submit the verified fix: `submit`"


def _short(function: str) -> str:
    return function.split(":")[-1].split(".")[-1]


def _first_line(text: str) -> str:
    lines = (line.strip().lstrip("#").strip() for line in text.splitlines())
    return next((line for line in lines if line), "(no issue text)")
