"""A real third-party server: llama-cpp-python's OpenAI-compatible server with the SmolLM2 GGUF
on loopback (``bash scripts/llamacpp.sh install`` puts it in .venv; CI does).

What a learner needs from it: the sampled token ids and their log-probs recorded, those
log-probs equal to the learner's own recomputation on the same ids (the HF copy is dequantized
from the same Q4_1 file; llama.cpp multiplies the quantized weights with 8-bit activations, so
the two agree to ``LOGPROB_TOLERANCE``, not exactly), and an episode's trajectory cut into
segments without a split.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import gymnasium as gym
import pytest
import torch
from served_llamacpp import learner_logprobs as chat_logprobs
from served_llamacpp import needs_llamacpp

from ac_env.agents.http import OpenAIChatPolicy
from ac_env.agents.rollout import rollout
from ac_env.policy import SamplingConfig, missing_token_records
from ac_train.grpo.loss import collate, policy_sequences, token_logprobs
from ac_train.models.checkpoints import load_model, smollm2_gguf_path
from ac_train.models.gguf_export import export_gguf
from ac_train.models.llamacpp import llamacpp_server, quantize_q8_0
from ac_train.segments import segment_trajectory

pytestmark = [pytest.mark.slow, needs_llamacpp]

LOGPROB_TOLERANCE = 0.8
"""Largest |server - learner| log-prob of one sampled token (nats). Measured on 974 tokens of
16 calls (8 prompts, temperatures 0 and 1): p50 0.024, p95 0.16, p99 0.27, max 0.56. An
off-by-one token or a log-prob at the wrong temperature is off by nats on most tokens."""
MEAN_TOLERANCE = 0.12
"""Mean |server - learner| over the sampled tokens of a call or an episode (measured 0.017 to
0.077 per call, 0.046 overall)."""
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


def policy(url: str, tokenizer, temperature: float = 0.0, model="smollm2") -> OpenAIChatPolicy:
    sampling = SamplingConfig(temperature=temperature, max_new_tokens=48)
    return OpenAIChatPolicy.served(url, model, sampling, tokenizer=tokenizer, api_key_env=None)


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
    ours, best = chat_logprobs(model, tokenizer, CHAT, out.output_token_ids)
    gap = (ours - torch.tensor(out.output_logprobs)).abs()
    assert gap.max() < LOGPROB_TOLERANCE, gap.tolist()
    assert gap.mean() < MEAN_TOLERANCE, gap.tolist()
    # Greedy: each served token is the learner's argmax, or within the tolerance of it (a
    # near-tie that 8-bit activations can flip; one in 64 tokens of one prompt here).
    assert (best - ours).max() < LOGPROB_TOLERANCE


def test_an_episode_segments_where_the_server_saw_other_tokens_and_its_log_probs_are_the_learners(
    server_url, learner
):
    """llama-cpp-python's server takes text prompts only and tokenizes them itself, so where a
    sampled output's text re-tokenizes to other ids the next prompt the server saw really does
    hold other tokens: a new part starts there (``prefix_mismatch="split"``), and every
    sampled token is still trained exactly once, with the server's log-probs. A server that
    returns the prompt ids it used (vLLM, ``ac_train.models.serve``) records them instead."""
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
    segments = segment_trajectory(trajectory, tokenizer, prefix_mismatch="split")
    assert {s.segment_index for s in segments} == {0}  # no compaction: one segment, in parts
    for before, after in itertools.pairwise(segments):  # a part starts only where ids differ
        grown = before.input_ids
        assert after.input_ids[: len(grown)] != grown
    trained = sum(len(c.output_token_ids or []) for c in calls)
    assert sum(s.grpo_mask().count(True) for s in segments) == trained
    ours, recorded = learner_logprobs(model, tokenizer, segments)
    gap = (ours - recorded).abs()
    assert gap.max() < LOGPROB_TOLERANCE and gap.mean() < MEAN_TOLERANCE, gap.max()


@pytest.mark.timeout(900)
def test_a_checkpoint_quantized_to_q8_0_is_served_as_the_learner(tmp_path, learner):
    """What ``examples/collect_sft.py --engine llamacpp`` serves: a checkpoint exported to
    GGUF, then quantized to 8 bits; it must still be the learner's model (its greedy tokens
    the learner's argmax within the tolerance, its log-probs the learner's)."""
    model, tokenizer = learner
    full = export_gguf(model, smollm2_gguf_path(), tmp_path / "learner.f32.gguf")
    small = quantize_q8_0(full, tmp_path / "learner.q8_0.gguf")
    assert small.stat().st_size < 0.35 * full.stat().st_size
    with llamacpp_server([(small, "learner")], threads=2) as url:
        out = policy(url, tokenizer, model="learner").act(CHAT)
    assert out.output_token_ids and out.output_logprobs
    ours, best = chat_logprobs(model, tokenizer, CHAT, out.output_token_ids)
    gap = (ours - torch.tensor(out.output_logprobs)).abs()
    assert gap.mean() < MEAN_TOLERANCE, gap.tolist()
    assert (best - ours).max() < LOGPROB_TOLERANCE
