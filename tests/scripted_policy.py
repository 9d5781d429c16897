"""A policy that answers with scripted actions and records what it was shown: the model
behind the verl and ART adapters' tests (``PolicyServer``, ``PolicyClient``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ac_env.policy import PolicyOutput


class ScriptedPolicy:
    def __init__(self, actions: Sequence[str]) -> None:
        self.actions = list(actions)
        self.observations: list[list[dict[str, str]]] = []

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        self.observations.append([dict(message) for message in observation])
        return PolicyOutput(text=self.actions.pop(0))
