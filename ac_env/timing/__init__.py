"""``AutoCompact-Timing-v0``: an env built on ``AutoCompact-SWE-v0`` in which the agent only
decides when the worker compacts (``Box`` features, ``Discrete`` actions), for SB3 and other
RL libraries. ``features`` documents each feature."""

from ac_env.timing.env import COMPACT, COMPACT_EXTRACTIVE, CONTINUE, TimingEnv

__all__ = ["COMPACT", "COMPACT_EXTRACTIVE", "CONTINUE", "TimingEnv"]
