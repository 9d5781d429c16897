"""Cells whose every episode failed for infrastructure reasons: a run that measured nothing
there must not end like one that did. ``ac-bench``, its fork and ``ac-train collect`` print one
line per such cell (how many episodes, and why) and exit with ``INFRA_EXIT_CODE``; a cell is
whatever the run compares (``ac_env.bench.failures``: strategy x budget)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

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


def short_reason(reason: str) -> str:
    """``reason`` on one line, cut to a few hundred characters."""
    flat = " ".join(reason.split())
    return flat if len(flat) <= _REASON_CHARS else flat[: _REASON_CHARS - 3] + "..."
