"""``never``: no compaction (the full-history baseline)."""

from __future__ import annotations

from dataclasses import dataclass

from ac_env.compaction.when.moment import Moment


@dataclass(frozen=True)
class Never:
    @property
    def name(self) -> str:
        return "never"

    @property
    def description(self) -> str:
        return "never compacts"

    def __call__(self, moment: Moment) -> bool:
        return False


RULE = Never
