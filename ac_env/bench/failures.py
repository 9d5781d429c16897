"""The cells of a benchmark and of its fork whose every episode failed for infrastructure
reasons (``ac_env.runs.failures``): ``ac-bench`` prints one line each and exits 3."""

from __future__ import annotations

from collections.abc import Sequence

from ac_env.bench.fork import ForkEpisode
from ac_env.bench.runner import EpisodeRecord
from ac_env.runs.failures import FailedCell, failed_cells
from ac_env.runs.retry import recorded_infra_error


def bench_failures(records: Sequence[EpisodeRecord], budgets: Sequence[float]) -> list[FailedCell]:
    """Cells of a benchmark: strategy x budget."""
    return failed_cells(
        (f"strategy {r.strategy}, budget ${budget:g}", _budget_error(r, budget))
        for r in records
        for budget in budgets
    )


def fork_failures(episodes: Sequence[ForkEpisode]) -> list[FailedCell]:
    """Cells of a fork: one per strategy (its original runs)."""
    return failed_cells((f"fork, strategy {e.strategy}", recorded_infra_error(e)) for e in episodes)


def _budget_error(record: EpisodeRecord, budget: float) -> str | None:
    if record.status == "infra_error":
        return recorded_infra_error(record)
    outcome = next((o for o in record.budgets if o.budget == budget), None)
    return None if outcome is None else outcome.infra_error
