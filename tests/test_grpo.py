"""Segment-aware GRPO: advantages, the token-mean clipped loss, its invariances, the trainer."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest
import torch

from ac_env.trajectory import Trajectory
from ac_train.cli import main
from ac_train.grpo import (
    GRPOConfig,
    GRPOTrainer,
    latest_checkpoint,
    learner_step,
    read_metrics,
)
from ac_train.grpo_loss import (
    ClipRange,
    accumulate_gradients,
    clipped_loss_sum,
    group_advantages,
    policy_sequences,
)
from ac_train.models import TransformersPolicy, tiny_model_and_tokenizer
from ac_train.segments import Segment, TokenKind

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny():
    return tiny_model_and_tokenizer()


def segment(
    trajectory_id: str,
    input_ids: list[int],
    trained: set[int],
    behaviour: dict[int, float],
    index: int = 0,
) -> Segment:
    kinds = [
        TokenKind.POLICY_OUTPUT if i in trained else TokenKind.HISTORY_COPY
        for i in range(len(input_ids))
    ]
    return Segment(
        trajectory_id=trajectory_id,
        instance_id="task",
        segment_index=index,
        input_ids=input_ids,
        token_kinds=kinds,
        behaviour_logprobs=[behaviour.get(i) for i in range(len(input_ids))],
        outputs=[],
        policy_version=0,
    )


def grads(model) -> list[torch.Tensor]:
    return [p.grad.clone() for p in model.parameters()]


def assert_same_grads(first, second):
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)


def logprobs_of(model, ids: list[int]) -> list[float]:
    """Plainly: log p(ids[t] | ids[:t]) for t >= 1, one sequence, no padding."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    table = torch.log_softmax(logits, dim=-1)
    return [0.0] + [float(table[t - 1, ids[t]]) for t in range(1, len(ids))]


# ---- advantages ----------------------------------------------------------------------------


def test_group_advantage_is_centered_and_scaled_by_std():
    advantages = group_advantages([1.0, 0.0, 0.0, 1.0], eps=0.0)
    assert advantages == [1.0, -1.0, -1.0, 1.0]
    unscaled = group_advantages([1.0, 0.0, 0.0, 0.0], scale_by_std=False)
    assert unscaled == [0.75, -0.25, -0.25, -0.25]


def test_all_equal_group_has_zero_advantage_and_no_gradient(tiny):
    model, _ = tiny
    assert group_advantages([1.0, 1.0, 1.0]) == [0.0, 0.0, 0.0]
    assert group_advantages([0.0, None, 0.0]) == [0.0, None, 0.0]
    segments = [segment(f"t{i}", [5, 6, 7, 8], {2, 3}, {2: -1.0, 3: -1.0}) for i in range(3)]
    sequences = policy_sequences(segments, {f"t{i}": 0.0 for i in range(3)})
    assert sequences == []
    model.zero_grad(set_to_none=True)
    stats = accumulate_gradients(model, sequences, micro_batch_size=2, clip=ClipRange())
    assert stats.trained_tokens == 0
    assert all(p.grad is None for p in model.parameters())


def test_infra_error_rollout_leaves_the_baseline_and_gets_no_gradient():
    advantages = group_advantages([1.0, 0.0, None, 0.0], scale_by_std=False)
    assert advantages[2] is None
    assert advantages[0] == pytest.approx(1 - 1 / 3) and advantages[1] == pytest.approx(-1 / 3)
    segments = [segment(f"t{i}", [5, 6, 7, 8], {2, 3}, {2: -1.0, 3: -1.0}) for i in range(4)]
    sequences = policy_sequences(segments, {f"t{i}": a for i, a in enumerate(advantages)})
    assert len(sequences) == 3
    assert [s.advantage for s in sequences] == [advantages[0], advantages[1], advantages[3]]


def test_a_policy_token_without_behaviour_logprob_is_refused():
    broken = segment("t0", [5, 6, 7], {1, 2}, {1: -1.0})
    with pytest.raises(ValueError, match="t0/0.0.*token 2 has no behaviour log-prob"):
        policy_sequences([broken], {"t0": 1.0})


# ---- the loss ------------------------------------------------------------------------------


def test_clipped_loss_matches_the_formula_written_out():
    logprobs = [-1.0, -0.5, -2.0, -0.1, -0.3, -3.0, -1.2, -0.7]
    behaviour = [-1.5, -0.5, -1.0, -0.1, -0.2, -1.0, -1.2, -2.0]
    advantages = [0.8, 0.8, 0.8, 0.8, -1.3, -1.3, -1.3, -1.3]
    low, high = 0.2, 0.28
    objective, outside = 0.0, 0
    for logprob, mu, a in zip(logprobs, behaviour, advantages, strict=True):
        ratio = math.exp(logprob - mu)
        clipped = min(max(ratio, 1 - low), 1 + high)
        objective += min(ratio * a, clipped * a)
        outside += not 1 - low <= ratio <= 1 + high
    expected = -objective / len(logprobs)

    loss_sum, clipped_count = clipped_loss_sum(
        torch.tensor(logprobs),
        torch.tensor(behaviour),
        torch.tensor(advantages),
        ClipRange(low=low, high=high),
    )
    assert float(loss_sum) / len(logprobs) == pytest.approx(expected, rel=1e-6)
    assert clipped_count == outside and outside >= 4  # the batch exercises both clip edges


def test_learner_loss_on_the_model_matches_a_plain_computation(tiny):
    model, _ = tiny
    rng = random.Random(1)
    first = [rng.randrange(4096) for _ in range(12)]
    second = [rng.randrange(4096) for _ in range(7)]
    plain_first, plain_second = logprobs_of(model, first), logprobs_of(model, second)
    noise = {t: rng.uniform(-0.4, 0.4) for t in range(12)}
    segments = [
        segment("a", first, {4, 5, 6, 9, 10}, {t: plain_first[t] + noise[t] for t in range(12)}),
        segment("b", second, {3, 4, 6}, {t: plain_second[t] + noise[t] for t in range(7)}),
    ]
    advantage = {"a": 1.5, "b": -0.5}
    expected, count = 0.0, 0
    for seg, plain in ((segments[0], plain_first), (segments[1], plain_second)):
        for t, kind in enumerate(seg.token_kinds):
            if kind == TokenKind.POLICY_OUTPUT:
                ratio = math.exp(plain[t] - seg.behaviour_logprobs[t])
                a = advantage[seg.trajectory_id]
                expected += min(ratio * a, min(max(ratio, 0.8), 1.2) * a)
                count += 1
    model.zero_grad(set_to_none=True)
    stats = accumulate_gradients(
        model, policy_sequences(segments, advantage), micro_batch_size=2, clip=ClipRange()
    )
    assert stats.trained_tokens == count == 8
    assert stats.loss == pytest.approx(-expected / count, rel=1e-5)


# ---- invariances ---------------------------------------------------------------------------


def test_one_or_three_segments_give_the_same_gradient(tiny):
    """The same trajectory as one sequence, or cut into three whose contexts are prefixes of
    it (each training only its own outputs): same trained tokens, same contexts, same grad."""
    model, _ = tiny
    rng = random.Random(2)
    ids = [rng.randrange(4096) for _ in range(30)]
    outputs = [range(5, 9), range(14, 19), range(24, 30)]
    plain = logprobs_of(model, ids)
    behaviour = {t: plain[t] + rng.uniform(-0.5, 0.5) for t in range(30)}
    other_ids = [rng.randrange(4096) for _ in range(10)]
    other_plain = logprobs_of(model, other_ids)
    other = segment("other", other_ids, {6, 7, 8}, {t: other_plain[t] - 0.1 for t in range(10)})
    advantages = {"traj": 1.0, "other": -1.0}

    whole = segment("traj", ids, {t for span in outputs for t in span}, behaviour)
    cut = [
        segment("traj", ids[: span.stop], set(span), behaviour, index=k)
        for k, span in enumerate(outputs)
    ]

    model.zero_grad(set_to_none=True)
    one = accumulate_gradients(
        model, policy_sequences([whole, other], advantages), micro_batch_size=4, clip=ClipRange()
    )
    one_grads = grads(model)
    model.zero_grad(set_to_none=True)
    three = accumulate_gradients(
        model, policy_sequences([*cut, other], advantages), micro_batch_size=4, clip=ClipRange()
    )
    assert one.trained_tokens == three.trained_tokens == 18
    assert one.loss == pytest.approx(three.loss, rel=1e-5)
    assert_same_grads(one_grads, grads(model))


def test_micro_batching_gives_the_full_batch_gradient(tiny):
    model, _ = tiny
    rng = random.Random(3)
    segments, advantages = [], {}
    for i in range(5):
        length = rng.randrange(8, 25)
        ids = [rng.randrange(4096) for _ in range(length)]
        plain = logprobs_of(model, ids)
        trained = {t for t in range(2, length) if rng.random() < 0.5}
        behaviour = {t: plain[t] + rng.uniform(-0.3, 0.3) for t in range(length)}
        segments.append(segment(f"t{i}", ids, trained, behaviour))
        advantages[f"t{i}"] = rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 2)
    sequences = policy_sequences(segments, advantages)
    results = []
    for micro in (5, 2, 1):
        model.zero_grad(set_to_none=True)
        stats = accumulate_gradients(model, sequences, micro_batch_size=micro, clip=ClipRange())
        results.append((stats.loss, grads(model)))
    for loss, gradient in results[1:]:
        assert loss == pytest.approx(results[0][0], rel=1e-5)
        assert_same_grads(results[0][1], gradient)


# ---- learning ------------------------------------------------------------------------------


def sampled_segment(model, tokenizer, trajectory_id: str, seed: int) -> Segment:
    policy = TransformersPolicy(model, tokenizer, max_new_tokens=12, temperature=1.0, seed=seed)
    out = policy.act([{"role": "user", "content": "fix the bug"}])
    ids = out.prompt_token_ids + out.output_token_ids
    start = len(out.prompt_token_ids)
    behaviour = {start + i: lp for i, lp in enumerate(out.output_logprobs)}
    return segment(trajectory_id, ids, set(behaviour), behaviour)


def sequence_logprob(model, seg: Segment) -> float:
    plain = logprobs_of(model, seg.input_ids)
    return sum(
        lp for lp, k in zip(plain, seg.token_kinds, strict=True) if k == TokenKind.POLICY_OUTPUT
    )


def test_steps_raise_the_logprob_of_positive_and_lower_negative_advantage(tiny):
    base, tokenizer = tiny
    model, _ = tiny_model_and_tokenizer()  # a copy the optimizer may change
    model.load_state_dict(base.state_dict())
    good = sampled_segment(model, tokenizer, "good", seed=1)
    bad = sampled_segment(model, tokenizer, "bad", seed=2)
    before = sequence_logprob(model, good), sequence_logprob(model, bad)
    config = GRPOConfig(output_dir="unused", learning_rate=1e-3, micro_batch_size=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    sequences = policy_sequences([good, bad], {"good": 1.0, "bad": -1.0})
    for _ in range(3):
        stats, grad_norm = learner_step(model, optimizer, sequences, config, pad_token_id=0)
        assert grad_norm is not None and grad_norm > 0
    after = sequence_logprob(model, good), sequence_logprob(model, bad)
    assert after[0] > before[0] + 0.1
    assert after[1] < before[1] - 0.1
    assert stats.clip_fraction > 0  # three steps on the same samples leave the trust region


# ---- the trainer -----------------------------------------------------------------------------


def trainer(tmp_path, tiny_task_file, steps: int) -> GRPOTrainer:
    model, tokenizer = tiny_model_and_tokenizer()
    config = GRPOConfig(
        output_dir=tmp_path / "run",
        env={"task_source": str(tiny_task_file), "split": None, "forced_compaction_threshold": 200},
        steps=steps,
        tasks_per_step=2,
        rollouts_per_task=2,
        rollout_max_steps=2,
        rollout_max_tokens=4096,
        max_new_tokens=8,
        learning_rate=1e-4,
        save_every=1,
        progress=False,
    )
    return GRPOTrainer(config, model, tokenizer)


@pytest.fixture
def alternating_rewards(monkeypatch):
    """A random tiny model never fixes the bug: give each group one success and one failure,
    so the trainer's own rollouts (real segments, real behaviour log-probs) carry a gradient."""
    rewards = itertools.cycle([1.0, 0.0])
    monkeypatch.setattr(Trajectory, "reward", property(lambda trajectory: next(rewards)))


@pytest.mark.slow
def test_training_resumes_at_the_step_after_the_latest_checkpoint(
    tmp_path, tiny_task_file, alternating_rewards
):
    first = trainer(tmp_path, tiny_task_file, steps=2)
    initial = {k: v.clone() for k, v in first.model.state_dict().items()}
    history = first.train()
    assert [m.step for m in history] == [0, 1]
    for metrics in history:
        assert metrics.rollouts == 4 and metrics.informative_groups == 2
        assert metrics.segments_per_trajectory >= 1 and metrics.trained_tokens > 0
        assert metrics.clip_fraction < 0.01  # learner log-probs reproduce the sampler's
    trained = first.model.state_dict()
    assert any(not torch.equal(trained[k], initial[k]) for k in initial)
    # a crash after step 2's metrics line but before its checkpoint: the line is redone
    with (tmp_path / "run" / "metrics.jsonl").open("a") as out:
        out.write(json.dumps({**history[-1].model_dump(), "step": 2}) + "\n")

    second = trainer(tmp_path, tiny_task_file, steps=3)
    assert second.load_checkpoint(latest_checkpoint(tmp_path / "run")) == 2
    for name, value in second.model.state_dict().items():
        torch.testing.assert_close(value, trained[name])
    assert second.optimizer.state_dict()["state"]  # Adam moments came back too
    resumed = second.train()
    assert second.start_step == 2
    assert [m.step for m in resumed] == [2]
    assert resumed[0].policy_version == 2
    assert [m.step for m in read_metrics(tmp_path / "run")] == [0, 1, 2]
    assert (tmp_path / "run" / "checkpoint-3" / "trainer_state.pt").is_file()


@pytest.mark.slow
def test_ac_train_grpo_runs_a_step_from_the_command_line(tmp_path, tiny_task_file, capsys):
    model, tokenizer = tiny_model_and_tokenizer()
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    code = main(
        [
            "grpo",
            "--output-dir", str(tmp_path / "run"),
            "--model", str(tmp_path / "model"),
            "--task-source", str(tiny_task_file),
            "--split", "all",
            "--steps", "1",
            "--tasks-per-step", "1",
            "--rollouts-per-task", "2",
            "--rollout-max-steps", "1",
            "--max-new-tokens", "4",
            "--no-std-scaling",
        ]
    )  # fmt: skip
    assert code == 0
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert last["step"] == 0 and last["rollouts"] == 2
    assert [m.step for m in read_metrics(tmp_path / "run")] == [0]
    assert (tmp_path / "run" / "checkpoint-1" / "config.json").is_file()
