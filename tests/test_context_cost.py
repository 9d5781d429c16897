import pytest

from ac_env.compaction import rewrite_prefix
from ac_env.context import Context
from ac_env.cost import CostMeter, PriceTier, Pricing, make_pricing
from ac_env.tokens import ApproxTokenCounter


class CountingCounter(ApproxTokenCounter):
    """Counts how much text it was asked to tokenize."""

    def __init__(self):
        self.chars_seen = 0

    def count(self, text):
        self.chars_seen += len(text)
        return super().count(text)


def interaction(ctx, i):
    ctx.append("assistant", f"```bash\ncat file{i}.py\n```", "action")
    ctx.append("user", f"[exit code 0]\ncontent of file {i} " * 20, "observation")


def test_tokens_are_counted_once_per_message():
    counter = CountingCounter()
    ctx = Context(counter, "system prompt", "the task")
    for i in range(50):
        interaction(ctx, i)
    seen = counter.chars_seen
    ctx.observation()
    ctx.prompt_fingerprint()
    assert counter.chars_seen == seen  # reading the context re-tokenizes nothing
    assert ctx.tokens == sum(m.tokens for m in ctx.messages)


def test_rewrite_replaces_history_after_task():
    ctx = Context(ApproxTokenCounter(), "sys", "task")
    for i in range(5):
        interaction(ctx, i)
    before = ctx.tokens
    done = rewrite_prefix(ctx, "# Auto Context Summary\n## Known\nx", keep_recent=0)
    assert [m.kind for m in ctx.messages] == ["system", "task", "summary"]
    assert ctx.observation()[2] == {
        "role": "user",
        "content": "# Auto Context Summary\n## Known\nx",
    }
    assert done.rewrite_from == 2 and done.segment == 1 and ctx.segment == 1
    assert done.tokens_before == before and done.tokens_after == ctx.tokens < before


def test_rewrite_keeps_recent_interactions_but_not_summary_requests():
    ctx = Context(ApproxTokenCounter(), "sys", "task")
    for i in range(4):
        interaction(ctx, i)
    ctx.append("user", "please summarize", "compaction_request")
    done = rewrite_prefix(ctx, "# Auto Context Summary", keep_recent=2)
    contents = [m["content"] for m in ctx.observation()]
    assert contents[3] == "```bash\ncat file2.py\n```"
    assert contents[5] == "```bash\ncat file3.py\n```"
    assert len(contents) == 7 and "please summarize" not in contents
    assert done.kept_messages == 4


def test_keep_recent_larger_than_history_keeps_all():
    ctx = Context(ApproxTokenCounter(), "sys", "task")
    interaction(ctx, 0)
    rewrite_prefix(ctx, "# Auto Context Summary", keep_recent=5)
    assert len(ctx.messages) == 5


def test_observation_is_a_copy():
    ctx = Context(ApproxTokenCounter(), "sys", "task")
    obs = ctx.observation()
    obs[0]["content"] = "changed"
    assert ctx.observation()[0]["content"] == "sys"


FLAT = Pricing.flat(input_per_mtok=1.0, output_per_mtok=2.0)


def test_cache_hits_are_the_shared_message_prefix():
    ctx = Context(ApproxTokenCounter(), "sys " * 100, "task " * 100)
    meter = CostMeter(FLAT)
    first = meter.charge(ctx.prompt_fingerprint(), 10)
    assert first.input_cached == 0 and first.input_uncached == ctx.tokens
    prefix = ctx.tokens
    interaction(ctx, 0)
    second = meter.charge(ctx.prompt_fingerprint(), 10)
    assert second.input_cached == prefix
    assert second.input_uncached == ctx.tokens - prefix
    # cached input costs 20% of the input price, output 2.0/M
    expected = (second.input_uncached * 1.0 + prefix * 0.2 + 10 * 2.0) / 1e6
    assert second.usd == pytest.approx(expected)


def test_rewrite_invalidates_cache_from_rewrite_point():
    ctx = Context(ApproxTokenCounter(), "sys " * 100, "task " * 100)
    fixed = ctx.tokens
    meter = CostMeter(FLAT)
    for i in range(3):
        interaction(ctx, i)
    meter.charge(ctx.prompt_fingerprint(), 5)
    rewrite_prefix(ctx, "# Auto Context Summary\n## Known\nx", keep_recent=1)
    after = meter.charge(ctx.prompt_fingerprint(), 5)
    assert after.input_cached == fixed  # only system + task still hit the cache
    assert after.input_uncached == ctx.tokens - fixed


def test_tiers_pick_by_prompt_length_and_total_accumulates():
    pricing = Pricing(
        name="t",
        tiers=[
            PriceTier(max_input_tokens=100, input_per_mtok=1, output_per_mtok=1),
            PriceTier(max_input_tokens=None, input_per_mtok=10, output_per_mtok=10),
        ],
    )
    meter = CostMeter(pricing)
    small = meter.charge([(1, 100)], 0)
    big = meter.charge([(2, 101)], 0)
    assert small.usd == pytest.approx(100 / 1e6)
    assert big.usd == pytest.approx(1010 / 1e6)
    assert meter.total.usd == pytest.approx(small.usd + big.usd)
    assert meter.total.input_uncached == 201


def test_pricing_validation_and_presets():
    with pytest.raises(ValueError, match="ascend"):
        Pricing(
            name="bad",
            tiers=[
                PriceTier(max_input_tokens=200, input_per_mtok=1, output_per_mtok=1),
                PriceTier(max_input_tokens=100, input_per_mtok=1, output_per_mtok=1),
            ],
        )
    with pytest.raises(ValueError, match="valid: \\['qwen3-coder-flash'"):
        make_pricing("gpt-9")
    flash = make_pricing("qwen3-coder-flash")
    assert flash.source and flash.date
    assert flash.tier_for(40_000).input_per_mtok > flash.tier_for(1_000).input_per_mtok
    with pytest.raises(ValueError, match="exceeds the last tier"):
        flash.tier_for(2_000_000)


def test_currency_conversion():
    cny = Pricing.flat(7.0, 7.0, currency="CNY", usd_per_unit=1 / 7)
    cost = CostMeter(cny).charge([(1, 1_000_000)], 0)
    assert cost.usd == pytest.approx(1.0)
