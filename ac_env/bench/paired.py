"""Per-task values of a run's episodes, and paired comparisons of strategies on them.

Every figure of the report is over tasks: a task's value is the mean over its seeds of its
episodes that ran (status ``ok``; infrastructure failures are left out). A paired comparison
sets a strategy against the reference strategy (``none``, full history, when the run has it;
else the first strategy) at one budget: the differences in success rate and in mean cost per
episode over the tasks both ran, with 95% paired bootstrap intervals over tasks
(``metrics.paired_difference``). A difference *differs* when its interval excludes 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from pydantic import BaseModel, computed_field

from ac_env.analysis.stats import Estimate, paired_difference
from ac_env.bench.budgets import BudgetOutcome
from ac_env.bench.runner import EpisodeRecord

Value = Callable[[EpisodeRecord], float | None]
FULL_HISTORY = "none"


def task_values(records: Sequence[EpisodeRecord], value: Value) -> dict[str, list[float]]:
    """Each task's values, one per ok episode that has one (in record order)."""
    by_task: dict[str, list[float]] = defaultdict(list)
    for record in records:
        if record.status != "ok":
            continue
        v = value(record)
        if v is not None:
            by_task[record.instance_id].append(v)
    return dict(by_task)


def by_strategy(records: Sequence[EpisodeRecord]) -> dict[str, list[EpisodeRecord]]:
    grouped: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for record in records:
        grouped[record.strategy].append(record)
    return grouped


def outcome_at(record: EpisodeRecord, budget: float) -> BudgetOutcome | None:
    return next((o for o in record.budgets if o.budget == budget), None)


def solved_at(budget: float) -> Value:
    """1.0 when the episode's run at ``budget`` solved the task, else 0.0."""

    def solved(record: EpisodeRecord) -> float | None:
        outcome = outcome_at(record, budget)
        return None if outcome is None else float(outcome.reward == 1.0)

    return solved


def spent_at(budget: float) -> Value:
    """What the episode's run at ``budget`` cost (USD)."""

    def spent(record: EpisodeRecord) -> float | None:
        outcome = outcome_at(record, budget)
        return None if outcome is None else outcome.cost.usd

    return spent


class PairedComparison(BaseModel):
    """``strategy`` minus ``reference`` at ``budget``: ``success`` in rate (a fraction; 0.2 is
    20 points), ``cost_usd`` in mean cost per episode; ``n`` of each is the paired tasks."""

    strategy: str
    reference: str
    budget: float
    success: Estimate
    cost_usd: Estimate

    @computed_field  # type: ignore[prop-decorator]
    @property
    def success_differs(self) -> bool:
        return _excludes_zero(self.success)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cost_differs(self) -> bool:
        return _excludes_zero(self.cost_usd)

    def line(self) -> str:
        """The comparison in plain words, e.g. ``fixed vs none at $0.005 (20 tasks): success
        +20.0 points [+5.0, +35.0] (differs); cost -$0.0010 [-$0.0020, +$0.0001] per episode
        (same within noise)``."""
        head = f"{self.strategy} vs {self.reference} at ${self.budget:g}"
        if self.success.n == 0:
            return f"{head}: no task that both ran"
        s, c = self.success, self.cost_usd
        return (
            f"{head} ({s.n} tasks): success {100 * s.mean:+.1f} points "
            f"[{100 * s.low:+.1f}, {100 * s.high:+.1f}] ({_verdict(self.success_differs)}); "
            f"cost {_usd(c.mean)} [{_usd(c.low)}, {_usd(c.high)}] per episode "
            f"({_verdict(self.cost_differs)})"
        )


def reference_strategy(strategies: Sequence[str]) -> str:
    """``none`` (full history) when the run has it, else its first strategy."""
    return FULL_HISTORY if FULL_HISTORY in strategies else strategies[0]


def paired_comparisons(
    records: Sequence[EpisodeRecord], strategies: Sequence[str], budgets: Sequence[float]
) -> list[PairedComparison]:
    """Every strategy but the reference against it, at every budget."""
    reference = reference_strategy(strategies)
    groups = by_strategy(records)
    base = groups[reference]
    return [
        PairedComparison(
            strategy=strategy,
            reference=reference,
            budget=budget,
            success=paired_difference(
                task_values(groups[strategy], solved_at(budget)),
                task_values(base, solved_at(budget)),
            ),
            cost_usd=paired_difference(
                task_values(groups[strategy], spent_at(budget)),
                task_values(base, spent_at(budget)),
            ),
        )
        for strategy in strategies
        if strategy != reference
        for budget in budgets
    ]


def paired_section(comparisons: Sequence[PairedComparison]) -> list[str]:
    """The report's markdown section: a verdict, then one line per comparison; nothing when
    there is nothing to compare (one strategy)."""
    if not comparisons:
        return []
    reference = comparisons[0].reference
    differing = [c for c in comparisons if c.success_differs or c.cost_differs]
    if differing:
        which = "; ".join(_what_differs(c) for c in differing)
        verdict = f"Differ from `{reference}` (interval excludes 0): {which}."
    else:
        verdict = f"No strategy differs from `{reference}` at any budget (every interval holds 0)."
    return [
        f"## Paired comparisons against `{reference}` (by task, 95% paired bootstrap CI)",
        verdict,
        "\n".join(f"- {c.line()}" for c in comparisons),
        "Each task's value is first averaged over its seeds; only tasks both strategies ran "
        "without an infrastructure failure are paired; tasks are resampled, the same resample "
        "for both strategies.",
    ]


def _excludes_zero(estimate: Estimate) -> bool:
    return estimate.low > 0 or estimate.high < 0  # False for nan (no paired task)


def _what_differs(c: PairedComparison) -> str:
    figures = (("success", c.success_differs), ("cost", c.cost_differs))
    return f"{c.strategy} at ${c.budget:g} in " + " and ".join(n for n, d in figures if d)


def _verdict(differs: bool) -> str:
    return "differs" if differs else "same within noise"


def _usd(amount: float) -> str:
    return f"{'-' if amount < 0 else '+'}${abs(amount):.4f}"
