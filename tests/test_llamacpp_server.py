"""A real third-party server: llama-cpp-python's OpenAI-compatible server with the SmolLM2 GGUF
on loopback (``bash scripts/llamacpp.sh install`` puts it in .venv; CI does).

What a learner needs from it: the sampled token ids and their log-probs recorded, those
log-probs equal to the learner's own recomputation on the same ids (the HF copy is dequantized
from the same Q4_1 file; llama.cpp multiplies the quantized weights with 8-bit activations, so
the two agree to ``LOGPROB_TOLERANCE``, not exactly), and an episode's trajectory cut into
segments without a split.
"""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import pytest
import torch
from served_llamacpp import learner_logprobs as chat_logprobs
from served_llamacpp import needs_llamacpp

from ac_env.agents.http import OpenAIChatPolicy
from ac_env.agents.rollout import rollout
from ac_env.policy import SamplingConfig, missing_token_records
from ac_train.grpo_loss import collate, policy_sequences, token_logprobs
from ac_train.llamacpp import llamacpp_server
from ac_train.models import load_model, smollm2_gguf_path
from ac_train.segments import segment_trajectory

pytestmark = [pytest.mark.slow, needs_llamacpp]

LOGPROB_TOLERANCE = 0.15
"""Largest |server - learner| log-prob of one sampled token (nats); measured up to 0.0x."""
MEAN_TOLERANCE = 0.02
"""Mean |server - learner| over the sampled tokens of a call or an episode."""
CHAT = [
    {"role": "system", "content": "You are a coding agent. Answer with one bash block."},
    {"role": "user", "content": "List the Python files in the current directory."},
]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with llamacpp_server([(smollm2_gguf_path(), "smollm2")]) as url:
        yield url


@pytest.fixture(scope="module")
def learner():
    return load_model("smollm2")


def policy(url: str, tokenizer, temperature: float = 0.0) -> OpenAIChatPolicy:
    sampling = SamplingConfig(temperature=temperature, max_new_tokens=48)
    return OpenAIChatPolicy.served(url, "smollm2", sampling, tokenizer=tokenizer, api_key_env=None)


def learner_logprobs(model, tokenizer, segments) -> tuple[torch.Tensor, torch.Tensor]:
    """The learner's log-probs of every trained token (GRPO's own code) and the recorded
    behaviour log-probs of the same tokens."""
    sequences = policy_sequences(segments, {s.trajectory_id: 1.0 for s in segments})
    batch = collate(sequences, tokenizer.pad_token_id or 0)
    with torch.no_grad():
        ours = token_logprobs(model, batch)
    return ours, batch.behaviour_logprobs[:, 1:][batch.trained[:, 1:]]


def test_ids_and_log_probs_are_recorded_and_match_the_learner(server_url, learner):
    model, tokenizer = learner
    served = policy(server_url, tokenizer)
    out = served.act(CHAT)
    assert served.dialect == "llamacpp"
    assert missing_token_records(out) == []
    assert out.output_token_ids is not None and out.output_logprobs is not None
    assert len(out.output_token_ids) == len(out.output_logprobs) > 0
    assert tokenizer.decode(out.output_token_ids, skip_special_tokens=True) == out.text
    prompt = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    assert served.last_usage is not None
    assert served.last_usage.prompt_tokens == len(prompt_ids)  # the server's template is ours
    ours, greedy = chat_logprobs(model, tokenizer, CHAT, out.output_token_ids)
    gap = (ours - torch.tensor(out.output_logprobs)).abs()
    assert gap.max() < LOGPROB_TOLERANCE, gap.tolist()
    assert gap.mean() < MEAN_TOLERANCE, gap.tolist()
    assert out.output_token_ids == greedy.tolist()  # greedy: the same tokens


def test_an_episode_segments_without_splits_and_its_log_probs_are_the_learners(server_url, learner):
    model, tokenizer = learner
    env = gym.make(
        "AutoCompact-SWE-v0", task_source="builtin", split="easy", sandbox="local", max_steps=6
    )
    try:
        trajectory = rollout(env, policy(server_url, tokenizer, temperature=1.0), seed=0)
    finally:
        env.close()
    calls = trajectory.model_calls()
    assert len(calls) >= 2
    assert all(c.output_token_ids is not None and c.output_logprobs is not None for c in calls)
    segments = segment_trajectory(trajectory, tokenizer, prefix_mismatch="raise")
    assert [s.part for s in segments] == [0] * len(segments)
    trained = sum(len(c.output_token_ids or []) for c in calls)
    assert sum(s.grpo_mask().count(True) for s in segments) == trained
    ours, recorded = learner_logprobs(model, tokenizer, segments)
    gap = (ours - recorded).abs()
    assert gap.max() < LOGPROB_TOLERANCE and gap.mean() < MEAN_TOLERANCE, gap.max()
