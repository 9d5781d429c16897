"""Fixed timing rules as ``AutoCompact-Timing-v0`` decisions: the baselines a trained timing
policy is compared with. ``decide_by(rule)`` turns any rule of ``ac_env.compaction.when``
(``Never()``, ``Every(n)``, ``TokenThreshold(tokens)``, ``AfterPassingTests()``, ...) into a
``Decide``, ``(env, observation) -> action``, reading the inner env's ``moment()``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ac_env.compaction.when import TimingRule
from ac_env.timing.env import COMPACT, CONTINUE, TimingEnv

Decide = Callable[[TimingEnv, np.ndarray], int]


def decide_by(rule: TimingRule) -> Decide:
    """Compact when ``rule`` holds at the inner env's moment."""

    def decide(env: TimingEnv, obs: np.ndarray) -> int:
        return COMPACT if rule(env.inner.moment()) else CONTINUE

    return decide
