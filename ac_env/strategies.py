"""Compaction strategies: the baselines a benchmark compares, one name each in ``STRATEGIES``.

A strategy is data: the environment keywords that realize it, and whether it relies on the
policy's own ``compact`` actions (``proactive``: a model reads that from the prompt; a
model-free worker such as the reference agent is told by the benchmark). Every strategy can
be combined with a length fallback (forced compaction at a token threshold): ``env_kwargs``.

========================  ===================================================================
``none``                  full history: no compaction offered, no forced compaction
``fixed``                 forced compaction at a token threshold (16K); none offered
``self``                  compaction offered, with a rubric of when to compact (SelfCompact)
``learned``               compaction offered, no rubric: the model's own judgement
``masking``               command outputs older than the last 5 become placeholders (SWE-agent)
``summary_ignored``       compaction offered, but the call is skipped: no summary is generated
========================  ===================================================================

``summary_ignored`` is the method's ablation: the same policy, whose compaction calls are
skipped (``skip_compaction``, see ``ac_env.compaction.protocol``): no summary is generated,
billed or kept, and the run goes on with its full history. The model's turn (the bare
``compact`` call, or its reply cut at the summary heading) stays in the history, followed by
``COMPACTION_SKIPPED``, so a deterministic policy can tell and go on. ``none``, ``fixed`` and
``masking`` do not offer compaction; a summary the model writes anyway is skipped the same
way, so their history is only ever changed by their own mechanism.

The rows of the method's main table are names too (``BASELINES``; ``get_strategy`` takes
them): each is evaluated under one strategy, with the model its row trains (``ac-train``
presets: README). ``base`` -> ``none``; ``fixed_16k`` -> ``fixed``; ``selfcompact`` -> ``self``;
``compactionrl`` -> ``fixed`` (its RL model: length-triggered compaction only);
``swe_compressor``, ``autocompact_sft``, ``autocompact`` -> ``learned`` (their trained models).
Those four (``TRAINED_BASELINES``) name trained systems, so a benchmark runs them only with a
model the user gives (``check_trained_baselines``): with the reference agent (a rule or the
shipped timing policy) or the untrained ``hf:smollm2`` they refuse to start, so no report
shows a rule under a trained system's name. The rule-based stand-ins keep their strategy
names: ``fixed``, ``learned``.

Every strategy runs under either compaction protocol (``env_kwargs(protocol=...)``): the
system prompt describes the compaction action in that protocol's form.
``masking`` rewrites earlier messages: the prompt cache breaks at the first masked output and
each masking is recorded as a ``CompactionEvent`` (trigger ``masking``) that opens a segment.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ac_env.compaction.protocol import CompactionProtocol
from ac_env.compaction.when import timing_rule
from ac_env.prompts import system_prompt

DEFAULT_THRESHOLD = 16_384
MASKING_KEEP = 5
RULE_PREFIX = "rule:"
"""``rule:<spec>`` names the strategy that benchmarks a timing rule (``rule:every:5``)."""


@dataclass(frozen=True)
class Strategy:
    """``prompt``: how its system prompt presents compaction; ``reference_rule``: the timing
    rule (``ac_env.compaction.when``) a worker that reads no prompt, the reference agent,
    follows in its place; ``env``: the other keywords of ``gym.make`` that realize the
    strategy (no length fallback); ``threshold``: its own forced-compaction threshold
    (``fixed`` only)."""

    name: str
    description: str
    proactive: bool
    prompt: Literal["offered", "rubric", "not_offered"]
    reference_rule: str
    env: dict[str, Any] = field(default_factory=dict)
    threshold: int | None = None

    @property
    def benchmarks_a_rule(self) -> bool:
        """A ``rule:<spec>`` strategy: its rule, not a timing policy, decides for the reference
        agent."""
        return self.name.startswith(RULE_PREFIX)

    def env_kwargs(
        self,
        fallback_threshold: int | None = None,
        fixed_threshold: int | None = None,
        protocol: CompactionProtocol = "inline",
    ) -> dict[str, Any]:
        """The env keywords. ``fallback_threshold`` adds forced compaction at that many tokens
        to any strategy; ``fixed_threshold`` moves ``fixed``'s own threshold (others ignore
        it). A fallback below ``fixed``'s threshold wins. ``protocol``: the compaction
        protocol (``compaction_protocol``), with the system prompt in its form."""
        for name, value in (
            ("fallback_threshold", fallback_threshold),
            ("fixed_threshold", fixed_threshold),
        ):
            if value is not None and value <= 0:
                raise ValueError(f"{name}: must be positive, got {value}")
        own = fixed_threshold if fixed_threshold is not None and self.threshold else self.threshold
        candidates = [t for t in (own, fallback_threshold) if t is not None]
        return {
            **self.env,
            "system_prompt": system_prompt(self.prompt, protocol),
            "compaction_protocol": protocol,
            "forced_compaction_threshold": min(candidates, default=None),
        }


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy(
            "none",
            "full history: no compaction offered, none forced",
            proactive=False,
            prompt="not_offered",
            reference_rule="never",
            env={"skip_compaction": True},
        ),
        Strategy(
            "fixed",
            f"forced compaction at {DEFAULT_THRESHOLD} tokens; none offered",
            proactive=False,
            prompt="not_offered",
            reference_rule="never",
            env={"skip_compaction": True},
            threshold=DEFAULT_THRESHOLD,
        ),
        Strategy(
            "self",
            "compaction offered with a rubric of when to compact and when not",
            proactive=True,
            prompt="rubric",
            reference_rule="rubric",
        ),
        Strategy(
            "learned",
            "compaction offered without a rubric: the model's own judgement",
            proactive=True,
            prompt="offered",
            reference_rule="after_locate",
        ),
        Strategy(
            "masking",
            f"command outputs older than the last {MASKING_KEEP} replaced by a placeholder",
            proactive=False,
            prompt="not_offered",
            reference_rule="never",
            env={
                "skip_compaction": True,
                "mask_observations_keep": MASKING_KEEP,
            },
        ),
        Strategy(
            "summary_ignored",
            "compaction offered, but the call is skipped: no summary generated (ablation)",
            proactive=True,
            prompt="offered",
            reference_rule="after_locate",
            env={"skip_compaction": True},
        ),
    )
}


BASELINES: dict[str, str] = {
    "base": "none",
    "fixed_16k": "fixed",
    "selfcompact": "self",
    "compactionrl": "fixed",
    "swe_compressor": "learned",
    "autocompact_sft": "learned",
    "autocompact": "learned",
}
"""The method's main table: each row's name -> the strategy it is evaluated under."""

TRAINED_BASELINES: tuple[str, ...] = (
    "compactionrl",
    "swe_compressor",
    "autocompact_sft",
    "autocompact",
)
"""The rows whose systems are trained models: evaluated only with a checkpoint the user gives."""

UNTRAINED_WORKERS: tuple[str, ...] = ("reference", "hf:smollm2")
"""Workers that are not anybody's trained checkpoint: the model-free reference agent (a rule,
or the shipped timing policy) and the base SmolLM2."""


def check_trained_baselines(strategies: list[str], worker: str) -> None:
    """ValueError when a strategy of ``strategies`` names a trained system
    (``TRAINED_BASELINES``) and ``worker`` is no trained checkpoint (``UNTRAINED_WORKERS``);
    the message names the ``--worker`` flag."""
    trained = [name for name in strategies if name in TRAINED_BASELINES]
    if trained and worker in UNTRAINED_WORKERS:
        stand_ins = ", ".join(f"{name} -> {BASELINES[name]}" for name in trained)
        raise ValueError(
            f"strategies {trained} name trained systems; worker {worker!r} is not one. Give "
            "the checkpoint its row trained with --worker hf:<checkpoint dir> (or "
            "openai:<model>@<url> serving it), or run the untrained stand-in strategy "
            f"instead ({stand_ins})"
        )


def get_strategy(name: str) -> Strategy:
    """A strategy, a baseline of ``BASELINES`` as its strategy under the baseline's name, or
    ``rule:<spec>``: compaction offered without a rubric, the reference agent following the
    timing rule ``spec`` (any rule of ``ac_env.compaction.when.rules()``), so a new rule is
    benchmarked by its name alone (``ac-bench --strategies none rule:every:8``)."""
    if name.startswith(RULE_PREFIX):
        spec = name.removeprefix(RULE_PREFIX)
        rule = timing_rule(spec)
        return Strategy(
            name,
            f"compaction offered; the reference agent follows {rule.name}: {rule.description}",
            proactive=True,
            prompt="offered",
            reference_rule=spec,
        )
    if name in BASELINES:
        strategy = STRATEGIES[BASELINES[name]]
        return replace(strategy, name=name, description=f"{name}: {strategy.description}")
    if name not in STRATEGIES:
        valid = ", ".join([*STRATEGIES, *BASELINES, f"{RULE_PREFIX}<timing rule>"])
        raise ValueError(f"unknown strategy {name!r}; valid strategies: {valid}")
    return STRATEGIES[name]
