"""The client a trainer uses to run episodes on an ``ac-env serve`` server: OpenEnv's own
``EnvClient`` (one WebSocket, one session, one episode at a time) with AutoCompact's models.

    from ac_env.integrations.openenv_client import AutoCompactEnvClient

    with AutoCompactEnvClient(base_url="http://localhost:8000").sync() as env:
        result = env.reset(seed=0)
        while not result.done:
            result = env.step(model(result.observation.chat()))
        print(result.reward, result.observation.info["reward_detail"])
"""

from __future__ import annotations

import contextlib
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from websockets.exceptions import ConnectionClosed

from ac_env.integrations.openenv_models import (
    AutoCompactAction,
    AutoCompactObservation,
    AutoCompactState,
)


class ServerError(RuntimeError):
    """The server refused a message. ``code`` is OpenEnv's error code (``VALIDATION_ERROR``,
    ``CAPACITY_REACHED``, ``EXECUTION_ERROR``, ...); ``errors`` the validation errors, each
    naming its field (``loc``)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.code = str(data.get("code", "UNKNOWN"))
        self.errors: list[dict[str, Any]] = list(data.get("errors", []))
        fields = "; ".join(
            f"{'.'.join(str(part) for part in error.get('loc', ())) or 'message'}: "
            f"{error.get('msg', '')}"
            for error in self.errors
        )
        detail = f": {fields}" if fields else ""
        super().__init__(f"Server error: {data.get('message', 'unknown')}{detail} ({self.code})")


class AutoCompactEnvClient(
    EnvClient[AutoCompactAction | str, AutoCompactObservation, AutoCompactState]
):
    """``reset(seed=..., task_id=...)``; ``step(text)`` or ``step(AutoCompactAction(...))``;
    results are OpenEnv ``StepResult``s holding an ``AutoCompactObservation``."""

    def _step_payload(self, action: AutoCompactAction | str) -> dict[str, Any]:
        if isinstance(action, str):
            action = AutoCompactAction(text=action)
        return action.model_dump(exclude_defaults=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[AutoCompactObservation]:
        observation = AutoCompactObservation(
            **payload.get("observation", {}),
            reward=payload.get("reward"),
            done=payload.get("done", False),
        )
        return StepResult(
            observation=observation,
            reward=observation.reward,
            done=observation.done,
            metadata=payload.get("metadata"),
        )

    def _parse_state(self, payload: dict[str, Any]) -> AutoCompactState:
        return AutoCompactState(**payload)

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        # As EnvClient's own, but an error keeps the fields it names: EnvClient's message
        # says only "Invalid message" for a validation error.
        with contextlib.suppress(ConnectionClosed):  # a refused session sends its error
            await self._send(message)  # frame, then closes: the frame is read below
        response: dict[str, Any] = await self._receive()
        if response.get("type") == "error":
            raise ServerError(response.get("data", {}))
        return response
