"""``AutoCompact-SWE-v0`` as a SkyRL text environment (``skyrl_gym``'s ``BaseTextEnv``).

    from ac_env.integrations.skyrl import ENV_CLASS, register

    register()  # skyrl_gym.make(ENV_CLASS, env_config=..., extras=...) now builds one

Each SkyRL environment object is one episode: ``init`` resets a fresh
``gym.make("AutoCompact-SWE-v0", **env_config)`` (its own sandbox) on the row's ``task_id``
or ``seed`` (``extras``) and returns the env's first context, which replaces the dataset's
placeholder prompt; ``step(text)`` is ``env.step(text)``; ``close`` closes the env and its
sandbox. The reward is the env's: 0.0 until the end, then the grade (``nan`` on an
infrastructure error, ``metadata["info"]["infra_error"]`` says why).

SkyRL's generator keeps the chat itself: it appends the model's turn, then the step's
``observations``. A compaction rewrites the prefix, which appending cannot express, so every
step says how to get from the generator's chat to the env's context exactly:

    chat = chat[: metadata["keep"]] + observations

``metadata["keep"]`` is the length of the chat (with the model's turn appended) that the env's
context still starts with: all of it on an ordinary turn (the stock generator's append is then
right), less on a turn that rewrote (``metadata["prefix_rewritten"]`` is True, and
``metadata["context"]`` holds the whole new context). A generator that only appends is right
until the first compaction and wrong after it; docs/skyrl.md says what to change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import skyrl_gym
from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict, Field, StrictInt
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput, ConversationType

from ac_env.config import parse_config
from ac_env.context import kept_messages

ENV_ID = "AutoCompact-SWE-v0"
ENV_CLASS = "autocompact"
"""The ``env_class`` a SkyRL dataset row names."""


class EpisodeExtras(BaseModel):
    """The row's fields this environment reads (SkyRL passes every other column too: those
    are ignored)."""

    model_config = ConfigDict(extra="ignore")

    task_id: str | None = Field(default=None, description="this task instead of a drawn one")
    seed: StrictInt | None = Field(default=None, ge=0, description="seeds the task draw")


class AutoCompactTextEnv(BaseTextEnv):
    """One AutoCompact episode behind SkyRL's ``init``/``step``/``close``.

    Args:
        env_config: ``gym.make`` keywords (``ac_env.config.EnvConfig``'s fields), a mapping
            or the ``DictConfig`` SkyRL passes from ``environment.skyrl_gym.autocompact``.
        extras: the dataset row's fields; ``task_id`` and ``seed`` are read (``EpisodeExtras``).
    """

    def __init__(
        self,
        env_config: Mapping[str, Any] | DictConfig | None = None,
        extras: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if isinstance(env_config, DictConfig):
            env_config = OmegaConf.to_container(env_config, resolve=True)  # type: ignore[assignment]
        self._config: dict[str, Any] = {
            str(key): value for key, value in (env_config or {}).items()
        }
        self.max_turns = parse_config(self._config).max_steps  # a bad setting fails here
        self._extras = EpisodeExtras.model_validate(dict(extras or {}))
        self._env: gym.Env[Any, Any] | None = None
        self._chat: list[dict[str, str]] = []
        self._last_info: dict[str, Any] = {}
        self._reward = 0.0

    def init(self, prompt: ConversationType) -> tuple[ConversationType, dict[str, Any]]:
        """Reset the episode's env; ``prompt`` (the dataset's placeholder) is not used: the
        first context is the env's (system prompt, task statement)."""
        if self._env is not None:
            raise RuntimeError("init was already called: SkyRL makes one env per episode")
        self._env = gym.make(ENV_ID, **self._config)
        task = {"task_id": self._extras.task_id} if self._extras.task_id is not None else None
        observation, info = self._env.reset(seed=self._extras.seed, options=task)
        self._chat = [dict(message) for message in observation]
        self._last_info = info
        return [dict(message) for message in self._chat], {"info": info}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        if self._env is None:
            raise RuntimeError("call init before step")
        observation, reward, terminated, truncated, info = self._env.step(action)
        self.turns += 1
        context = [dict(message) for message in observation]
        held = [*self._chat, {"role": "assistant", "content": action}]
        keep = kept_messages(held, context)
        self._chat = context
        self._last_info = info
        self._reward = float(reward)
        metadata = {
            "keep": keep,
            "prefix_rewritten": keep < len(held),
            "context": context if keep < len(held) else None,
            "terminated": terminated,
            "truncated": truncated,
            "info": info,
        }
        return BaseTextEnvStepOutput(
            observations=[dict(message) for message in context[keep:]],
            reward=float(reward),
            done=terminated or truncated,
            metadata=metadata,
            postprocessed_action=None,
        )

    def get_metrics(self) -> dict[str, Any]:
        """The episode's figures, for SkyRL's logs: the grade, turns, rewrites, cost."""
        cost = self._last_info.get("cost", {}).get("total", {})
        return {
            "reward": self._reward,
            "steps": self._last_info.get("step", 0),
            "rewrites": self._last_info.get("segment", 0),
            "context_tokens": self._last_info.get("context_tokens", 0),
            "cost_usd": cost.get("usd", 0.0),
        }

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


def register(env_class: str = ENV_CLASS) -> None:
    """Register the environment with ``skyrl_gym`` under ``env_class`` (once per process;
    SkyRL refuses a second registration of a name, so a repeated call does nothing)."""
    if env_class not in skyrl_gym.registry:
        skyrl_gym.register(id=env_class, entry_point=f"{__name__}:AutoCompactTextEnv")


def dataset_rows(task_ids: Sequence[str], env_class: str = ENV_CLASS) -> list[dict[str, Any]]:
    """SkyRL dataset rows, one per task: ``prompt`` is a placeholder (``init`` returns the
    env's own first context), ``env_class`` and ``task_id`` choose the episode."""
    return [
        {
            "prompt": [{"role": "user", "content": f"AutoCompact task {task_id}"}],
            "env_class": env_class,
            "task_id": task_id,
        }
        for task_id in task_ids
    ]
