"""What the GRPO ratio is taken against: the sampler's recorded log-probs or the learner's own
(``behaviour``), and the truncated importance weights (``importance_cap``)."""

from __future__ import annotations

import random

import pytest
from test_grpo import assert_same_grads, grads, logprobs_of, segment

from ac_train.grpo.config import GRPOConfig
from ac_train.grpo.loss import ClipRange, accumulate_gradients, policy_sequences
from ac_train.models.checkpoints import tiny_model_and_tokenizer
from ac_train.models.policy import SamplingSettings, TransformersPolicy

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny():
    return tiny_model_and_tokenizer()


def sampled_segments(model, tokenizer, n: int = 3):
    """Segments of outputs the in-process sampler really drew, with its log-probs."""
    policy = TransformersPolicy(model, tokenizer, temperature=1.0, seed=7)
    policy.stop_token_ids = frozenset()
    chat = [{"role": "user", "content": "fix the bug in calc/ops.py"}]
    outputs = policy.generate_many(chat, SamplingSettings(max_new_tokens=12, temperature=1.0), n)
    segments = []
    for index, out in enumerate(outputs):
        prompt, sampled = out.prompt_token_ids, out.output_token_ids
        ids = [*prompt, *sampled]
        trained = set(range(len(prompt), len(ids)))
        behaviour = dict(zip(sorted(trained), out.output_logprobs, strict=True))
        segments.append(segment(f"t{index}", ids, trained, behaviour))
    return segments


def step(model, sequences, **settings):
    model.zero_grad(set_to_none=True)
    stats = accumulate_gradients(model, sequences, micro_batch_size=2, clip=ClipRange(), **settings)
    return stats, grads(model)


def test_learner_and_sampler_behaviour_agree_on_a_step_whose_weights_did_not_change(tiny):
    model, tokenizer = tiny
    segments = sampled_segments(model, tokenizer)
    advantages = {"t0": 1.0, "t1": -0.5, "t2": -0.5}
    sequences = policy_sequences(segments, advantages)
    by_sampler, sampler_grads = step(model, sequences, behaviour="sampler")
    by_learner, learner_grads = step(model, sequences, behaviour="learner")
    # the sampler's float32 numbers are the learner's up to the batched decode: the gap
    gap = max(
        abs(a - b)
        for s in segments
        for a, b, kind in zip(
            logprobs_of(model, s.input_ids), s.behaviour_logprobs, s.grpo_mask(), strict=True
        )
        if kind
    )
    assert gap < 1e-4
    assert by_learner.loss == pytest.approx(by_sampler.loss, abs=10 * gap)
    assert by_learner.clip_fraction == by_sampler.clip_fraction == 0.0
    assert_same_grads(learner_grads, sampler_grads)


def test_the_learner_behaviour_trains_outputs_whose_sampler_recorded_no_log_probs(tiny):
    model, tokenizer = tiny
    segments = sampled_segments(model, tokenizer, 2)
    advantages = {"t0": 1.0, "t1": -1.0}
    with_logprobs = policy_sequences(segments, advantages)
    for s in segments:
        s.behaviour_logprobs[:] = [None] * len(s.behaviour_logprobs)
    with pytest.raises(ValueError, match="no behaviour log-prob"):
        policy_sequences(segments, advantages)
    without = policy_sequences(segments, advantages, require_behaviour=False)
    with pytest.raises(ValueError, match="behaviour 'learner'"):
        step(model, without, behaviour="sampler")
    learner, learner_grads = step(model, without, behaviour="learner")
    reference, reference_grads = step(model, with_logprobs, behaviour="learner")
    assert learner.loss == reference.loss
    assert_same_grads(learner_grads, reference_grads)


def test_truncated_importance_weights_are_one_when_sampler_and_learner_agree(tiny):
    model, _ = tiny
    rng = random.Random(3)
    ids = [rng.randrange(4096) for _ in range(14)]
    trained = set(range(4, 14))
    exact = logprobs_of(model, ids)
    agree = [segment("a", ids, trained, {t: exact[t] for t in trained})]
    plain, plain_grads = step(model, policy_sequences(agree, {"a": 1.0}), behaviour="learner")
    capped, capped_grads = step(
        model, policy_sequences(agree, {"a": 1.0}), behaviour="learner", importance_cap=2.0
    )
    assert capped.loss == pytest.approx(plain.loss, rel=1e-5)
    assert_same_grads(capped_grads, plain_grads)
    # a sampler that gave each token half the learner's probability: weights 2, capped at 1.5
    shifted = {t: exact[t] - 0.6931471805599453 for t in trained}
    off = [segment("a", ids, trained, shifted)]
    weighted, _ = step(
        model, policy_sequences(off, {"a": 1.0}), behaviour="learner", importance_cap=1.5
    )
    assert weighted.loss == pytest.approx(1.5 * plain.loss, rel=1e-4)


def test_importance_weights_need_the_learner_behaviour(tmp_path):
    with pytest.raises(ValueError, match="importance_cap"):
        GRPOConfig(output_dir=tmp_path, behaviour_logprobs="sampler", importance_cap=2.0)

    def resolved(stale: bool, **settings):
        return GRPOConfig(output_dir=tmp_path, **settings).behaviour(samples_may_be_stale=stale)

    assert resolved(False) == "learner" and resolved(True) == "sampler"
    assert resolved(True, importance_cap=2.0) == "learner"
    assert resolved(False, behaviour_logprobs="sampler") == "sampler"
