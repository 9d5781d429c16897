"""When compaction happens and how a policy asks for it: ``Compactor``, one per episode.

Triggers:

- **proactive**: the policy asks. Protocol ``inline``: its reply is the summary (it starts
  with ``# Auto Context Summary``). Protocol ``tool_call``: it makes a bare ``compact`` call
  (a bash block holding exactly ``compact``, or the JSON tool ``compact`` without a summary);
  the next observation ends with ``WORKING_STATE_REQUEST`` and the next turn, billed as any
  turn, is the summary. An action of the other protocol is a format error.
- **forced**: after a turn at whose end the ``force_when`` rule holds (the env's:
  ``TokenThreshold``, the context above ``forced_compaction_threshold`` tokens; any rule of
  ``ac_env.compaction.when`` fits), the observation ends with ``COMPACTION_REQUEST``; the next
  turn is the summary (in either protocol).
- **masking**: after every turn that did not rewrite, command outputs older than the last
  ``mask_keep`` become a placeholder.

A requested summary (forced, or after a ``compact`` call) that is not valid is written by the
fallback summarizer instead; an unrequested invalid one is a format error. A valid summary
rewrites the prefix (``rewrite.rewrite_prefix``).

**Summary-ignored** (``skip=True``): the compaction call is skipped, no summary is generated,
billed or kept, and the run goes on with its full history. ``tool_call``: the ``compact`` call
is answered by ``COMPACTION_SKIPPED``, no request follows. ``inline``: the reply is cut right
after the ``# Auto Context Summary`` heading, where a backend with stop sequences stops; it is
billed and shown as cut, then answered by ``COMPACTION_SKIPPED``. (The policies here take no
per-turn stop sequence, so one that writes on is cut by the env: its summary is not billed or
kept, but the trajectory records the whole reply with its own token ids and log-probs, since
that is what was sampled; the next prompt holds the cut, so a trainer starts a new token
sequence there.) Requested summaries (forced) are never cut or skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

from ac_env.actions import SUMMARY_HEADER, Compact, CompactCall, FormatError, ParseResult
from ac_env.compaction.rewrite import Rewrite, mask_observations, rewrite_prefix
from ac_env.compaction.summary import summary_problems
from ac_env.compaction.texts import COMPACTION_REQUEST, COMPACTION_SKIPPED, WORKING_STATE_REQUEST
from ac_env.compaction.when import Moment, TimingRule
from ac_env.context import Context
from ac_env.trajectory import CompactionEvent, Summarizer

CompactionProtocol = Literal["inline", "tool_call"]
Trigger = Literal["proactive", "forced"]


@dataclass(frozen=True)
class Turn:
    """One model turn as compaction reads it: the action to execute, the output to bill and
    show, the generation details that go with it, and the request it answers. ``sampled`` is
    the policy's whole reply when summary-ignored cut it (``output`` is then the cut): the
    trajectory records that reply, whose token ids and log-probs ``generation`` holds."""

    action: ParseResult
    output: str
    generation: dict[str, Any]
    answers: Trigger | None
    sampled: str | None = None

    @property
    def recorded(self) -> str:
        """The output the trajectory records: what the policy sampled."""
        return self.output if self.sampled is None else self.sampled

    @property
    def compacts(self) -> bool:
        """Whether ``Compactor.act`` handles this turn (not the env's other actions)."""
        return self.answers is not None or isinstance(self.action, Compact | CompactCall)


@dataclass
class Compactor:
    """The compaction rules of one episode (see the module docstring). ``pending`` is the
    request the next turn answers; it is part of an episode snapshot."""

    protocol: CompactionProtocol
    skip: bool
    keep_recent: int
    mask_keep: int | None
    force_when: TimingRule | None
    pending: Trigger | None = None

    def read(self, parsed: ParseResult, output: str, generation: dict[str, Any]) -> Turn:
        """The turn, from the parser's action and the policy's output."""
        if self.pending is not None:
            return Turn(_validated(parsed), output, generation, self.pending)
        sampled = None
        if isinstance(parsed, Compact) and self.skip:
            parsed, cut = _cut_at_heading(parsed, output)
            sampled, output = (output, cut) if cut != output else (None, output)
        wrong = _other_protocol(parsed, self.protocol)
        if wrong is not None:
            return Turn(FormatError(message=wrong), output, generation, None, sampled)
        if isinstance(parsed, Compact) and not self.skip:
            parsed = _validated(parsed)
        return Turn(parsed, output, generation, None, sampled)

    def act(
        self, turn: Turn, context: Context, step: int, fallback: Callable[[], str]
    ) -> CompactionEvent | None:
        """Carry out a turn that ``compacts``; the event when the prefix was rewritten."""
        summarizer = cast(Summarizer, turn.generation.get("produced_by", "policy"))
        if turn.answers is not None:
            self.pending = None
            if isinstance(turn.action, Compact):
                return self._rewrite(context, step, turn.action.summary, turn.answers, summarizer)
            return self._rewrite(context, step, fallback(), turn.answers, "fallback")
        if isinstance(turn.action, Compact) and not self.skip:
            return self._rewrite(context, step, turn.action.summary, "proactive", summarizer)
        context.append("assistant", turn.output, "action")
        if self.skip:
            context.append("user", COMPACTION_SKIPPED, "compaction_skipped")
        else:  # a compact call
            context.append("user", WORKING_STATE_REQUEST, "compaction_request")
            self.pending = "proactive"
        return None

    def mask(self, context: Context, step: int) -> CompactionEvent | None:
        """Observation masking after a turn that did not rewrite, when it is on."""
        if self.mask_keep is None:
            return None
        segment_before = context.segment
        done = mask_observations(context, self.mask_keep)
        if done is None:
            return None
        return _event(done, step, segment_before, "", "masking", "none")

    def request_if_due(self, context: Context, moment: Moment) -> None:
        """The forced trigger: ask for a summary when ``force_when`` holds at ``moment``."""
        if self.pending is None and self.force_when is not None and self.force_when(moment):
            context.append("user", COMPACTION_REQUEST, "compaction_request")
            self.pending = "forced"

    def _rewrite(
        self, context: Context, step: int, summary: str, trigger: Trigger, summarizer: Summarizer
    ) -> CompactionEvent:
        segment_before = context.segment
        done = rewrite_prefix(context, summary, self.keep_recent, self._forces_at_once)
        return _event(done, step, segment_before, summary, trigger, summarizer)

    def _forces_at_once(self, context: Context) -> bool:
        """A rewritten context the forced trigger would ask to summarize again at once: kept
        interactions that leave it so are dropped (``rewrite_prefix``), since a summary that
        does not bring the context under the trigger buys nothing and repeats."""
        if self.force_when is None:
            return False
        return self.force_when(Moment(context.observation(), context.tokens, 0))


def _validated(parsed: ParseResult) -> ParseResult:
    """An invalid summary is a format error, not a rewrite."""
    if isinstance(parsed, Compact):
        problems = summary_problems(parsed.summary)
        if problems:
            return FormatError(message="Summary not applied: " + "; ".join(problems) + ".")
    return parsed


def _other_protocol(parsed: ParseResult, protocol: CompactionProtocol) -> str | None:
    """Why ``parsed`` is not how this protocol compacts; None when it is."""
    if protocol == "inline" and isinstance(parsed, CompactCall):
        return (
            f"To compact, reply with the working-state summary itself, starting with "
            f"'{SUMMARY_HEADER}'; there is no compact command."
        )
    if protocol == "tool_call" and isinstance(parsed, Compact):
        return (
            "To compact, first call compact (a bash block holding only `compact`); "
            "you are then asked for the summary."
        )
    return None


def _cut_at_heading(parsed: Compact, output: str) -> tuple[ParseResult, str]:
    """Summary-ignored: the action, and the reply up to the end of the summary heading, where
    a backend with stop sequences stops (a reply that goes on is cut). One without the heading
    is no summary at all (a format error)."""
    at = output.find(SUMMARY_HEADER)
    if at < 0:
        return _validated(parsed), output
    cut = output[: at + len(SUMMARY_HEADER)]
    return Compact(summary=SUMMARY_HEADER), cut if output[len(cut) :].strip() else output


def _event(
    done: Rewrite,
    step: int,
    segment_before: int,
    summary: str,
    trigger: Literal["proactive", "forced", "masking"],
    summarizer: Summarizer | Literal["none"],
) -> CompactionEvent:
    return CompactionEvent(
        step=step,
        trigger=trigger,
        summarizer=summarizer,
        summary=summary,
        rewrite_from=done.rewrite_from,
        segment_before=segment_before,
        segment_after=done.segment,
        tokens_before=done.tokens_before,
        tokens_after=done.tokens_after,
        kept_messages=done.kept_messages,
    )
