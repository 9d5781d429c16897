"""``every:N``: compact once ``N`` policy turns have passed since the start or the last
compaction."""

from __future__ import annotations

from dataclasses import dataclass

from ac_env.compaction.when.moment import Moment


@dataclass(frozen=True)
class Every:
    turns: int

    def __post_init__(self) -> None:
        if self.turns <= 0:
            raise ValueError(f"every: turns must be positive, got {self.turns}")

    @property
    def name(self) -> str:
        return f"every:{self.turns}"

    @property
    def description(self) -> str:
        return f"compacts every {self.turns} turns"

    def __call__(self, moment: Moment) -> bool:
        return moment.turns_since_compaction >= self.turns


RULE = Every
