"""Fixed timing rules for ``AutoCompact-Timing-v0``: the baselines a trained timing policy is
compared with. Each is a ``Decide``, ``(env, observation) -> action``: ``never`` continues,
``every(n)`` compacts once ``n`` worker turns have passed since the start or the last
compaction, ``threshold(tokens)`` compacts once the context holds ``tokens``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ac_env.timing.env import COMPACT, CONTINUE, TimingEnv
from ac_env.timing.features import steps_since_compaction

Decide = Callable[[TimingEnv, np.ndarray], int]


def never(env: TimingEnv, obs: np.ndarray) -> int:
    return CONTINUE


def every(n: int) -> Decide:
    def decide(env: TimingEnv, obs: np.ndarray) -> int:
        return COMPACT if steps_since_compaction(env.inner) >= n else CONTINUE

    return decide


def threshold(tokens: int) -> Decide:
    def decide(env: TimingEnv, obs: np.ndarray) -> int:
        return COMPACT if env.inner.context.tokens >= tokens else CONTINUE

    return decide
