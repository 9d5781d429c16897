"""``AutoCompact-SWE-v0`` behind OpenEnv's HTTP/WebSocket server (``ac-env serve``).

OpenEnv's ``HTTPEnvServer`` gives every WebSocket connection (``/ws``) its own
``AutoCompactEnvironment``, so each client's episode runs in its own sandbox; it refuses a
connection past ``max_episodes`` (error code ``CAPACITY_REACHED``) and closes the session's
environment when the client disconnects or stays silent for ``idle_timeout_s``. Closing the
environment closes its sandbox (workspace directory and quota tmpfs). The server runs in
OpenEnv's production mode: the stateless HTTP ``/reset`` and ``/step`` routes, which would
start a sandbox per request outside the bound, are not served.

The environment configuration is the server's (``EnvConfig``, fixed at start); a client
chooses only ``seed`` and ``task_id`` at reset (``ResetOptions``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import uvicorn
from fastapi import FastAPI
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import ConcurrencyConfig, EnvironmentMetadata
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ac_env.config import parse_config
from ac_env.integrations.openenv_models import (
    AutoCompactAction,
    AutoCompactObservation,
    AutoCompactState,
    ResetOptions,
    json_safe,
)

ENV_ID = "AutoCompact-SWE-v0"


class SessionClosedError(RuntimeError):
    """The session's environment was closed (idle timeout or shutdown): reconnect."""


class AutoCompactEnvironment(
    Environment[AutoCompactAction, AutoCompactObservation, AutoCompactState]
):
    """One session's episodes, on ``gym.make("AutoCompact-SWE-v0", **config)``.

    Construction is cheap (OpenEnv builds one per connection and for metadata requests): the
    gym env, and with it the task list, is made at the first reset. ``close`` closes it and
    its sandbox; a closed session refuses further messages (``SessionClosedError``).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self._config = dict(config or {})
        self._env: gym.Env[Any, Any] | None = None
        self._state = AutoCompactState()
        self._closed = False

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> AutoCompactObservation:
        """Start an episode in a fresh sandbox: ``seed`` draws the task as in-process
        ``env.reset(seed=...)`` does; ``task_id`` picks one. Unknown fields are refused
        (a ``ValidationError`` naming them)."""
        options = ResetOptions.model_validate({"seed": seed, "episode_id": episode_id, **kwargs})
        env = self._gym_env()
        task = {"task_id": options.task_id} if options.task_id is not None else None
        observation, info = env.reset(seed=options.seed, options=task)
        self._state = AutoCompactState(
            episode_id=options.episode_id, step_count=0, instance_id=info["instance_id"]
        )
        return _observation(observation, 0.0, False, False, info)

    def step(
        self, action: AutoCompactAction, timeout_s: float | None = None, **kwargs: Any
    ) -> AutoCompactObservation:
        """One model turn: ``action.text`` goes to ``env.step`` unchanged. The command's own
        limit is the server's ``command_timeout``; ``timeout_s`` is not used."""
        self._raise_if_closed()
        if self._env is None:
            raise RuntimeError("no episode is running: send a reset first")
        observation, reward, terminated, truncated, info = self._env.step(action.text)
        self._state.step_count += 1
        self._state.done = terminated or truncated
        return _observation(observation, float(reward), terminated, truncated, info)

    @property
    def state(self) -> AutoCompactState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=ENV_ID,
            description="A coding agent fixes a bug by shell commands and may compact its own "
            "context; the reward is the grade of its workspace (docs/openenv.md).",
        )

    def close(self) -> None:
        self._closed = True
        if self._env is not None:
            self._env.close()
            self._env = None

    def _gym_env(self) -> gym.Env[Any, Any]:
        self._raise_if_closed()
        if self._env is None:
            self._env = gym.make(ENV_ID, **self._config)
        return self._env

    def _raise_if_closed(self) -> None:
        if self._closed:
            raise SessionClosedError(
                "this session was closed (idle longer than the server's idle timeout, or the "
                "server is shutting down) and its sandbox removed: open a new connection"
            )


def _observation(
    messages: Any, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]
) -> AutoCompactObservation:
    return AutoCompactObservation(
        messages=list(messages),
        reward=json_safe(reward),
        done=terminated or truncated,
        terminated=terminated,
        truncated=truncated,
        info=json_safe(info),
    )


class ServeOptions(BaseModel):
    """``ac-env serve``'s settings; ``env`` holds ``gym.make`` keywords (``EnvConfig``)."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field(default="127.0.0.1", description="address to listen on")
    port: int = Field(default=8000, ge=0, le=65535, description="port to listen on")
    max_episodes: int = Field(
        default=4, ge=1, description="concurrent sessions (each holds one sandbox)"
    )
    idle_timeout_s: float = Field(
        default=600.0,
        gt=0,
        description="a session silent this long is closed and its sandbox removed; it must "
        "exceed the longest step (command_timeout + grading_timeout)",
    )
    compress: bool = Field(
        default=False,
        description="permessage-deflate on the WebSocket: smaller frames for a slow network, "
        "but compressing the whole context each step costs milliseconds (docs/openenv.md)",
    )
    env: dict[str, Any] = Field(default_factory=dict, description="gym.make keywords")

    @model_validator(mode="after")
    def _idle_timeout_outlasts_a_step(self) -> ServeOptions:
        config = parse_config(self.env)  # a bad keyword fails here, naming the field
        longest_step = config.command_timeout + config.grading_timeout
        if self.idle_timeout_s <= longest_step:
            raise ValueError(
                f"idle_timeout_s ({self.idle_timeout_s}) must exceed the longest step, "
                f"command_timeout + grading_timeout ({longest_step}): OpenEnv counts idleness "
                "from the last reply, so a shorter timeout could close a session mid-step"
            )
        return self


def make_app(options: ServeOptions) -> FastAPI:
    """OpenEnv's FastAPI app serving ``AutoCompactEnvironment`` sessions (``/ws``,
    ``/health``, ``/schema``, ``/metadata``)."""
    gym.make(ENV_ID, **options.env).close()  # the task source loads, before any client waits
    return create_fastapi_app(
        functools.partial(AutoCompactEnvironment, options.env),
        AutoCompactAction,
        AutoCompactObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=options.max_episodes, session_timeout=options.idle_timeout_s
        ),
        env_name=ENV_ID,
        state_cls=AutoCompactState,
        mode="production",
    )


def serve(options: ServeOptions) -> None:
    """Run the server until interrupted (Ctrl-C or SIGTERM close every session first)."""
    uvicorn.run(
        make_app(options),
        host=options.host,
        port=options.port,
        log_level="info",
        ws_per_message_deflate=options.compress,
    )
