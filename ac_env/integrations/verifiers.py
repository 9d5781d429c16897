"""AutoCompact-SWE-v0 as a verifiers v1 environment (``verifiers`` 0.3.1, ``verifiers.v1``):
a taskset of episodes and a harness that plays them.

- ``AutoCompactTaskset``: one task per episode seed; every task carries the ``gym.make``
  keywords of ``AutoCompact-SWE-v0`` (checked when the taskset is configured). Its task's
  reward is the episode's (``trace.info["autocompact"]["reward"]``; ``nan`` rewards, the
  env's infrastructure failures, score 0).
- ``AutoCompactHarness``: runs the episode in-process (verifiers' contract for a harness
  without a program: every model call goes through the rollout's interception endpoint,
  and the trace is the record). The model acts in the env's own context; when the env
  rewrites that context (a compaction: the history after a summary starts afresh), the next
  request no longer extends the previous one, so verifiers' message graph branches there:
  each compaction segment is its own branch, hence its own training sample in prime-rl,
  and every branch of the trace carries the trace's one reward.
- ``load_environment``: the environment, as prime-rl's hub loads it (the package
  ``environments/autocompact_swe`` wraps this module under the hub id ``autocompact-swe``).

What the env records (the trajectory, whose segments ``ac_train.segments`` cuts) lands in
``trace.info["autocompact"]``.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import gymnasium as gym
from pydantic import Field, field_validator
from verifiers.v1 import (
    AgentConfig,
    Harness,
    HarnessConfig,
    ModelContext,
    ProgramResult,
    Runtime,
    SingleAgentEnv,
    SingleAgentEnvConfig,
    SubprocessConfig,
    Task,
    TaskData,
    Taskset,
    TasksetConfig,
    Trace,
    reward,
)

from ac_env.agents.http import OpenAIChatPolicy
from ac_env.agents.rollout import rollout
from ac_env.config import parse_config
from ac_env.trajectory import Trajectory

HUB_ID = "autocompact-swe"
"""The id of the hub package (``environments/autocompact_swe``): taskset and harness."""


class AutoCompactTaskData(TaskData):
    """One episode: the env's settings and the seed ``reset`` gets."""

    seed: int
    env: dict[str, Any] = Field(default_factory=dict)
    """Keywords of ``gym.make("AutoCompact-SWE-v0", ...)``."""


class AutoCompactTask(Task[AutoCompactTaskData]):
    @reward
    async def episode_reward(self, trace: Trace) -> float:
        """The env's reward of the episode; 0 where there is none (``nan``: infrastructure)."""
        value = trace.info.get("autocompact", {}).get("reward")
        return 0.0 if value is None or math.isnan(value) else float(value)


class AutoCompactTasksetConfig(TasksetConfig):
    env: dict[str, Any] = Field(default_factory=dict)
    """Keywords of ``gym.make("AutoCompact-SWE-v0", ...)`` for every episode."""
    seeds: list[int] = Field(default_factory=lambda: list(range(8)))
    """One task per seed."""

    @field_validator("env")
    @classmethod
    def _env_settings(cls, value: dict[str, Any]) -> dict[str, Any]:
        parse_config(value)  # a bad setting names its field here, not at the first reset
        return value


class AutoCompactTaskset(Taskset[AutoCompactTask, AutoCompactTasksetConfig]):
    def load(self) -> list[AutoCompactTask]:
        return [
            AutoCompactTask(
                AutoCompactTaskData(
                    idx=index,
                    name=f"AutoCompact-SWE-v0 seed {seed}",
                    # The model is shown the env's own observation, not this line; verifiers
                    # refuses a task without a prompt.
                    prompt=f"AutoCompact-SWE-v0 episode (seed {seed})",
                    seed=seed,
                    env=self.config.env,
                ),
                self.config.task,
            )
            for index, seed in enumerate(self.config.seeds)
        ]


class AutoCompactHarnessConfig(HarnessConfig):
    id: str = HUB_ID
    temperature: float = 1.0
    """Sampling temperature the harness asks for (a run's sampling settings override it)."""
    max_tokens: int = Field(512, ge=1)
    """Most tokens per model call (likewise overridden by a run's sampling settings)."""
    request_timeout_s: float = Field(600.0, gt=0)


class AutoCompactHarness(Harness[AutoCompactHarnessConfig]):
    """Plays one AutoCompact episode in-process against the rollout's interception endpoint."""

    EXECUTES_CODE = True  # the model's commands run, in the env's own sandbox
    NEEDS_CONTAINER = False  # the env isolates them itself (bubblewrap or Docker)

    async def launch(
        self,
        ctx: ModelContext,
        trace: Trace,
        runtime: Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: TaskData,
    ) -> ProgramResult:
        if not isinstance(data, AutoCompactTaskData):
            raise TypeError(f"{HUB_ID}: a task of AutoCompactTaskset, got {type(data).__name__}")
        policy = OpenAIChatPolicy(
            endpoint,
            ctx.model,
            api_key=secret,
            api_key_env=None,
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            timeout_s=self.config.request_timeout_s,
            max_retries=0,  # verifiers records a failed call on the trace; no silent retry
        )
        trajectory = await asyncio.to_thread(play_episode, data, policy)
        trace.info["autocompact"] = episode_record(trajectory)
        return ProgramResult(exit_code=0, stdout="", stderr="")


def play_episode(data: AutoCompactTaskData, policy: OpenAIChatPolicy) -> Trajectory:
    env = gym.make("AutoCompact-SWE-v0", **data.env)
    try:
        return rollout(env, policy, seed=data.seed)
    finally:
        env.close()


def episode_record(trajectory: Trajectory) -> dict[str, Any]:
    """What ``trace.info["autocompact"]`` holds: the outcome, the compactions, the trajectory."""
    end = trajectory.end
    return {
        "instance_id": trajectory.header.instance_id,
        "reward": trajectory.reward,
        "exit_reason": end.exit_reason if end is not None else None,
        "compactions": [event.model_dump(mode="json") for event in trajectory.compactions()],
        "trajectory": trajectory.to_jsonl(),
    }


def load_environment(
    env: dict[str, Any] | None = None,
    seeds: list[int] | None = None,
    temperature: float = 1.0,
    max_tokens: int = 512,
) -> SingleAgentEnv:
    """The verifiers environment: ``AutoCompactTaskset`` played by ``AutoCompactHarness``.

    ``env``: ``gym.make`` keywords of ``AutoCompact-SWE-v0`` (for example ``{"split":
    "easy", "forced_compaction_threshold": 1200}``); ``seeds``: one task per seed (default
    0-7). The model, its endpoint and its sampling come from the run (prime-rl's
    orchestrator, or ``Env.run_episode``'s ``ModelContext``)."""
    taskset = AutoCompactTasksetConfig(
        id=HUB_ID, env=env or {}, **({"seeds": seeds} if seeds is not None else {})
    )
    harness = AutoCompactHarnessConfig(temperature=temperature, max_tokens=max_tokens)
    # The harness starts no program: the env's own sandbox runs the commands, so verifiers'
    # runtime is the local process (no remote box to provision).
    agent = AgentConfig(harness=harness, runtime=SubprocessConfig())
    return SingleAgentEnv(SingleAgentEnvConfig(taskset=taskset, agent=agent))


__all__ = [
    "HUB_ID",
    "AutoCompactHarness",
    "AutoCompactHarnessConfig",
    "AutoCompactTask",
    "AutoCompactTaskData",
    "AutoCompactTaskset",
    "AutoCompactTasksetConfig",
    "episode_record",
    "load_environment",
    "play_episode",
]
