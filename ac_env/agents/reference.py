"""A model-free repair agent: the reference policy for the built-in tasks.

It sees only the observation (chat messages) and decides only from it. Each turn it rebuilds
its working state from its own earlier commands and their outputs (or from its own summary
after a compaction), then takes the next step of a plain repair loop:

1. run the test suite; the failing tests are the signal. When none fails (the ``hard``
   split), run the issue's reproduction snippet instead;
2. locate: rank the lines the failing runs execute (``localize``);
3. read the most suspicious function (``cat -n | sed -n``), and compare it with any other
   copy of it the repository keeps (``twins``: a deprecated copy, a vendored one);
4. try candidate edits one at a time, most promising first: first the differences from those
   copies (the only way back to a deleted statement), then the repair templates' one-line
   fixes. Apply one, rerun the failing tests (or the snippet check); an edit that does not
   help is reverted before the next one;
5. an edit that makes every failing run pass goes to the whole suite: submit when it passes,
   else revert it and search on. An edit that makes only some failing tests pass, the rest
   failing as they did (a bug among several), goes there too: it is kept when exactly the
   rest fail, and the search starts over (locate, read, try) for the rest. When nothing fixes
   the rest on top of it, it is dropped and ruled out, and the search goes on without it (a
   bounded look-ahead: at most ``MAX_KEPT_FIXES`` kept fixes, each leaving strictly fewer
   failing tests).

Every command starts with a comment naming its step (``# try: pkg/mod.py:12 `<` -> `<=```),
which is how the agent recognizes its own steps in the history. ``compact_when`` is a timing
rule (``ac_env.compaction.when``: a ``TimingRule`` or its spec, such as ``"every:5"`` or
``"after_passing_tests"``), its own phase rules among them (registered in the same registry;
they read its working state):
``"after_locate"`` compacts once the bug is located, ``"after_fix"`` once the whole suite has
confirmed a partial fix (a bug among several fixed: the summary carries the kept fixes, and
what the next bug needs is found afresh); ``"rubric"`` follows the ``self`` strategy's rubric
(``COMPACTION_RUBRIC``; ``Rubric`` says which of its lines, and how). All are triggers in the
form of the env's ``compaction_protocol``: the summary itself (``inline``), or a bare
``compact`` call and then the summary the env asks for (``tool_call``). It always answers the
environment's requests for a summary with a valid one.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ac_env.actions import SUMMARY_HEADER, Bash, CompactCall, TerminalParser
from ac_env.agents.edit_script import EDIT_FAILED, edit_command, parse_edit, undo_command
from ac_env.agents.localize import Suspect, localize_command, parse_report
from ac_env.agents.repairs import Edit, function_edits
from ac_env.agents.reproduce import Reproduction, from_issue, verdict
from ac_env.agents.twins import HEREDOC_END as TWINS_END
from ac_env.agents.twins import parse_twins, twins_command
from ac_env.agents.working_state import NUMBERED_LINE, WorkingState, read_summary, write_summary
from ac_env.compaction.protocol import CompactionProtocol
from ac_env.compaction.texts import COMPACTION_REQUEST, WORKING_STATE_REQUEST
from ac_env.compaction.when import Moment, TimingRule, TokenThreshold, timing_rule
from ac_env.policy import PolicyOutput
from ac_env.pytest_log import TestRunSummary, summarize_pytest_output

RUBRIC_TOKENS = 12_000  # the rubric's "more than about 12,000 tokens"
RUBRIC_SETTLE_TURNS = 3  # the rubric's "a few turns ago": fewer own turns than this
RUBRIC_MIN_STALE_TOKENS = 4_000  # the rubric's "old command outputs no longer matter": see Rubric
MAX_KEPT_FIXES = 5  # partial fixes kept on top of each other (a bug each): six bugs in all
SUITE_TIMEOUT_S = 55  # under the env's default 60 s command limit
TRY_TIMEOUT_S = 20  # the failing tests alone; a candidate that makes them hang is wrong
SRC_LAYOUT = '[ -d src ] && export PYTHONPATH="$PWD/src"'
_STEP = re.compile(r"^# (?P<kind>[a-z]+):? ?(?P<detail>.*)$")
_ISSUE = re.compile(r"<issue>\n?(.*?)\n?</issue>", re.DOTALL)
SUITE = (
    f"timeout {SUITE_TIMEOUT_S} python3 -m pytest -q --tb=short -p no:cacheprovider 2>&1 "
    "| tail -n 60"
)


@dataclass(frozen=True)
class Turn:
    """One of the agent's own commands and what it printed."""

    kind: str
    detail: str
    command: str
    output: str


@dataclass(frozen=True)
class History:
    issue: str
    summary: str | None
    turns: list[Turn]
    compaction_requested: bool


def read_history(observation: Sequence[Mapping[str, str]]) -> History:
    """The issue, the summary (if a compaction happened) and the agent's turns since."""
    messages = list(observation)
    task = messages[1]["content"] if len(messages) > 1 else ""
    issue_match = _ISSUE.search(task)
    issue = issue_match.group(1) if issue_match else task
    rest = messages[2:]
    summary = None
    if rest and rest[0]["role"] == "user" and rest[0]["content"].startswith(SUMMARY_HEADER):
        summary = rest[0]["content"]
        rest = rest[1:]
    turns: list[Turn] = []
    parser = TerminalParser()
    for index, message in enumerate(rest):
        if message["role"] != "assistant":
            continue
        action = parser.parse(message["content"])
        if not isinstance(action, Bash):
            continue
        first_line = action.command.split("\n", 1)[0]
        step = _STEP.match(first_line)
        if step is None:
            continue
        reply = rest[index + 1] if index + 1 < len(rest) else None
        output = reply["content"] if reply and reply["role"] == "user" else ""
        turns.append(Turn(step["kind"], step["detail"], action.command, output))
    requests = (COMPACTION_REQUEST, WORKING_STATE_REQUEST)
    requested = bool(messages) and messages[-1]["content"] in requests
    return History(issue, summary, turns, requested)


# ---- replaying the history into a working state ------------------------------------------------


def replay(history: History) -> WorkingState:
    state = read_summary(history.summary) if history.summary else WorkingState()
    for turn in history.turns:
        _advance(state, turn)
    return state


def _advance(state: WorkingState, turn: Turn) -> None:
    if turn.kind == "test":
        run = summarize_pytest_output(turn.output)
        state.last_run = f"`python3 -m pytest` -> {run.tally()}"
        if state.failing is None:
            state.failing = list(run.failing) if run.completed else []
            state.failures = dict(run.messages) if run.completed else {}
    elif turn.kind == "reproduce":
        state.reproduced = True
        fixed = verdict(turn.output)
        state.last_run = (
            "issue snippet: " + {True: "fixed", False: "reproduced", None: "crashed"}[fixed]
        )
    elif turn.kind == "locate":
        state.suspects = parse_report(turn.output)
    elif turn.kind == "read":
        _undo_pending(state)
        path = turn.detail.split(" ", 1)[0]
        lines = {}
        for row in turn.output.splitlines():
            match = NUMBERED_LINE.match(row)
            if match:
                lines[int(match.group(1))] = match.group(2)
        state.note_read(path, lines)
        state.read.add(turn.detail)
        if TWINS_END in turn.command:
            state.twins[turn.detail] = parse_twins(turn.output)
    elif turn.kind == "try":
        _advance_try(state, turn)
    elif turn.kind == "verify":
        _undo_pending(state)
        run = summarize_pytest_output(turn.output)
        state.last_run = f"whole suite -> {run.tally()}"
        if run.all_passed:
            state.verified = True
        elif state.fix is not None and state.fix_leaves and _fails_exactly(run, state.fix_leaves):
            state.keep_fix(state.fix)
        elif state.fix is not None:  # the fix breaks other tests: undo it, search on
            state.note_edit(state.fix, reverse=True)
            state.tried.append(state.fix.key)
            state.pending, state.fix, state.fix_leaves = state.fix, None, []
    elif turn.kind == "revert":
        _undo_pending(state)
    elif turn.kind == "drop" and state.kept:
        _undo_pending(state)
        state.drop_kept()


def _undo_pending(state: WorkingState) -> None:
    """The command that ran first reverted the pending edit (``sources`` never showed it)."""
    state.pending = None


def _advance_try(state: WorkingState, turn: Turn) -> None:
    _undo_pending(state)
    edit = parse_edit(turn.command)
    if edit is None:
        return
    if EDIT_FAILED in turn.output:
        state.tried.append(edit.key)
        return
    leaves: list[str] = []
    if state.from_issue:
        helped = verdict(turn.output) is True
        state.last_run = f"issue snippet after {edit.key}: {'fixed' if helped else 'reproduced'}"
    else:
        run = summarize_pytest_output(turn.output)
        helped = run.all_passed
        if not helped and len(state.kept) < MAX_KEPT_FIXES and _fixes_some(run, state):
            helped, leaves = True, sorted(run.failing)
        state.last_run = f"failing tests after {edit.key} -> {run.tally()}"
    if helped:
        state.note_edit(edit)
        state.fix, state.fix_leaves = edit, leaves
    else:
        state.tried.append(edit.key)
        state.pending = edit


def _fixes_some(run: TestRunSummary, state: WorkingState) -> bool:
    """Some of the target tests pass, and the rest fail as they did at first: an edit that
    fixes one bug among several leaves the others' failures as they were (one that changes
    them is more likely a change of symptoms than a fix)."""
    still = set(run.failing)
    if not (run.completed and run.failed == len(still) > 0 and still < set(state.target)):
        return False
    return all(run.messages[t] == state.failures.get(t, run.messages[t]) for t in still)


def _fails_exactly(run: TestRunSummary, tests: list[str]) -> bool:
    """The whole suite completed and exactly ``tests`` failed."""
    return run.completed and run.failed == len(tests) and set(run.failing) == set(tests)


# ---- choosing the next step ----------------------------------------------------------------


@dataclass(frozen=True)
class _Function:
    path: str
    start: int
    end: int
    name: str
    best: float

    @property
    def read_detail(self) -> str:
        """How the ``read`` step names this function (and how its history shows it)."""
        return f"{self.path} {self.name} lines {self.start}-{self.end}"


def _functions(suspects: list[Suspect]) -> list[_Function]:
    """Suspect functions, most suspicious first."""
    seen: dict[tuple[str, int, int], _Function] = {}
    for s in suspects:
        key = (s.path, s.start, s.end)
        if key not in seen:
            seen[key] = _Function(s.path, s.start, s.end, s.function, round(s.score, 1))
    return sorted(seen.values(), key=lambda f: -f.best)


def _is_read(state: WorkingState, function: _Function) -> bool:
    return function.read_detail in state.read


def next_move(state: WorkingState) -> _Function | Edit | None:
    """The function to read next, or the edit to try next, or None when all is tried."""
    suspects = state.suspects or []
    done = set(state.tried)
    candidates: list[tuple[float, int, Edit]] = []
    for function in _functions(suspects):
        if not _is_read(state, function):
            continue
        for edit in state.twins.get(function.read_detail, []):
            if edit.key not in done:  # evidence first: a copy's differences are few
                candidates.append((function.best + 1.0, edit.priority, edit))
        lines = state.sources.get(function.path, {})
        scores = {s.line: s.score for s in suspects if s.path == function.path}
        body = {n: lines[n] for n in range(function.start, function.end + 1) if n in lines}
        for score, edit in function_edits(function.path, body, scores):
            if edit.key not in done:
                candidates.append((score, edit.priority, edit))
    best = max((score for score, _, _ in candidates), default=-1.0)
    for function in _functions(suspects):
        if not _is_read(state, function) and function.best >= best:
            return function
    if not candidates:
        return None
    candidates.sort(key=lambda c: (-c[0], c[1]))
    return candidates[0][2]


class ReferenceAgent:
    """Implements ``Policy``. Deterministic, model-free, needs only the observation."""

    def __init__(
        self,
        compact_when: str | TimingRule = "never",
        compaction_protocol: CompactionProtocol = "inline",
    ) -> None:
        self.rule = _rule(compact_when)
        if compaction_protocol not in ("inline", "tool_call"):
            raise ValueError(
                f"compaction_protocol: {compaction_protocol!r} is not 'inline' or 'tool_call'"
            )
        self.compaction_protocol = compaction_protocol

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        history = read_history(observation)
        state = replay(history)
        asked_again = history.summary is not None and len(history.turns) <= 1
        if history.compaction_requested and asked_again:  # the last summary filled the context
            state.tight = True
            state.read.clear()  # the summary leaves the code out: it reads it again
        reproduction = from_issue(history.issue)
        thought, command, next_step = self._decide(state, reproduction)
        if history.compaction_requested:
            return PolicyOutput(text=write_summary(state, _task_line(history.issue), next_step))
        if history.turns and self.rule(Moment.of_messages(observation)):
            if self.compaction_protocol == "tool_call":
                return PolicyOutput(text=f"THOUGHT: compact now\n{CompactCall().render()}")
            return PolicyOutput(text=write_summary(state, _task_line(history.issue), next_step))
        if command is None:
            return PolicyOutput(text=f"THOUGHT: {thought}\n```bash\nsubmit\n```")
        return PolicyOutput(text=f"THOUGHT: {thought}\n```bash\n{_importable(command)}\n```")

    def _decide(self, state: WorkingState, reproduction: Reproduction | None) -> Decision:
        """What to do next, by phase: find what fails, verify a fix, try the next candidate,
        back out when none is left."""
        return (
            _find_the_failure(state, reproduction, self._locate_command)
            or _verify_the_fix(state)
            or _try_next_candidate(state, reproduction)
            or _back_out(state)
        )

    def _locate_command(self, state: WorkingState, reproduction: Reproduction | None) -> str:
        """The whole suite gives the passing runs: code that many passing tests execute is
        less suspicious than code only the failing runs reach. The failing tests run first,
        so a suite too large to trace in time still ranks."""
        if state.from_issue and reproduction is not None:
            return localize_command(reproduction.snippet)
        return localize_command(failing=state.target)


# ---- the agent's phase rules: timing rules that read its working state ----------------------


@dataclass(frozen=True)
class PhaseView:
    """What a phase rule reads: the history, the working state replayed from it, and the
    working state the last summary holds."""

    history: History
    state: WorkingState
    summarized: WorkingState

    @classmethod
    def of(cls, moment: Moment) -> PhaseView:
        history = read_history(moment.messages)
        summarized = read_summary(history.summary) if history.summary else WorkingState()
        return cls(history, replay(history), summarized)

    @property
    def last(self) -> str:
        return self.history.turns[-1].kind if self.history.turns else ""

    def newly_located(self) -> bool:
        """The last turn located the bug, at suspects the summary does not hold yet."""
        located = self.last == "locate" and bool(self.state.suspects)
        return located and self.summarized.suspects != self.state.suspects

    def newly_kept(self) -> bool:
        """The whole suite just kept a partial fix that the summary does not hold yet."""
        return self.last == "verify" and len(self.state.kept) > len(self.summarized.kept)


@dataclass(frozen=True)
class AfterLocate:
    """Right after locating (again, for the rest of a bug among several), unless the summary
    already holds this location."""

    name: str = "after_locate"
    description: str = "the reference agent compacts after locating the bug"

    def __call__(self, moment: Moment) -> bool:
        return PhaseView.of(moment).newly_located()


@dataclass(frozen=True)
class AfterFix:
    """Right after the whole suite kept a partial fix that the summary does not hold yet."""

    name: str = "after_fix"
    description: str = "the reference agent compacts after the whole suite keeps a partial fix"

    def __call__(self, moment: Moment) -> bool:
        return PhaseView.of(moment).newly_kept()


@dataclass(frozen=True)
class Rubric:
    """The ``self`` strategy's ``COMPACTION_RUBRIC``, line by line.

    - "after a phase ends: the bug is located, a fix is verified, or a direction is ruled
      out": the last turn located the bug (suspects the summary does not hold yet), the whole
      suite kept a partial fix (a full verification is followed by the submission: nothing is
      left to compact for), or ruled a direction out (a kept partial fix dropped, or a fix the
      whole suite rejected);
    - "when your context holds more than about 12,000 tokens": ``TokenThreshold`` at
      ``RUBRIC_TOKENS``;
    - NOT "in the middle of an edit-and-test cycle, before the result of a change is known":
      not while a fix waits for the whole suite;
    - NOT "when you compacted a few turns ago and little has happened since": not within
      ``RUBRIC_SETTLE_TURNS`` of its own turns after a summary;
    - "when old command outputs ... no longer matter", and NOT "when ... little has happened
      since": only when compacting now would remove at least ``RUBRIC_MIN_STALE_TOKENS``
      tokens, or half the context when it is smaller than twice that (``stale_tokens``: the
      context less what it would hold after, the system prompt, the task and the summary
      written now, whose relevant code grows with what was read). Below that the summary does
      not pay for itself: at the default prices a compaction costs its summary's output and
      one uncached read of the rewritten prompt, about what 4,000 removed tokens save at the
      cache-hit price over some 20 later turns, and each summary is a turn of the step cap
      spent. A context that is large because of the task itself, or of code the agent still
      needs, has nothing stale to remove. The half-context floor keeps small tasks, whose
      whole context is under 8,000 tokens, compacting where half of it would go.

    The agent's summary never "would drop a fact you still need" (``write_summary`` records
    its whole working state, with the code it read).
    """

    name: str = "rubric"
    description: str = (
        "the reference agent follows the rubric as a rule: compact after locating the bug, "
        "after the whole suite keeps a partial fix, after a direction is ruled out, or past "
        f"{RUBRIC_TOKENS:,} context tokens; not while a fix awaits the whole suite, nor within "
        f"{RUBRIC_SETTLE_TURNS} turns of its last summary, nor when it would remove fewer than "
        f"{RUBRIC_MIN_STALE_TOKENS:,} stale tokens (half the context, if that is fewer)"
    )

    def __call__(self, moment: Moment) -> bool:
        view = PhaseView.of(moment)
        if view.history.summary is not None and len(view.history.turns) < RUBRIC_SETTLE_TURNS:
            return False
        if view.state.fix is not None:
            return False
        if stale_tokens(moment, view) < min(RUBRIC_MIN_STALE_TOKENS, moment.tokens // 2):
            return False
        ruled_out = view.last == "drop" or (
            view.last == "verify" and view.state.pending is not None
        )
        large = TokenThreshold(RUBRIC_TOKENS)(moment)
        return view.newly_located() or view.newly_kept() or ruled_out or large


def stale_tokens(moment: Moment, view: PhaseView) -> int:
    """The tokens compacting now would remove: the context's, less those of the system prompt,
    the task and the summary the agent would write now (approximate tokens, as the moment
    counts them)."""
    summary = write_summary(view.state, _task_line(view.history.issue), "")
    after = Moment.of_messages([*moment.messages[:2], {"role": "user", "content": summary}])
    return moment.tokens - after.tokens


def _rule(compact_when: str | TimingRule) -> TimingRule:
    if not isinstance(compact_when, str):
        return compact_when
    try:
        return timing_rule(compact_when)
    except ValueError as error:
        raise ValueError(f"compact_when: {error}") from None


class Decision(NamedTuple):
    """The next turn: what the agent thinks, the command (None: submit), and the next step in
    words for a summary written now."""

    thought: str
    command: str | None
    next_step: str


def _find_the_failure(
    state: WorkingState,
    reproduction: Reproduction | None,
    locate: Callable[[WorkingState, Reproduction | None], str],
) -> Decision | None:
    """Run the suite, reproduce the issue, locate the bug; or submit once it is verified."""
    if state.failing is None:
        return Decision(
            "run the test suite to see what fails.",
            "# test: the whole suite\n" + SUITE,
            "run the test suite to find the failing tests",
        )
    if state.from_issue and reproduction is None:
        return Decision(
            "no failing test and no reproduction in the issue; nothing to go on.",
            None,
            "submit",
        )
    if state.verified:
        return Decision("the whole suite passes with the fix; submit.", None, "submit")
    if state.from_issue and reproduction and not state.reproduced and not state.suspects:
        return Decision(
            "no test fails; run the issue's snippet to see the bug.",
            "# reproduce: the issue's snippet, checked against its expected values\n"
            + reproduction.command(),
            "run the issue's snippet to reproduce the bug",
        )
    if state.suspects is None:
        return Decision(
            "rank the code lines the failing runs execute.",
            "# locate: rank the lines the failing runs execute\n" + locate(state, reproduction),
            "locate the bug again: rank the lines the failing runs execute",
        )
    return None


def _verify_the_fix(state: WorkingState) -> Decision | None:
    """A (partial) fix made the failing runs pass: run the whole suite."""
    if state.fix is not None and state.fix_leaves:
        left, of = len(state.fix_leaves), len(state.target)
        return Decision(
            f"{of - left} of {of} failing tests pass with {state.fix.key}; check that the "
            "whole suite fails only where it still should.",
            "# verify: the whole suite with the partial fix\n" + SUITE,
            f"run the whole test suite: keep the partial fix ({state.fix.key}) if only "
            "its remaining failing tests fail, then locate the rest",
        )
    if state.fix is not None:
        return Decision(
            "the failing runs pass now; check the whole suite.",
            "# verify: the whole suite with the fix\n" + SUITE,
            f"run the whole test suite to verify the fix ({state.fix.key}), then submit",
        )
    return None


def _try_next_candidate(state: WorkingState, reproduction: Reproduction | None) -> Decision | None:
    """Read the most suspicious function not read yet, or try its next candidate edit."""
    move = next_move(state)
    if isinstance(move, _Function):
        compare = move.read_detail not in state.twins
        return Decision(
            f"read {move.name}, which the failing runs implicate most"
            + (", and compare it with any other copy of it in the repository." if compare else "."),
            f"# read: {move.read_detail}\n{_revert(state)}"
            f"cat -n {shlex.quote(move.path)} | sed -n '{move.start},{move.end}p'"
            + ("\n" + twins_command(move.path, move.name, move.start, move.end) if compare else ""),
            f"read {move.path} lines {move.start}-{move.end} ({move.name}) and try the next "
            "candidate edit there",
        )
    if isinstance(move, Edit):
        check = (
            reproduction.command()
            if state.from_issue and reproduction
            else _test_command(state.target)
        )
        return Decision(
            f"try {move.label} at {move.path}:{move.line}.",
            f"# try: {move.key}\n{_revert(state)}{edit_command(move)}\n{check}",
            f"try the next candidate edit after {move.key}",
        )
    return None


def _back_out(state: WorkingState) -> Decision:
    """No candidate left: drop the kept partial fix, undo the last edit, or submit."""
    if state.kept:
        dropped = state.kept[-1].edit
        return Decision(
            f"no edit fixes the rest on top of {dropped.key}; drop it and search without it.",
            f"# drop: the kept partial fix {dropped.key}\n{_revert(state)}"
            + undo_command(dropped, [k.edit for k in state.kept[:-1]]),
            f"undo the kept partial fix {dropped.key}, then locate again",
        )
    if state.pending is not None:
        return Decision(
            "no candidate left; undo the last unhelpful edit.",
            "# revert: the last unhelpful edit\n" + _revert(state).rstrip("\n"),
            "submit",
        )
    return Decision(
        "no candidate edit left to try; submit what the workspace holds.", None, "submit"
    )


def _task_line(issue: str) -> str:
    for line in issue.splitlines():
        if line.strip():
            return line.strip().lstrip("#").strip()
    return "(no issue text)"


def _importable(command: str) -> str:
    """``command`` with the package importable in a ``src/`` layout (as an editable install
    would make it), on the line after the step's comment, which names the step."""
    first, _, rest = command.partition("\n")
    return f"{first}\n{SRC_LAYOUT}\n{rest}" if rest else command


def _test_command(tests: list[str]) -> str:
    ids = " ".join(shlex.quote(t) for t in tests)
    return (
        f"timeout {TRY_TIMEOUT_S} python3 -m pytest -q --tb=no -p no:cacheprovider {ids} 2>&1 "
        "| tail -n 30"
    )


def _revert(state: WorkingState) -> str:
    """The shell lines undoing the pending unhelpful edit ('' when there is none)."""
    if state.pending is None:
        return ""
    return undo_command(state.pending, [k.edit for k in state.kept]) + "\n"
