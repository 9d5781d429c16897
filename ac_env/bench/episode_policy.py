"""The policy a benchmark episode runs, and the compaction rule each strategy's worker follows.

A model worker (``hf:``, ``openai:``) reads its strategy from the prompt: ``self`` gives it the
rubric, ``learned`` offers compaction without one (its own judgement). The reference agent
reads no prompt, so the benchmark gives it the rule the prompt stands for:

=====================  ==========================================================================
``self``               the rubric as written, as a rule (its ``reference_rule``: ``rubric``)
``learned``            a trained timing policy (``BenchConfig.timing_policy``: the shipped
                       ``long_ppo`` unless another is named) decides before each turn whether
                       the agent that never compacts on its own compacts (``TimedWorker``)
``summary_ignored``    compacts after locating; once skipped, goes on never compacting
not offered            never compacts on its own (``none``, ``fixed``, ``masking``)
=====================  ==========================================================================

A baseline takes its strategy's rule (``autocompact`` -> ``learned``). ``policy_factory``
alone (what ``ac_train.collect`` uses) keeps the reference agent that compacts after locating
for ``learned``: the timing policy needs the episode's env, which ``episode_policies`` binds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ac_env.agents.reference import ReferenceAgent
from ac_env.bench.config import BenchConfig
from ac_env.compaction.when import timing_rule
from ac_env.env import AutoCompactSWEEnv
from ac_env.policy import Policy
from ac_env.runs.workers import policy_factory
from ac_env.strategies import Strategy, get_strategy
from ac_env.timing.policy_file import (
    DEFAULT_TIMING_POLICY,
    TimingPolicy,
    TimingPolicyError,
    load_timing_policy,
)
from ac_env.timing.timed import PolicyTiming, TimedWorker

BindPolicy = Callable[[AutoCompactSWEEnv], Policy]
EpisodePolicy = Callable[[int], BindPolicy]
"""``seed -> (env -> Policy)``: the worker is made for a seed (a bad worker fails there,
before any env exists), then bound to the unwrapped env its episode runs in, which the timing
policy reads."""


class CompactionRule(BaseModel):
    """How one strategy's worker decides to compact, for the report; ``timing_policy``: the
    policy file's name, path, description and provenance when one decides."""

    strategy: str
    rule: str
    timing_policy: dict[str, Any] | None = None


def timing_policy_path(spec: str) -> Path:
    """A shipped policy's name (``long_ppo``: ``ac_env/timing/policies/long_ppo.json``) or
    the path of a policy file (it has a ``/`` or ends in ``.json``)."""
    if "/" in spec or spec.endswith(".json"):
        return Path(spec)
    return DEFAULT_TIMING_POLICY.parent / f"{spec}.json"


def uses_timing_policy(worker: str, strategy: Strategy) -> bool:
    """The timing policy decides: a model-free worker, a strategy offering compaction without
    a rubric whose compactions apply (``learned`` and its baselines; a ``rule:<spec>``
    strategy follows its rule instead)."""
    offered = strategy.prompt == "offered" and not strategy.env.get("skip_compaction")
    return worker == "reference" and offered and not strategy.benchmarks_a_rule


def run_timing_policy(config: BenchConfig) -> TimingPolicy | None:
    """The run's timing policy, loaded; None when no strategy of the run uses one. A policy
    named on the command line that nothing uses is an error, as is a file that does not load
    (``TimingPolicyError`` names it)."""
    used = [s for s in config.strategies if uses_timing_policy(config.worker, get_strategy(s))]
    if not used:
        if "timing_policy" in config.model_fields_set:
            raise ValueError(
                f"timing_policy: {config.timing_policy!r} would go unused: only the "
                "reference worker's 'learned' strategy (and its baselines) uses a timing "
                f"policy; worker {config.worker!r}, strategies {config.strategies}"
            )
        return None
    return load_timing_policy(timing_policy_path(config.timing_policy))


def episode_policies(
    config: BenchConfig, strategy: Strategy, timing: TimingPolicy | None
) -> EpisodePolicy:
    """``seed -> (env -> Policy)`` for ``strategy``'s episodes; ``timing``: the run's
    policy (``run_timing_policy``)."""
    if uses_timing_policy(config.worker, strategy):
        if timing is None:
            raise ValueError(f"strategy {strategy.name}: needs the run's timing policy")
        decider = timing
        return lambda seed: (
            lambda env: TimedWorker(ReferenceAgent("never"), PolicyTiming(decider, env), env)
        )
    make = policy_factory(config.worker, strategy, config.sampling)
    return lambda seed: _unbound(make(seed))


def _unbound(policy: Policy) -> BindPolicy:
    """A policy that does not read the env: the same one in any env."""
    return lambda env: policy


def compaction_rules(config: BenchConfig) -> list[CompactionRule]:
    """One rule per strategy of ``config``, as the report states them."""
    rules = []
    for name in config.strategies:
        strategy = get_strategy(name)
        timing = None
        if uses_timing_policy(config.worker, strategy):
            rule, timing = "a timing policy decides when the reference agent compacts", {}
            path = timing_policy_path(config.timing_policy)
            try:
                timing = {"path": str(path), **load_timing_policy(path).describe()}
            except TimingPolicyError as error:
                timing = {"path": str(path), "error": str(error)}
        elif config.worker != "reference":
            rule = {
                "rubric": "the model, with the rubric in its prompt",
                "offered": "the model's own judgement (compaction offered, no rubric)",
                "not_offered": "no compaction offered to the model",
            }[strategy.prompt]
        else:
            rule = timing_rule(strategy.reference_rule).description
            if strategy.proactive and strategy.env.get("skip_compaction"):
                rule += "; once skipped, never again"
        rules.append(CompactionRule(strategy=name, rule=rule, timing_policy=timing))
    return rules


def rules_section(rules: list[CompactionRule]) -> list[str]:
    """The report's lines: each strategy's rule, and the timing policy where one decides."""
    lines = []
    for rule in rules:
        line = f"- `{rule.strategy}`: {rule.rule}"
        timing = rule.timing_policy
        if timing is not None and "error" in timing:
            line += f": {timing['error']}"
        elif timing is not None:
            line += (
                f": `{timing['name']}` ({timing['path']}): {timing['description']}; "
                f"trained on {timing['trained_on']}"
            )
        lines.append(line)
    return ["## How each strategy's worker compacts", "\n".join(lines)]
