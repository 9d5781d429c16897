"""Every training preset trains: each GRPO preset runs the trainer's own rollouts (real
episodes of the env under the preset's strategy, a tiny random model) through an optimizer
step, and each SFT preset trains a step on segments of real episodes. A preset that cannot
train fails here, not in a user's run."""

from __future__ import annotations

import itertools
from typing import Any

import gymnasium as gym
import pytest
import torch

from ac_env.actions import SUMMARY_HEADER
from ac_env.policy import PolicyOutput
from ac_env.trajectory import Trajectory
from ac_train.grpo.config import GRPO_PRESETS, GRPOConfig
from ac_train.grpo.loss import policy_sequences
from ac_train.grpo.trainer import GRPOTrainer
from ac_train.models.checkpoints import tiny_model_and_tokenizer
from ac_train.segments import ChatRenderer, segment_trajectory
from ac_train.sft import SFT_PRESETS, SFTRunConfig, run_sft

SUMMARY = f"{SUMMARY_HEADER}\n## Known\nadd() subtracts\n## Workspace\nclean\n## Next\nfix add"


@pytest.fixture
def alternating_rewards(monkeypatch):
    """A random tiny model never fixes the bug: one success and one failure per group, so the
    trainer's own rollouts (real segments, real behaviour log-probs) carry a gradient."""
    rewards = itertools.cycle([1.0, 0.0])
    monkeypatch.setattr(Trajectory, "reward", property(lambda trajectory: next(rewards)))


def grpo_config(preset: str, tmp_path, tiny_task_file) -> GRPOConfig:
    return GRPOConfig.from_preset(
        preset,
        output_dir=tmp_path / preset,
        env={"task_source": str(tiny_task_file), "split": None},
        steps=1,
        tasks_per_step=1,
        rollouts_per_task=2,
        rollout_max_steps=3,
        max_new_tokens=8,
        learning_rate=1e-3,
        progress=False,
    )


@pytest.mark.parametrize("preset", list(GRPO_PRESETS))
def test_every_grpo_preset_takes_an_optimizer_step(
    preset, tmp_path, tiny_task_file, alternating_rewards
):
    torch.manual_seed(0)
    model, tokenizer = tiny_model_and_tokenizer()
    before = [p.detach().clone() for p in model.parameters()]
    GRPOTrainer(grpo_config(preset, tmp_path, tiny_task_file), model, tokenizer).train()
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))


def sampled(tokenizer: Any, text: str, logprob: float) -> PolicyOutput:
    """``text`` as a policy that recorded its tokens returns it."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return PolicyOutput(text=text, output_token_ids=ids, output_logprobs=[logprob] * len(ids))


@pytest.mark.parametrize("preset", list(GRPO_PRESETS))
def test_a_summary_written_under_any_preset_is_trained_as_sampled(preset, tmp_path, tiny_task_file):
    """A summary nobody asked for (``compaction_rl`` offers none, so summary-ignored cuts it at
    the heading): the policy's whole reply is trained with its own log-probs in the context it
    was sampled in, and the next sequence starts from the cut the env kept."""
    _, tokenizer = tiny_model_and_tokenizer()
    config = grpo_config(preset, tmp_path, tiny_task_file)
    env = gym.make("AutoCompact-SWE-v0", **config.env_options(tokenizer))
    env.reset(seed=0, options={"task_id": "tiny-calc-1"})
    replies = [("```bash\ncat calc/ops.py\n```", -0.5), (SUMMARY, -0.25)]
    replies.append(("```bash\necho next\n```", -0.75))
    for text, logprob in replies:
        env.step(sampled(tokenizer, text, logprob))
    trajectory = env.unwrapped.trajectory
    env.close()
    segments = segment_trajectory(trajectory, tokenizer, prefix_mismatch="split")
    (sequence,) = [
        s
        for s in policy_sequences(segments, {segments[0].trajectory_id: 1.0})
        if -0.25 in s.behaviour_logprobs
    ]
    summary_ids = tokenizer(SUMMARY, add_special_tokens=False)["input_ids"]
    trained = [t for t, on in zip(sequence.input_ids, sequence.trained, strict=True) if on]
    logprobs = [
        lp for lp, on in zip(sequence.behaviour_logprobs, sequence.trained, strict=True) if on
    ]
    assert trained[-len(summary_ids) :] == summary_ids
    assert logprobs[-len(summary_ids) :] == [-0.25] * len(summary_ids)
    (call,) = [c for c in trajectory.model_calls() if c.output == SUMMARY]
    start = len(sequence.input_ids) - len(summary_ids)
    assert sequence.input_ids[:start] == ChatRenderer(tokenizer).prompt_ids(call.messages)


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    model, tokenizer = tiny_model_and_tokenizer()
    directory = tmp_path_factory.mktemp("tiny-model")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.mark.parametrize("preset", list(SFT_PRESETS))
def test_every_sft_preset_trains_on_real_episodes(preset, tmp_path, tiny_task_file, tiny_model_dir):
    _, tokenizer = tiny_model_and_tokenizer()
    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=str(tiny_task_file),
        split=None,
        forced_compaction_threshold=400,
        token_counter="approx",
    )
    env.reset(seed=0, options={"task_id": "tiny-calc-1"})
    for text in ["```bash\ncat calc/ops.py\n```", SUMMARY, "```bash\nsubmit\n```"]:
        env.step(sampled(tokenizer, text, -1.0))
    segments = segment_trajectory(env.unwrapped.trajectory, tokenizer, prefix_mismatch="split")
    env.close()
    config = SFTRunConfig.from_preset(
        preset,
        model=str(tiny_model_dir),
        output_dir=tmp_path / preset,
        batch_size=1,
        micro_batch_size=1,
        max_steps=1,
        activation_checkpointing=False,
        progress=False,
    )
    metrics = run_sft(config, segments)
    assert metrics.steps == 1 and metrics.trained_tokens > 0
