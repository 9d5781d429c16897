"""What crosses the wire between the OpenEnv server and its clients: pydantic models built on
OpenEnv's own ``Action``, ``Observation`` and ``State``.

The action is the model's text, exactly as ``env.step`` takes it in-process. The observation
is the env's chat context (the same messages ``env.step`` returns) with the step's reward,
``terminated``, ``truncated`` and ``info``, made JSON-safe by ``json_safe``: a ``nan`` (the
reward of an infrastructure error, see ``info["infra_error"]``) becomes ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field, StrictInt


class AutoCompactAction(Action):
    """One model turn: the text the model wrote (a bash block, ``submit``, or a summary)."""

    text: str = Field(description="the model's output for this turn, exactly as written")


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str


class AutoCompactObservation(Observation):
    """The context the next model turn sees, and what the step returned.

    ``reward`` is 0.0 until the episode ends, then the grade (1.0 or 0.0), or ``None`` on an
    infrastructure error; ``done`` is ``terminated or truncated``; ``info`` holds every key
    ``AutoCompactSWEEnv.step`` documents (on reset: its reset info, with ``instance_id``)."""

    messages: list[ChatMessage] = Field(description="the chat context, system prompt first")
    terminated: bool = Field(default=False, description="the policy submitted")
    truncated: bool = Field(default=False, description="a limit or budget ended the episode")
    info: dict[str, Any] = Field(default_factory=dict, description="the step's info, JSON-safe")

    def chat(self) -> tuple[dict[str, str], ...]:
        """The messages as the in-process env returns them (a tuple of role/content dicts)."""
        return tuple(message.model_dump() for message in self.messages)


class AutoCompactState(State):
    """The session's episode: OpenEnv's ``episode_id`` and ``step_count``, and the task."""

    instance_id: str | None = Field(default=None, description="the current task's id")
    done: bool = Field(default=False, description="the current episode has ended")


class ResetOptions(BaseModel):
    """What a client may choose at reset (the rest of the configuration is the server's)."""

    model_config = ConfigDict(extra="forbid")

    seed: StrictInt | None = Field(default=None, ge=0, description="seeds the task draw")
    episode_id: str | None = Field(default=None, max_length=255)
    task_id: str | None = Field(default=None, description="this task instead of a drawn one")


def json_safe(value: Any) -> Any:
    """``value`` with tuples as lists, mapping keys as strings and non-finite floats as
    ``None`` (JSON has no ``nan``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value
