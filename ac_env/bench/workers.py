"""The model behind a benchmark run: the reference agent, an HTTP server, or a registered model.

``policy_factory(worker, strategy)`` gives a function ``seed -> Policy``. The reference agent
reads no prompt, so the strategy tells it whether to compact on its own (after locating the
bug). ``openai:<model>@<url>`` is built in. Other schemes come from the ``autocompact.workers``
entry-point group: ``ac_train`` registers ``hf`` (``hf:<path>`` or ``hf:smollm2``) there, so
this package never imports ``ac_train`` or torch. A registered entry point is a
``ModelWorker``: ``(spec, temperature, max_new_tokens) -> (seed -> Policy)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points
from typing import Any, Protocol

from ac_env.agents.http import OpenAIChatPolicy
from ac_env.agents.reference import ReferenceAgent
from ac_env.compaction.protocol import CompactionProtocol
from ac_env.compaction.texts import COMPACTION_SKIPPED
from ac_env.policy import Policy, PolicyOutput
from ac_env.strategies import Strategy

PolicyFactory = Callable[[int], Policy]
WORKER_ENTRY_POINTS = "autocompact.workers"
"""The entry-point group of model workers (``pyproject.toml``: ``hf = "ac_train.models:..."``)."""
BUILTIN_WORKERS = ("reference", "openai:<model>@<url>")


class ModelWorker(Protocol):
    """A registered worker scheme: ``spec`` is what follows ``<scheme>:``; None keeps the
    backend's default temperature and output length."""

    def __call__(
        self, spec: str, temperature: float | None, max_new_tokens: int | None
    ) -> PolicyFactory: ...


def registered_workers() -> dict[str, Any]:
    """Scheme -> entry point, for every installed ``autocompact.workers`` entry point."""
    return {ep.name: ep for ep in entry_points(group=WORKER_ENTRY_POINTS)}


def check_worker(worker: str) -> str:
    """``worker`` itself, or ValueError naming the valid workers."""
    scheme, sep, spec = worker.partition(":")
    if worker == "reference" or (sep and spec and scheme == "openai"):
        return worker
    registered = registered_workers()
    if sep and spec and scheme in registered:
        return worker
    valid = ", ".join([*BUILTIN_WORKERS, *(f"{name}:<spec>" for name in sorted(registered))])
    raise ValueError(f"unknown worker {worker!r}; valid: {valid}")


class SkipAwareReference:
    """The reference agent under a strategy whose compactions are skipped: when its last
    compaction was skipped (``COMPACTION_SKIPPED`` follows it), it continues as the agent that
    never compacts would, instead of compacting again."""

    def __init__(self, compaction_protocol: CompactionProtocol = "inline") -> None:
        self._compacting = ReferenceAgent("after_locate", compaction_protocol)
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
    check_worker(worker)
    if worker == "reference":
        return _reference_factory(strategy)
    scheme, _, spec = worker.partition(":")
    if scheme == "openai":
        model, _, url = spec.partition("@")
        if not model or not url:
            raise ValueError(f"worker: {worker!r} is not openai:<model>@<base url>")
        sampling: dict[str, Any] = {}
        if temperature is not None:
            sampling["temperature"] = temperature
        if max_new_tokens is not None:
            sampling["max_tokens"] = max_new_tokens
        return lambda seed: OpenAIChatPolicy(url, model, **sampling)
    make: ModelWorker = registered_workers()[scheme].load()
    return make(spec, temperature, max_new_tokens)


def _reference_factory(strategy: Strategy) -> PolicyFactory:
    if not strategy.proactive:
        return lambda seed: ReferenceAgent("never")
    if strategy.env.get("skip_compaction"):
        return lambda seed: SkipAwareReference()
    return lambda seed: ReferenceAgent("after_locate")
