"""Pricing of model calls with a provider-style prompt cache, and budgets.

A call's input splits into *cached* tokens (the longest common prefix with the previous call's
prompt, as provider prompt caches work) and *uncached* tokens. A prefix rewrite changes the
prompt from ``rewrite_from`` on, so the next call pays full input price from there: the cost of
compaction is visible. Prices come in tiers by prompt length (the tier is chosen by the call's
total input tokens), each with input, output and cache-hit prices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, model_validator

CACHE_HIT_FRACTION = 0.2  # implicit cache hits cost 20% of the tier's input price


class PriceTier(BaseModel):
    """Prices per million tokens for prompts of at most ``max_input_tokens`` (None: no cap)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_input_tokens: int | None = Field(default=None, gt=0)
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_input_per_mtok: float | None = Field(
        default=None, ge=0, description="default: CACHE_HIT_FRACTION of the input price"
    )

    @property
    def cached_price(self) -> float:
        if self.cached_input_per_mtok is not None:
            return self.cached_input_per_mtok
        return self.input_per_mtok * CACHE_HIT_FRACTION


class Pricing(BaseModel):
    """A price list. ``usd_per_unit`` converts its currency to USD (budgets are in USD)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    tiers: list[PriceTier] = Field(min_length=1)
    currency: str = "USD"
    usd_per_unit: float = Field(default=1.0, gt=0)
    source: str = ""
    date: str = ""

    @model_validator(mode="after")
    def _tiers_ascend(self) -> Pricing:
        caps = [t.max_input_tokens for t in self.tiers]
        bounded = [c for c in caps if c is not None]
        if bounded != sorted(bounded) or None in caps[:-1]:
            raise ValueError("tiers must ascend by max_input_tokens; only the last may be None")
        return self

    @classmethod
    def flat(cls, input_per_mtok: float, output_per_mtok: float, **kwargs: object) -> Pricing:
        tier = PriceTier(input_per_mtok=input_per_mtok, output_per_mtok=output_per_mtok)
        return cls.model_validate({"name": "flat", "tiers": [tier], **kwargs})

    def tier_for(self, input_tokens: int) -> PriceTier:
        for tier in self.tiers:
            if tier.max_input_tokens is None or input_tokens <= tier.max_input_tokens:
                return tier
        raise ValueError(
            f"pricing {self.name!r}: a prompt of {input_tokens} tokens exceeds the last tier "
            f"({self.tiers[-1].max_input_tokens} tokens)"
        )


_MODEL_STUDIO = "Alibaba Cloud Model Studio (international) pricing page, tiered by input length"

PRICING_PRESETS: dict[str, Pricing] = {
    "qwen3-coder-flash": Pricing(
        name="qwen3-coder-flash",
        source=_MODEL_STUDIO,
        date="2025-09",
        tiers=[
            PriceTier(max_input_tokens=32_768, input_per_mtok=0.30, output_per_mtok=1.50),
            PriceTier(max_input_tokens=131_072, input_per_mtok=0.50, output_per_mtok=2.50),
            PriceTier(max_input_tokens=262_144, input_per_mtok=0.80, output_per_mtok=4.00),
            PriceTier(max_input_tokens=1_048_576, input_per_mtok=1.60, output_per_mtok=9.60),
        ],
    ),
    "qwen3-coder-plus": Pricing(
        name="qwen3-coder-plus",
        source=_MODEL_STUDIO,
        date="2025-09",
        tiers=[
            PriceTier(max_input_tokens=32_768, input_per_mtok=1.00, output_per_mtok=5.00),
            PriceTier(max_input_tokens=131_072, input_per_mtok=1.80, output_per_mtok=9.00),
            PriceTier(max_input_tokens=262_144, input_per_mtok=3.00, output_per_mtok=15.00),
            PriceTier(max_input_tokens=1_048_576, input_per_mtok=6.00, output_per_mtok=60.00),
        ],
    ),
}
DEFAULT_PRICING = "qwen3-coder-flash"


def make_pricing(spec: str | Pricing) -> Pricing:
    if isinstance(spec, Pricing):
        return spec
    if spec not in PRICING_PRESETS:
        raise ValueError(f"pricing: unknown preset {spec!r}; valid: {sorted(PRICING_PRESETS)}")
    return PRICING_PRESETS[spec]


class CallCost(BaseModel):
    """Token counts and price of one model call, or a running total of calls."""

    model_config = ConfigDict(extra="forbid")

    input_uncached: int = 0
    input_cached: int = 0
    output: int = 0
    usd: float = 0.0

    def __add__(self, other: CallCost) -> CallCost:
        return CallCost(
            input_uncached=self.input_uncached + other.input_uncached,
            input_cached=self.input_cached + other.input_cached,
            output=self.output + other.output,
            usd=self.usd + other.usd,
        )


@dataclass
class CostMeter:
    """Prices successive calls of one episode, modelling the prompt cache between them.

    A prompt is a list of ``(message id, tokens)``; the cached prefix is the run of leading
    messages identical to the previous call's (message ids are unique per message object, so
    any rewritten or new message ends the cached prefix).
    """

    pricing: Pricing
    total: CallCost = field(default_factory=CallCost)
    _previous: list[tuple[int, int]] | None = None

    def quote(self, prompt: list[tuple[int, int]], output_tokens: int) -> CallCost:
        """The cost of a call, without recording it."""
        cached = 0
        if self._previous is not None:
            for now, before in zip(prompt, self._previous, strict=False):
                if now[0] != before[0]:
                    break
                cached += now[1]
        input_tokens = sum(tokens for _, tokens in prompt)
        tier = self.pricing.tier_for(input_tokens)
        price = (
            (input_tokens - cached) * tier.input_per_mtok
            + cached * tier.cached_price
            + output_tokens * tier.output_per_mtok
        ) / 1e6
        return CallCost(
            input_uncached=input_tokens - cached,
            input_cached=cached,
            output=output_tokens,
            usd=price * self.pricing.usd_per_unit,
        )

    def charge(self, prompt: list[tuple[int, int]], output_tokens: int) -> CallCost:
        cost = self.quote(prompt, output_tokens)
        self._previous = list(prompt)
        self.total = self.total + cost
        return cost
