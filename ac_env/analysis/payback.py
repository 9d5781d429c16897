"""When a compaction pays for itself: its extra cost against what each later step saves.

A compaction costs the calls that wrote its summary (their whole price: the prompt read to
write it and the summary's output tokens) plus a cache miss: the next call reads the rewritten
prompt (``tokens_after``) at the uncached price instead of the cache-hit price. It saves, on
every later step, reading the ``tokens_before - tokens_after`` tokens it removed at the
cache-hit price (what full history would have paid for them, growth aside). So it breaks even
after ``extra / saving`` later steps, and it *paid off* in an episode that went on at least
that long. Prices are the tiers of the run's pricing preset (the removed tokens at the tier of
``tokens_before``, the cache miss at the tier of ``tokens_after``).

This counts cost only: a compaction that lets an episode go on past the context window, or that
changes what the agent does, is worth more (or less) than its payback says.
"""

from __future__ import annotations

from pydantic import BaseModel

from ac_env.cost import Pricing
from ac_env.trajectory import ModelCall, Trajectory


class Payback(BaseModel):
    """One applied compaction's cost account (USD)."""

    step: int
    trigger: str
    writing_usd: float  # the calls that wrote (or were asked for) the summary
    cache_miss_usd: float  # the next call reading the rewritten prompt uncached
    saving_per_step_usd: float  # the removed tokens at the cache-hit price
    later_steps: int  # model calls after the compaction

    @property
    def extra_usd(self) -> float:
        return self.writing_usd + self.cache_miss_usd

    @property
    def break_even_steps(self) -> float:
        if self.saving_per_step_usd <= 0:
            return float("inf")
        return self.extra_usd / self.saving_per_step_usd

    @property
    def paid_off(self) -> bool:
        return self.later_steps >= self.break_even_steps


def priced(call: ModelCall, pricing: Pricing) -> tuple[float, float, float]:
    """A call's uncached input, cached input and output in USD, at the tier of its prompt."""
    tier = pricing.tier_for(call.cost.input_uncached + call.cost.input_cached)
    scale = pricing.usd_per_unit / 1e6
    return (
        call.cost.input_uncached * tier.input_per_mtok * scale,
        call.cost.input_cached * tier.cached_price * scale,
        call.cost.output * tier.output_per_mtok * scale,
    )


def paybacks(trajectory: Trajectory, pricing: Pricing, summary_steps: set[int]) -> list[Payback]:
    """A ``Payback`` per applied compaction of ``trajectory``; ``summary_steps`` are the steps
    of the calls that wrote or were asked for a summary (``metrics.is_summary_call``), each
    charged to the first compaction at or after it."""
    calls = trajectory.model_calls()
    scale = pricing.usd_per_unit / 1e6
    result = []
    charged_until = -1
    for event in trajectory.compactions():
        writing = sum(
            sum(priced(call, pricing))
            for call in calls
            if charged_until < call.step <= event.step and call.step in summary_steps
        )
        charged_until = event.step
        miss_tier = pricing.tier_for(event.tokens_after)
        removed_tier = pricing.tier_for(event.tokens_before)
        removed = max(event.tokens_before - event.tokens_after, 0)
        result.append(
            Payback(
                step=event.step,
                trigger=event.trigger,
                writing_usd=writing,
                cache_miss_usd=event.tokens_after
                * (miss_tier.input_per_mtok - miss_tier.cached_price)
                * scale,
                saving_per_step_usd=removed * removed_tier.cached_price * scale,
                later_steps=sum(1 for call in calls if call.step > event.step),
            )
        )
    return result
