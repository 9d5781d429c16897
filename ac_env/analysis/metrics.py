"""Per-episode figures read from a trajectory (their aggregates: ``ac_env.analysis.stats``).

Cost is split by where it went: uncached input, cached input, output (each priced at the tier
of its call), and the part of it spent on summary calls: those whose output was a summary or
that answered the env's request for one (their prompt ends with a ``compaction_request``
message), with the output part of that (writing the summaries) apart. A compaction's
*phase* says whether it fired before or after the root cause came into view (``root_cause_step``:
a command showed a file the bug is in, or printed such a file's path together with a function
the gold patch changes, as a traceback or a suspect ranking does; the task's ground truth).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

from ac_env.analysis.payback import Payback, paybacks, priced
from ac_env.compaction import CommandRecord, files_read
from ac_env.cost import Pricing
from ac_env.tasks import Task
from ac_env.trajectory import ModelCall, ToolResult, Trajectory

Phase = Literal["before_root_cause", "after_root_cause", "unknown"]


class CompactionRecord(BaseModel):
    step: int
    kind: Literal["proactive", "forced", "masking", "skipped"]
    tokens_before: int
    occupancy: float  # tokens_before / context window
    phase: Phase


class CostSplit(BaseModel):
    uncached_input_usd: float = 0.0
    cached_input_usd: float = 0.0
    output_usd: float = 0.0
    summary_usd: float = 0.0  # summary calls' whole cost, included in the three above
    summary_output_usd: float = 0.0  # writing the summaries: included in summary_usd and output_usd


class EpisodeMetrics(BaseModel):
    reward: float | None
    success: bool
    exit_reason: str
    steps: int
    cost: CostSplit
    peak_context_tokens: int
    mean_context_tokens: float
    cache_hit_rate: float
    root_cause_step: int | None
    compactions: list[CompactionRecord]
    paybacks: list[Payback] = []  # per applied compaction: when it pays for itself

    def count(self, kind: str) -> int:
        return sum(1 for c in self.compactions if c.kind == kind)


def episode_metrics(
    trajectory: Trajectory, task: Task, pricing: Pricing, context_window: int
) -> EpisodeMetrics:
    end = trajectory.end
    if end is None:
        raise ValueError(f"trajectory of {trajectory.header.instance_id} has no end")
    calls = trajectory.model_calls()
    split = CostSplit()
    for call in calls:
        _add_call_cost(split, call, pricing)
    cached = sum(c.cost.input_cached for c in calls)
    total_input = cached + sum(c.cost.input_uncached for c in calls)
    contexts = [c.context_tokens for c in calls]
    root_step = root_cause_step(trajectory.tool_results(), task)
    return EpisodeMetrics(
        reward=end.reward,
        success=end.reward == 1.0,
        exit_reason=end.exit_reason,
        steps=len(calls),
        cost=split,
        peak_context_tokens=max(contexts, default=0),
        mean_context_tokens=float(np.mean(contexts)) if contexts else 0.0,
        cache_hit_rate=cached / total_input if total_input else 0.0,
        root_cause_step=root_step,
        compactions=_compactions(trajectory, root_step, task, context_window),
        paybacks=paybacks(trajectory, pricing, {c.step for c in calls if is_summary_call(c)}),
    )


def _add_call_cost(split: CostSplit, call: ModelCall, pricing: Pricing) -> None:
    uncached, cached, output = priced(call, pricing)
    split.uncached_input_usd += uncached
    split.cached_input_usd += cached
    split.output_usd += output
    if is_summary_call(call):
        split.summary_usd += uncached + cached + output
        split.summary_output_usd += output


def is_summary_call(call: ModelCall) -> bool:
    """Whether the call wrote a summary, or was asked for one (then an invalid answer is still
    the cost of writing it; the fallback summarizer takes over)."""
    requested = bool(call.message_kinds) and call.message_kinds[-1] == "compaction_request"
    return requested or call.action.get("kind") == "compact"


def root_cause_step(results: Sequence[ToolResult], task: Task) -> int | None:
    """The step of the first command that showed a file the bug is in, or whose output names
    such a file together with a function the gold patch changes (None: never, or the task has
    no ground truth). Mentioning the file in the command alone does not count."""
    if task.ground_truth is None:
        return None
    files = set(task.ground_truth.files)
    names = {f.split(":")[-1].split(".")[-1] for f in task.ground_truth.functions}
    for result in results:
        if files & set(files_read_by(result)):
            return result.step
        if any(f in result.output for f in files) and any(n in result.output for n in names):
            return result.step
    return None


def files_read_by(result: ToolResult) -> list[str]:
    """The files a command shows (``compaction.files_read``), its comment lines dropped and
    its lines taken as separate commands (an agent's command may open with ``# why``)."""
    lines = [line for line in result.command.splitlines() if not line.lstrip().startswith("#")]
    return files_read([CommandRecord("; ".join(lines), result.output, result.exit_code)])


def _compactions(
    trajectory: Trajectory, root_step: int | None, task: Task, context_window: int
) -> list[CompactionRecord]:
    def phase(step: int) -> Phase:
        if task.ground_truth is None:
            return "unknown"
        return (
            "after_root_cause"
            if root_step is not None and step > root_step
            else ("before_root_cause")
        )

    records = [
        CompactionRecord(
            step=event.step,
            kind=event.trigger,
            tokens_before=event.tokens_before,
            occupancy=event.tokens_before / context_window,
            phase=phase(event.step),
        )
        for event in trajectory.compactions()
    ]
    applied = {event.step for event in trajectory.compactions()}
    calls = trajectory.model_calls()
    end = trajectory.end
    # The last call of an episode cut short (budget, window, steps) was never executed: its
    # compaction was cut, not skipped.
    cut = calls[-1].step if calls and end is not None and end.exit_reason != "submitted" else None
    for call in calls:
        skipped = call.action.get("kind") == "compact" and not call.forced_compaction_request
        if skipped and call.step not in applied and call.step != cut:
            records.append(
                CompactionRecord(
                    step=call.step,
                    kind="skipped",
                    tokens_before=call.context_tokens,
                    occupancy=call.context_tokens / context_window,
                    phase=phase(call.step),
                )
            )
    return sorted(records, key=lambda r: r.step)
