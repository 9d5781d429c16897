"""``threshold:TOKENS``: compact once the context holds more than ``TOKENS`` tokens. The env's
forced fallback (``forced_compaction_threshold``) is this rule."""

from __future__ import annotations

from dataclasses import dataclass

from ac_env.compaction.when.moment import Moment


@dataclass(frozen=True)
class TokenThreshold:
    tokens: int

    def __post_init__(self) -> None:
        if self.tokens <= 0:
            raise ValueError(f"threshold: tokens must be positive, got {self.tokens}")

    @property
    def name(self) -> str:
        return f"threshold:{self.tokens}"

    @property
    def description(self) -> str:
        return f"compacts once the context holds more than {self.tokens:,} tokens"

    def __call__(self, moment: Moment) -> bool:
        return moment.tokens > self.tokens


RULE = TokenThreshold
