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


def policy_factory(
    worker: str,
    strategy: Strategy,
    temperature: float | None = None,
    max_new_tokens: int | None = None,
) -> PolicyFactory:
    """``temperature`` and ``max_new_tokens`` apply to model workers; None keeps each
    backend's default (HF: 0.7 and 256; HTTP: ``OpenAIChatPolicy``'s)."""
    if worker == "reference":
        return _reference_factory(strategy)
    if worker.startswith("hf:"):
        return _hf_factory(
            worker.removeprefix("hf:"),
            0.7 if temperature is None else temperature,
            256 if max_new_tokens is None else max_new_tokens,
        )
    if worker.startswith("openai:"):
        model, _, url = worker.removeprefix("openai:").partition("@")
        if not model or not url:
            raise ValueError(f"worker: {worker!r} is not openai:<model>@<base url>")
        sampling: dict[str, Any] = {}
        if temperature is not None:
            sampling["temperature"] = temperature
        if max_new_tokens is not None:
            sampling["max_tokens"] = max_new_tokens
        return lambda seed: OpenAIChatPolicy(url, model, **sampling)
    raise ValueError(f"unknown worker {worker!r}; valid: reference, hf:<path>, openai:<m>@<url>")


def _reference_factory(strategy: Strategy) -> PolicyFactory:
    if not strategy.proactive:
        return lambda seed: ReferenceAgent("never")
    if strategy.env.get("skip_compaction"):
        return lambda seed: SkipAwareReference()
    return lambda seed: ReferenceAgent("after_locate")


_models: dict[str, Any] = {}
_models_lock = threading.Lock()


def _hf_factory(path: str, temperature: float, max_new_tokens: int) -> PolicyFactory:
    def make(seed: int) -> Policy:
        from ac_train.models import TransformersPolicy, load_model

        with _models_lock:
            if path not in _models:
                _models[path] = load_model(path)
        model, tokenizer = _models[path]
        return TransformersPolicy(
            model, tokenizer, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed
        )

    return make
