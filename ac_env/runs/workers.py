"""The model behind a benchmark run: the reference agent, an HTTP server, or a registered model.

``policy_factory(worker, strategy)`` gives a function ``seed -> Policy``. The reference agent
reads no prompt, so it follows the timing rule its strategy names (``Strategy.reference_rule``:
the rubric's rule under ``self``, after locating the bug under the other strategies that offer
compaction; ``ac-bench`` gives ``learned`` a timing policy instead:
``ac_env.bench.episode_policy``).
``openai:<model>@<url>`` is built in. Other schemes come from the ``autocompact.workers``
entry-point group: ``ac_train`` registers ``hf`` (``hf:<path>`` or ``hf:smollm2``) there, so
this package never imports ``ac_train`` or torch. A registered entry point is a
``ModelWorker``: ``(spec, sampling) -> (seed -> Policy)``. Every model worker samples by the
same ``SamplingConfig``, so ``hf:`` and ``openai:`` results compare.

A served worker's outputs that lack token ids or log-probs (``missing_token_records``) are
fine for a benchmark, which warns once per worker; training refuses them
(``require_token_records``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points
from typing import Any, Protocol

from ac_env.agents.http import OpenAIChatPolicy
from ac_env.agents.reference import ReferenceAgent
from ac_env.compaction.protocol import CompactionProtocol
from ac_env.compaction.texts import COMPACTION_SKIPPED
from ac_env.policy import Policy, PolicyOutput, SamplingConfig, missing_token_records
from ac_env.strategies import Strategy

PolicyFactory = Callable[[int], Policy]
WORKER_ENTRY_POINTS = "autocompact.workers"
"""The entry-point group of model workers (``pyproject.toml``: ``hf = "ac_train.models:..."``)."""
BUILTIN_WORKERS = ("reference", "openai:<model>@<url>")
logger = logging.getLogger(__name__)


class ModelWorker(Protocol):
    """A registered worker scheme: ``spec`` is what follows ``<scheme>:``."""

    def __call__(self, spec: str, sampling: SamplingConfig) -> PolicyFactory: ...


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

    def __init__(self, rule: str, compaction_protocol: CompactionProtocol = "inline") -> None:
        self._compacting = ReferenceAgent(rule, compaction_protocol)
        self._continuing = ReferenceAgent("never")

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        skipped = any(m["content"] == COMPACTION_SKIPPED for m in observation)
        return (self._continuing if skipped else self._compacting).act(observation)


def policy_factory(
    worker: str,
    strategy: Strategy,
    sampling: SamplingConfig | None = None,
    tokenizer: Any = None,
) -> PolicyFactory:
    """``sampling`` (default: ``SamplingConfig()``) applies to model workers. ``tokenizer``
    (the served model's own) lets an ``openai:`` worker map token texts to ids on servers
    that send no ids (llama.cpp, SGLang); the server's dialect is detected."""
    check_worker(worker)
    if worker == "reference":
        return _reference_factory(strategy)
    settings = sampling or SamplingConfig()
    scheme, _, spec = worker.partition(":")
    if scheme == "openai":
        model, _, url = spec.partition("@")
        if not model or not url:
            raise ValueError(f"worker: {worker!r} is not openai:<model>@<base url>")
        return lambda seed: _WarnMissingRecords(
            OpenAIChatPolicy.served(url, model, settings, tokenizer=tokenizer), worker
        )
    make: ModelWorker = registered_workers()[scheme].load()
    return make(spec, settings)


_warned: set[str] = set()
_warned_lock = threading.Lock()


class _WarnMissingRecords:
    """The policy, with one warning per worker (per process) when an output lacks what a
    trainer would need."""

    def __init__(self, policy: OpenAIChatPolicy, worker: str) -> None:
        self.policy = policy
        self.worker = worker

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        output = self.policy.act(observation)
        missing = missing_token_records(output)
        if missing:
            with _warned_lock:
                first = self.worker not in _warned
                _warned.add(self.worker)
            if first:
                logger.warning(
                    "%s (%s server) gave no %s: fine for a benchmark; training needs them "
                    "(see ac_env.agents.http for what each server family gives)",
                    self.worker,
                    self.policy.dialect,
                    " and no ".join(missing),
                )
        return output


def require_token_records(policy: Policy, where: str) -> None:
    """Raise ValueError unless one call of ``policy`` gives the sampled token ids and their
    log-probs (what collection and GRPO train on); the message names what is missing."""
    inner = policy.policy if isinstance(policy, _WarnMissingRecords) else policy
    output = inner.act([{"role": "user", "content": "Say OK."}])
    missing = missing_token_records(output)
    if missing:
        dialect = getattr(inner, "dialect", None)
        raise ValueError(
            f"{where}: the policy's server ({dialect or 'unknown'} dialect) gives no "
            f"{' and no '.join(missing)}; training needs both. vLLM and ac_train.models.serve give "
            "them; llama.cpp and SGLang give them with the model's tokenizer and at "
            "temperature 0 or 1"
        )


def _reference_factory(strategy: Strategy) -> PolicyFactory:
    """The reference agent following the strategy's ``reference_rule``; where the strategy
    skips its compactions, it stops compacting once one was skipped."""
    rule = strategy.reference_rule
    if strategy.proactive and strategy.env.get("skip_compaction"):
        return lambda seed: SkipAwareReference(rule)
    return lambda seed: ReferenceAgent(rule)
