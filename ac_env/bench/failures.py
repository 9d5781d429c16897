"""Cells whose every episode failed for infrastructure reasons: a run that measured nothing
there must not end like one that did. ``ac-bench``, its fork and ``ac-train collect`` print one
line per such cell (how many episodes, and why) and exit with ``INFRA_EXIT_CODE``."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ac_env.bench.fork import ForkEpisode
from ac_env.bench.runner import EpisodeRecord

INFRA_EXIT_CODE = 3
_REASON_CHARS = 300


@dataclass(frozen=True)
class FailedCell:
    """A cell (e.g. ``strategy none, budget $0.1``) none of whose episodes got a result."""

    cell: str
    episodes: int
    reasons: Counter[str]

    def line(self) -> str:
        why = "; ".join(f"{n}x {reason}" for reason, n in self.reasons.most_common(3))
        return (
            f"{self.cell}: all {self.episodes} episode(s) failed for infrastructure reasons: {why}"
        )


def failed_cells(outcomes: Iterable[tuple[str, str | None]]) -> list[FailedCell]:
    """The cells all of whose outcomes are infrastructure errors; ``outcomes``: (cell, the
    episode's infra error or None), cells in first-seen order."""
    by_cell: dict[str, list[str | None]] = defaultdict(list)
    for cell, error in outcomes:
        by_cell[cell].append(error)
    return [
        FailedCell(cell, len(errors), Counter(short_reason(e) for e in errors if e is not None))
        for cell, errors in by_cell.items()
        if errors and all(e is not None for e in errors)
    ]


def bench_failures(records: Sequence[EpisodeRecord], budgets: Sequence[float]) -> list[FailedCell]:
    """Cells of a benchmark: strategy x budget."""
    return failed_cells(
        (f"strategy {r.strategy}, budget ${budget:g}", _budget_error(r, budget))
        for r in records
        for budget in budgets
    )


def fork_failures(episodes: Sequence[ForkEpisode]) -> list[FailedCell]:
    """Cells of a fork: one per strategy (its original runs)."""
    return failed_cells(
        (f"fork, strategy {e.strategy}", _error(e.status, e.error)) for e in episodes
    )


def _budget_error(record: EpisodeRecord, budget: float) -> str | None:
    if record.status == "infra_error":
        return _error(record.status, record.error)
    outcome = next((o for o in record.budgets if o.budget == budget), None)
    return None if outcome is None else outcome.infra_error


def _error(status: str, error: str | None) -> str | None:
    if status != "infra_error":
        return None
    return error or "unknown infrastructure error"


def short_reason(reason: str) -> str:
    """``reason`` on one line, cut to a few hundred characters."""
    flat = " ".join(reason.split())
    return flat if len(flat) <= _REASON_CHARS else flat[: _REASON_CHARS - 3] + "..."
