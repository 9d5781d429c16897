"""``AutoCompact-Timing-v0``: an RL agent decides *when* a coding worker compacts its context.

The env owns an ``AutoCompact-SWE-v0`` env and a worker policy (the reference agent by default,
which never compacts on its own). Before each worker turn the agent picks ``Discrete(2)``:

- ``0`` continue: the worker acts on its observation and the inner env steps with its response;
- ``1`` compact now: the inner env steps with a working-state summary, the worker's own (its
  answer to the env's ``COMPACTION_REQUEST``) when it is a valid summary, else
  ``extractive_summary`` of the commands run and the workspace's real diff
  (``ac_env.timing.timed.compaction_response``, which ``ac-bench``'s ``learned`` shares);
- ``2`` (only with ``choose_summarizer=True``, then the space is ``Discrete(3)``) compact now
  with the extractive summary, without asking the worker (no model call for the summary).

Compaction is masked (``action_masks()``, for ``sb3_contrib.MaskablePPO``) until the worker has
taken a turn since the start or the last compaction; a masked ``1`` acts as ``0`` and sets
``info["compaction_masked"]``. The observation is a ``Box`` of features in [0, 1]
(``ac_env.timing.features`` documents each index). The reward is 0 until the end,
then the inner env's reward (1 when the task is resolved) minus ``cost_penalty`` times the USD
the episode spent; an infrastructure failure (inner reward NaN) gives 0 and
``info["infra_failure"] = True``. ``info`` is the inner env's, plus ``compacted_now``,
``compaction_masked``, ``summarizer`` (``"worker"`` or ``"extractive"`` when it compacted; the
inner trajectory records an extractive summary as ``produced_by="fallback"``) and, at the end,
``inner_reward``, ``cost_usd`` and ``infra_failure``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import gymnasium as gym
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ac_env.agents.reference import ReferenceAgent
from ac_env.config import ConfigError
from ac_env.env import AutoCompactSWEEnv
from ac_env.policy import Policy, PolicyOutput
from ac_env.timing.features import FEATURE_NAMES, features
from ac_env.timing.timed import compaction_allowed, compaction_response

logger = logging.getLogger(__name__)

CONTINUE = 0
COMPACT = 1
COMPACT_EXTRACTIVE = 2


class TimingConfig(BaseModel):
    """Every keyword of ``gym.make("AutoCompact-Timing-v0", ...)``."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    env_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="keywords of the inner AutoCompact-SWE-v0 env"
    )
    choose_summarizer: bool = Field(
        default=False,
        description="Discrete(3): action 2 compacts with the extractive summary, no worker call",
    )
    cost_penalty: float = Field(
        default=10.0, ge=0, description="reward lost per USD spent (10: a cent costs 0.1)"
    )
    worker: Any = Field(
        default=None,
        description="a Policy, or a zero-argument factory returning one; None: the reference "
        "agent that never compacts on its own",
    )

    @field_validator("worker")
    @classmethod
    def _policy_or_factory(cls, worker: Any) -> Any:
        if worker is None or _is_policy(worker) or callable(worker):
            return worker
        raise ValueError(f"must be a Policy (with .act) or a factory, got {type(worker).__name__}")

    def make_worker(self) -> Policy:
        if self.worker is None:
            return ReferenceAgent(compact_when="never")
        if _is_policy(self.worker):
            return self.worker
        made = self.worker()
        if not _is_policy(made):
            raise ConfigError(f"worker: the factory returned {type(made).__name__}, not a Policy")
        return made


def _is_policy(worker: Any) -> bool:
    """A policy object (a class with ``act`` is a factory)."""
    return not isinstance(worker, type) and callable(getattr(worker, "act", None))


def parse_timing_config(kwargs: dict[str, Any]) -> TimingConfig:
    try:
        return TimingConfig(**kwargs)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg']}" for e in err.errors()
        )
        raise ConfigError(f"AutoCompact-Timing-v0: invalid configuration: {problems}") from None


class TimingEnv(gym.Env[np.ndarray, np.int64]):
    """See the module docstring; every keyword is a field of ``TimingConfig``."""

    metadata = {"render_modes": []}

    def __init__(self, **config: Any) -> None:
        self.config = parse_timing_config(config)
        self.inner = AutoCompactSWEEnv(**self.config.env_kwargs)
        self.worker: Policy = self.config.make_worker()
        self.observation_space = gym.spaces.Box(0.0, 1.0, (len(FEATURE_NAMES),), np.float32)
        self.action_space: gym.spaces.Discrete = gym.spaces.Discrete(
            3 if self.config.choose_summarizer else 2
        )
        self._observation: tuple[dict[str, str], ...] = ()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """``options`` go to the inner env (``{"task_id": ...}`` picks a task)."""
        super().reset(seed=seed)
        self._observation, info = self.inner.reset(seed=seed, options=options)
        return features(self.inner), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.inner.trajectory is None or self.inner.trajectory.end is not None:
            raise RuntimeError("the episode has ended (or never started): call reset()")
        if not self.action_space.contains(action):
            valid = "0 (continue), 1 (compact)" + (
                ", 2 (compact, extractive summary)" if self.config.choose_summarizer else ""
            )
            raise ValueError(f"action: {action!r} is not one of {valid}")
        kind = int(action)
        masked = kind != CONTINUE and not bool(self.action_masks()[kind])
        compact = kind != CONTINUE and not masked
        if compact:
            response: PolicyOutput | None = compaction_response(
                self.inner, self.worker, self._observation, ask_worker=kind == COMPACT
            )
        else:
            response = self._worker_turn()
        summarizer = "extractive" if response and response.produced_by == "fallback" else "worker"
        if response is None:  # the worker failed: end the episode as rollout() does
            inner_reward, info = self.inner.abort("policy_error")
            terminated, truncated = False, True
        else:
            self._observation, inner_reward, terminated, truncated, info = self.inner.step(response)
        info["compacted_now"] = bool(compact)
        info["compaction_masked"] = masked
        info["summarizer"] = summarizer if compact else None
        reward = 0.0
        if terminated or truncated:
            reward = self._final_reward(inner_reward, info)
        return features(self.inner), reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """``[continue allowed, compact allowed(, extractive compact allowed)]``: compaction
        needs a worker turn since the start or the last compaction."""
        allowed = compaction_allowed(self.inner)
        return np.array([True] + [allowed] * (int(self.action_space.n) - 1))

    def close(self) -> None:
        self.inner.close()
        super().close()

    # ---- helpers -------------------------------------------------------------------------

    def _worker_turn(self) -> PolicyOutput | None:
        try:
            return self.worker.act(self._observation)
        except Exception as error:  # a policy failure ends the episode, never the run
            logger.warning("worker error: %s: %s", type(error).__name__, error)
            return None

    def _final_reward(self, inner_reward: float, info: dict[str, Any]) -> float:
        usd = self.inner.meter.total.usd
        failed = math.isnan(inner_reward)
        info["inner_reward"] = inner_reward
        info["cost_usd"] = usd
        info["infra_failure"] = failed
        return 0.0 if failed else inner_reward - self.config.cost_penalty * usd
