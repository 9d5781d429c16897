"""Compaction strategies: each one changes what it should in a real env on a tiny task."""

from __future__ import annotations

import gymnasium as gym
import pytest

import ac_env  # noqa: F401  (registers the ids)
from ac_env.actions import SUMMARY_HEADER
from ac_env.bench.config import BenchConfig
from ac_env.compaction import mask_observations
from ac_env.compaction.texts import COMPACTION_REQUEST, COMPACTION_SKIPPED, MASKED_OUTPUT
from ac_env.context import Context
from ac_env.prompts import SYSTEM_PROMPT, SYSTEM_PROMPT_NO_COMPACTION
from ac_env.strategies import (
    BASELINES,
    DEFAULT_THRESHOLD,
    MASKING_KEEP,
    STRATEGIES,
    TRAINED_BASELINES,
    get_strategy,
)
from ac_env.tokens import ApproxTokenCounter

SUMMARY = (
    "# Auto Context Summary\n## Known\nadd() subtracts in calc/ops.py\n"
    "## Workspace\nno changes yet\n## Next\nfix add"
)


def bash(command: str) -> str:
    return f"THOUGHT: x\n```bash\n{command}\n```"


def make(tiny_task_file, strategy: str, fallback: int | None = None, **extra):
    kwargs = get_strategy(strategy).env_kwargs(fallback)
    return gym.make(
        "AutoCompact-SWE-v0", task_source=str(tiny_task_file), split=None, **kwargs, **extra
    )


def test_every_row_of_the_method_table_is_a_named_strategy():
    expected = {  # row -> (prompt offers compaction, forced-compaction threshold)
        "base": (False, None),
        "fixed_16k": (False, 16_384),
        "selfcompact": (True, None),
        "compactionrl": (False, 16_384),
        "swe_compressor": (True, None),
        "autocompact_sft": (True, None),
        "autocompact": (True, None),
    }
    assert set(BASELINES) == set(expected)
    for name, (offered, threshold) in expected.items():
        strategy = get_strategy(name)
        kwargs = strategy.env_kwargs()
        assert strategy.name == name and strategy.proactive is offered
        assert kwargs["forced_compaction_threshold"] == threshold
        assert (kwargs["system_prompt"] != SYSTEM_PROMPT_NO_COMPACTION) is offered
        assert kwargs.get("skip_compaction", False) is not offered  # not offered: not applied
    rubric = STRATEGIES["self"].env_kwargs()  # SelfCompact: the rubric prompt
    assert get_strategy("selfcompact").env_kwargs() == rubric


@pytest.mark.parametrize("worker", ["reference", "hf:smollm2"])
def test_a_trained_system_row_refuses_to_run_without_its_checkpoint(worker):
    """``autocompact`` under the reference agent ran the shipped timing policy and reported it
    as the trained system; now every trained row needs the model the user gives."""
    for name in TRAINED_BASELINES:
        with pytest.raises(ValueError, match="--worker hf:<checkpoint dir>"):
            BenchConfig(strategies=["base", name], worker=worker)
    BenchConfig(strategies=["base", "fixed_16k", "selfcompact", "learned"], worker=worker)
    config = BenchConfig(strategies=list(TRAINED_BASELINES), worker="hf:runs/grpo/checkpoint-50")
    assert config.strategies == list(TRAINED_BASELINES)


def test_unknown_strategy_lists_the_valid_ones():
    with pytest.raises(ValueError, match="valid strategies: none, fixed, self, learned"):
        get_strategy("sometimes")


def test_every_strategy_makes_a_valid_env(tiny_task_file):
    for name in STRATEGIES:
        env = make(tiny_task_file, name)
        obs, _ = env.reset(seed=0)
        assert obs[0]["role"] == "system"
        env.close()


def test_prompts_offer_compaction_only_where_the_strategy_relies_on_it():
    offered = "2. Compact your context"
    for strategy in STRATEGIES.values():
        prompt = strategy.env_kwargs()["system_prompt"]
        assert (offered in prompt) == strategy.proactive, strategy.name
    assert "When NOT to compact" in STRATEGIES["self"].env_kwargs()["system_prompt"]
    assert "When NOT to compact" not in STRATEGIES["learned"].env_kwargs()["system_prompt"]
    assert STRATEGIES["learned"].env_kwargs()["system_prompt"] == SYSTEM_PROMPT


def test_thresholds_and_the_length_fallback():
    assert get_strategy("none").env_kwargs()["forced_compaction_threshold"] is None
    assert get_strategy("fixed").env_kwargs()["forced_compaction_threshold"] == DEFAULT_THRESHOLD
    assert get_strategy("fixed").env_kwargs(4000)["forced_compaction_threshold"] == 4000
    assert get_strategy("learned").env_kwargs()["forced_compaction_threshold"] is None
    assert get_strategy("masking").env_kwargs(900)["forced_compaction_threshold"] == 900
    assert get_strategy("fixed").env_kwargs(None, 4096)["forced_compaction_threshold"] == 4096
    assert get_strategy("fixed").env_kwargs(2000, 4096)["forced_compaction_threshold"] == 2000
    assert get_strategy("none").env_kwargs(None, 4096)["forced_compaction_threshold"] is None
    with pytest.raises(ValueError, match="fallback_threshold"):
        get_strategy("self").env_kwargs(0)


def test_learned_with_a_fallback_is_asked_for_a_summary(tiny_task_file):
    env = make(tiny_task_file, "learned", fallback=1500)
    env.reset(seed=0)
    obs, *_, info = env.step(bash("cat calc/ops.py tests/test_ops.py; seq 1 400"))
    assert info["compaction_requested"] and obs[-1]["content"] == COMPACTION_REQUEST
    env.close()


def test_summary_ignored_keeps_the_history_and_the_cache(tiny_task_file):
    env = make(tiny_task_file, "summary_ignored")
    env.reset(seed=0)
    obs, *_ = env.step(bash("echo one"))
    obs, _, _, _, info = env.step(SUMMARY)
    assert not info["prefix_rewritten"] and info["segment"] == 0
    # the reply is cut at the heading: no summary is kept ...
    assert [m["content"] for m in obs[-2:]] == [SUMMARY_HEADER, COMPACTION_SKIPPED]
    assert not any("add() subtracts" in m["content"] for m in obs)
    # ... nor billed: the output is the heading's tokens only
    counter = ApproxTokenCounter()
    heading = counter.count(SUMMARY_HEADER) + counter.message_overhead("assistant")
    assert info["cost"]["step"]["output"] == heading < counter.count(SUMMARY)
    assert "one" in obs[3]["content"]  # the command's output is still there
    prompt_before = info["context_tokens"]
    _, _, _, _, info = env.step(bash("echo two"))
    # nothing was rewritten: the whole previous prompt is a cache hit
    assert info["cost"]["step"]["input_cached"] > 0
    assert info["cost"]["step"]["input_uncached"] < prompt_before
    trajectory = env.unwrapped.trajectory
    assert trajectory.compactions() == []
    skipped = trajectory.model_calls()[1]
    assert skipped.action == {"kind": "compact", "summary": SUMMARY_HEADER}
    assert skipped.output == SUMMARY  # what the policy sampled; the next prompt holds the cut
    assert trajectory.model_calls()[2].messages[-2]["content"] == SUMMARY_HEADER
    env.close()


def test_none_skips_a_summary_it_did_not_ask_for(tiny_task_file):
    env = make(tiny_task_file, "none")
    obs, _ = env.reset(seed=0)
    assert obs[0]["content"] == SYSTEM_PROMPT_NO_COMPACTION
    obs, _, _, _, info = env.step(SUMMARY)
    assert not info["prefix_rewritten"] and obs[-1]["content"] == COMPACTION_SKIPPED
    env.close()


def test_learned_applies_the_summary(tiny_task_file):
    env = make(tiny_task_file, "learned")
    env.reset(seed=0)
    env.step(bash("echo one"))
    obs, _, _, _, info = env.step(SUMMARY)
    assert info["prefix_rewritten"] and obs[2]["content"] == SUMMARY and len(obs) == 3
    env.close()


def test_masking_replaces_old_outputs_and_breaks_the_cache_there(tiny_task_file):
    env = make(tiny_task_file, "masking")
    env.reset(seed=0)
    infos = []
    for i in range(MASKING_KEEP + 2):
        obs, _, _, _, info = env.step(bash(f"echo output-{i}"))
        infos.append(info)
    outputs = [m["content"] for m in obs if m["role"] == "user"][1:]  # after the task
    assert outputs[:2] == [MASKED_OUTPUT, MASKED_OUTPUT]
    assert [f"output-{i}" in o for i, o in enumerate(outputs)] == [False] * 2 + [True] * 5
    assert not any(i["prefix_rewritten"] for i in infos[:MASKING_KEEP])
    sixth = infos[MASKING_KEEP]
    assert sixth["prefix_rewritten"] and sixth["rewrite_from"] == 3  # the first output
    assert sixth["compaction"]["kind"] == "masking" and sixth["segment"] == 1
    # the next call is a cache hit only up to the message the last masking changed
    last_rewrite = infos[-1]["rewrite_from"]
    assert last_rewrite == 5  # the second output
    _, _, _, _, info = env.step(bash("echo last"))
    prefix = env.unwrapped.trajectory.model_calls()[-1].messages[:last_rewrite]
    counter = ApproxTokenCounter()
    cached = sum(counter.count(m["content"]) + counter.message_overhead(m["role"]) for m in prefix)
    assert info["cost"]["step"]["input_cached"] == cached
    events = env.unwrapped.trajectory.compactions()
    assert [e.trigger for e in events] == ["masking", "masking", "masking"]
    assert [e.segment_after for e in events] == [1, 2, 3]
    env.close()


def test_context_masking_unit():
    context = Context(ApproxTokenCounter(), "system", "task")
    for i in range(4):
        context.append("assistant", f"cmd {i}", "action")
        context.append("user", "long output " * 50, "observation")
    before = context.tokens
    done = mask_observations(context, 2)
    assert done is not None and done.rewrite_from == 3 and done.segment == 1
    assert context.tokens < before and done.tokens_after == context.tokens
    assert [m.content == MASKED_OUTPUT for m in context.messages[3::2]] == [
        True,
        True,
        False,
        False,
    ]
    assert mask_observations(context, 2) is None  # nothing new to mask
    assert context.segment == 1
