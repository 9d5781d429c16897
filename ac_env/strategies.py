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
``summary_ignored``       compaction offered, but summaries are recorded and not applied
========================  ===================================================================

``summary_ignored`` shows a skipped summary in the history as the model's own turn followed by
``prompts.COMPACTION_SKIPPED``: the model sees that it already wrote it (so a deterministic
policy can tell and go on), the cost of writing it is paid, and no prefix is rewritten.
``none``, ``fixed`` and ``masking`` do not offer compaction; a summary the model writes anyway
is skipped the same way, so their history is only ever changed by their own mechanism.
``masking`` rewrites earlier messages: the prompt cache breaks at the first masked output and
each masking is recorded as a ``CompactionEvent`` (trigger ``masking``) that opens a segment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ac_env.prompts import (
    SYSTEM_PROMPT,
    SYSTEM_PROMPT_NO_COMPACTION,
    SYSTEM_PROMPT_WITH_RUBRIC,
)

DEFAULT_THRESHOLD = 16_384
MASKING_KEEP = 5


@dataclass(frozen=True)
class Strategy:
    """``env``: the keywords of ``gym.make`` that realize the strategy (no length fallback);
    ``threshold``: its own forced-compaction threshold (``fixed`` only)."""

    name: str
    description: str
    proactive: bool
    env: dict[str, Any] = field(default_factory=dict)
    threshold: int | None = None

    def env_kwargs(
        self, fallback_threshold: int | None = None, fixed_threshold: int | None = None
    ) -> dict[str, Any]:
        """The env keywords. ``fallback_threshold`` adds forced compaction at that many tokens
        to any strategy; ``fixed_threshold`` moves ``fixed``'s own threshold (others ignore
        it). A fallback below ``fixed``'s threshold wins."""
        for name, value in (
            ("fallback_threshold", fallback_threshold),
            ("fixed_threshold", fixed_threshold),
        ):
            if value is not None and value <= 0:
                raise ValueError(f"{name}: must be positive, got {value}")
        own = fixed_threshold if fixed_threshold is not None and self.threshold else self.threshold
        candidates = [t for t in (own, fallback_threshold) if t is not None]
        return {**self.env, "forced_compaction_threshold": min(candidates, default=None)}


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy(
            "none",
            "full history: no compaction offered, none forced",
            proactive=False,
            env={"system_prompt": SYSTEM_PROMPT_NO_COMPACTION, "skip_compaction": True},
        ),
        Strategy(
            "fixed",
            f"forced compaction at {DEFAULT_THRESHOLD} tokens; none offered",
            proactive=False,
            env={"system_prompt": SYSTEM_PROMPT_NO_COMPACTION, "skip_compaction": True},
            threshold=DEFAULT_THRESHOLD,
        ),
        Strategy(
            "self",
            "compaction offered with a rubric of when to compact and when not",
            proactive=True,
            env={"system_prompt": SYSTEM_PROMPT_WITH_RUBRIC},
        ),
        Strategy(
            "learned",
            "compaction offered without a rubric: the model's own judgement",
            proactive=True,
            env={"system_prompt": SYSTEM_PROMPT},
        ),
        Strategy(
            "masking",
            f"command outputs older than the last {MASKING_KEEP} replaced by a placeholder",
            proactive=False,
            env={
                "system_prompt": SYSTEM_PROMPT_NO_COMPACTION,
                "skip_compaction": True,
                "mask_observations_keep": MASKING_KEEP,
            },
        ),
        Strategy(
            "summary_ignored",
            "compaction offered, but summaries are recorded and not applied (ablation)",
            proactive=True,
            env={"system_prompt": SYSTEM_PROMPT, "skip_compaction": True},
        ),
    )
}


def get_strategy(name: str) -> Strategy:
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; valid strategies: {', '.join(STRATEGIES)}")
    return STRATEGIES[name]
