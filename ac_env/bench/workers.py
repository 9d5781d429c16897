"""The model behind a benchmark run: the reference agent, an HF model, or an HTTP server.

``policy_factory(worker, strategy)`` gives a function ``seed -> Policy``. The reference agent
reads no prompt, so the strategy tells it whether to compact on its own (after locating the
bug). An HF model is loaded once (lazily: ``ac_train`` needs torch) and shared between threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ac_env.agents.http import OpenAIChatPolicy
from ac_env.agents.protocol import Policy, PolicyOutput
from ac_env.agents.reference import ReferenceAgent
from ac_env.prompts import COMPACTION_SKIPPED
from ac_env.strategies import Strategy

PolicyFactory = Callable[[int], Policy]


class SkipAwareReference:
    """The reference agent under a strategy whose summaries are not applied: when its last
    summary was skipped (``COMPACTION_SKIPPED`` follows it), it continues as the agent that
    never compacts would, instead of writing the same summary again."""

    def __init__(self) -> None:
        self._compacting = ReferenceAgent("after_locate")
        self._continuing = ReferenceAgent("never")

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        skipped = any(m["content"] == COMPACTION_SKIPPED for m in observation)
        return (self._continuing if skipped else self._compacting).act(observation)


def policy_factory(worker: str, strategy: Strategy) -> PolicyFactory:
    if worker == "reference":
        return _reference_factory(strategy)
    if worker.startswith("hf:"):
        return _hf_factory(worker.removeprefix("hf:"))
    if worker.startswith("openai:"):
        model, _, url = worker.removeprefix("openai:").partition("@")
        if not model or not url:
            raise ValueError(f"worker: {worker!r} is not openai:<model>@<base url>")
        return lambda seed: OpenAIChatPolicy(url, model)
    raise ValueError(f"unknown worker {worker!r}; valid: reference, hf:<path>, openai:<m>@<url>")


def _reference_factory(strategy: Strategy) -> PolicyFactory:
    if not strategy.proactive:
        return lambda seed: ReferenceAgent("never")
    if strategy.env.get("skip_compaction"):
        return lambda seed: SkipAwareReference()
    return lambda seed: ReferenceAgent("after_locate")


_models: dict[str, Any] = {}
_models_lock = threading.Lock()


def _hf_factory(path: str) -> PolicyFactory:
    def make(seed: int) -> Policy:
        from ac_train.models import TransformersPolicy, load_model

        with _models_lock:
            if path not in _models:
                _models[path] = load_model(path)
        model, tokenizer = _models[path]
        return TransformersPolicy(model, tokenizer, temperature=0.7, seed=seed)

    return make
