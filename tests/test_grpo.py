"""Segment-aware GRPO: advantages, the token-mean clipped loss, its invariances, the trainer."""

from __future__ import annotations

import itertools
import json
import math
import random
from typing import Any

import gymnasium as gym
import pytest
import torch

from ac_env.prompts import system_prompt
from ac_env.trajectory import Trajectory
from ac_train.advantages import group_advantages
from ac_train.cli import build_parser, grpo_config, main
from ac_train.grpo.config import GRPOConfig
from ac_train.grpo.loss import (
    ClipRange,
    PolicySequence,
    accumulate_gradients,
    clipped_loss_sum,
    micro_batches,
    policy_sequences,
    shared_prefix,
    step_batch,
)
from ac_train.grpo.metrics import ScoredRollout, read_metrics
from ac_train.grpo.trainer import GRPOTrainer, latest_checkpoint, learner_step
from ac_train.models.checkpoints import tiny_model_and_tokenizer
from ac_train.models.policy import TransformersPolicy
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


def test_token_mean_is_over_every_trained_token_of_the_step_or_the_informative_ones(tiny):
    """A step of three groups of two: one informative, one all-equal (advantage 0), one with an
    infra error (its partner alone: advantage 0). 'step' divides by the trained tokens of all
    five rollouts with an outcome, 'informative' by those of the first group alone."""
    model, _ = tiny
    rng = random.Random(4)
    rewards = {"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0, "e": None, "f": 0.0}
    advantages: dict[str, float | None] = {}
    for group in (["a", "b"], ["c", "d"], ["e", "f"]):
        advantages.update(zip(group, group_advantages([rewards[t] for t in group]), strict=True))
    segments, plain = [], {}
    for trajectory_id in rewards:
        for index in range(2):  # two segments each, of different lengths
            ids = [rng.randrange(4096) for _ in range(rng.randrange(8, 16))]
            trained = {t for t in range(2, len(ids)) if rng.random() < 0.6}
            logprobs = logprobs_of(model, ids)
            behaviour = {t: logprobs[t] + rng.uniform(-0.3, 0.3) for t in trained}
            seg = segment(trajectory_id, ids, trained, behaviour, index=index)
            segments.append(seg)
            plain[seg.id] = logprobs
    objective, with_outcome, informative = 0.0, 0, 0
    for seg in segments:
        advantage = advantages[seg.trajectory_id]
        for t, kind in enumerate(seg.token_kinds):
            if kind != TokenKind.POLICY_OUTPUT or advantage is None:
                continue
            with_outcome += 1
            informative += advantage != 0
            ratio = math.exp(plain[seg.id][t] - seg.behaviour_logprobs[t])
            objective += min(ratio * advantage, min(max(ratio, 0.8), 1.2) * advantage)
    assert 0 < informative < with_outcome

    figures = {}
    for token_mean, expected_n in (("step", with_outcome), ("informative", informative)):
        batch = step_batch(segments, advantages, token_mean)
        model.zero_grad(set_to_none=True)
        stats = accumulate_gradients(
            model, batch.sequences, micro_batch_size=3, clip=ClipRange(), mean_over=batch.mean_over
        )
        assert batch.mean_over == stats.mean_over == expected_n
        assert stats.trained_tokens == informative
        assert stats.loss == pytest.approx(-objective / expected_n, rel=1e-5)
        figures[token_mean] = grads(model)
    scale = informative / with_outcome  # same gradient direction, the step's size differs
    assert_same_grads([g * scale for g in figures["informative"]], figures["step"])
    assert GRPOConfig(output_dir="unused").token_mean == "step"


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


def test_a_group_continuing_one_state_runs_it_once_with_the_same_gradient(tiny):
    """Six rollouts of one start state (a shared context, then outputs of their own and
    different lengths): the shared-prefix forward gives the loss and gradients of one forward
    per rollout."""
    model, _ = tiny
    rng = random.Random(4)
    context = [rng.randrange(4096) for _ in range(40)]
    segments, advantages = [], {}
    for i in range(6):
        ids = context + [rng.randrange(4096) for _ in range(rng.randrange(3, 12))]
        plain = logprobs_of(model, ids)
        outputs = set(range(len(context), len(ids)))
        behaviour = {t: plain[t] + rng.uniform(-0.3, 0.3) for t in outputs}
        segments.append(segment(f"t{i}", ids, outputs, behaviour))
        advantages[f"t{i}"] = [1.0, -1.0][i % 2] * rng.uniform(0.5, 2)
    sequences = policy_sequences(segments, advantages)
    assert shared_prefix(sequences) == len(context) - 1  # the last one predicts an output
    assert shared_prefix(sequences[:1]) == 0
    results = []
    for share in (False, True):
        model.zero_grad(set_to_none=True)
        stats = accumulate_gradients(
            model, sequences, micro_batch_size=6, clip=ClipRange(), share_prefix=share
        )
        results.append((stats.loss, grads(model)))
    assert results[1][0] == pytest.approx(results[0][0], rel=1e-5)
    assert_same_grads(results[0][1], results[1][1])


def test_a_token_budget_cuts_micro_batches_by_their_padded_tokens_after_the_shared_context(
    tiny,
):
    """Rows of one context (40 tokens shared) with outputs of 5, 5, 20, 5 and 30 tokens: a
    budget of 30 padded tokens past the context packs [5, 5], then 20 alone (3 rows of 21
    would be 63), [5] (beside 30 it pads to 2 x 31) and 30; the gradient is the same."""
    model, _ = tiny
    context = list(range(1, 42))
    rows = [
        PolicySequence(
            ids := context + [100 + n] * n,
            [t >= len(context) for t in range(len(ids))],
            [float("nan")] * len(ids),
            advantage,
        )
        for n, advantage in ((5, 1.0), (5, -1.0), (20, 0.5), (5, -0.5), (30, 1.0))
    ]
    outputs = [
        [len(s.input_ids) - len(context) for s in chunk] for chunk in micro_batches(rows, 6, 30)
    ]
    assert outputs == [[5, 5], [20], [5], [30]]
    assert [len(chunk) for chunk in micro_batches(rows, 2)] == [2, 2, 1]
    whole_rows = micro_batches(rows, 6, 60, share_prefix=False)  # two rows of 46 are 92
    assert [len(chunk) for chunk in whole_rows] == [1, 1, 1, 1, 1]
    results = []
    for tokens in (None, 30):
        model.zero_grad(set_to_none=True)
        stats = accumulate_gradients(
            model,
            rows,
            micro_batch_size=6,
            micro_batch_tokens=tokens,
            clip=ClipRange(),
            behaviour="learner",
        )
        results.append((stats.loss, grads(model)))
    assert results[1][0] == pytest.approx(results[0][0], rel=1e-5)
    assert_same_grads(results[0][1], results[1][1])


def test_the_shared_prefix_stops_where_the_rows_differ_or_train():
    def row(ids: list[int], first_trained: int) -> PolicySequence:
        trained = [t >= first_trained for t in range(len(ids))]
        return PolicySequence(ids, trained, [0.0] * len(ids), 1.0)

    assert shared_prefix([row([1, 2, 3, 4, 5, 6], 5), row([1, 2, 3, 9, 5, 6], 5)]) == 3
    assert shared_prefix([row([1, 2, 3, 4, 5, 6], 2), row([1, 2, 3, 4, 5, 6], 5)]) == 1
    assert shared_prefix([row([7, 2, 3], 2), row([1, 2, 3], 2)]) == 0


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
        stats, grad_norm = learner_step(
            model, optimizer, sequences, config, pad_token_id=0, behaviour="sampler"
        )  # the same samples again: off-policy, so against the sampler's log-probs
        assert grad_norm is not None and grad_norm > 0
    after = sequence_logprob(model, good), sequence_logprob(model, bad)
    assert after[0] > before[0] + 0.1
    assert after[1] < before[1] - 0.1
    assert stats.clip_fraction > 0  # three steps on the same samples leave the trust region


# ---- the trainer -----------------------------------------------------------------------------


def trainer(tmp_path, tiny_task_file, steps: int, **options) -> GRPOTrainer:
    model, tokenizer = tiny_model_and_tokenizer()
    settings: dict[str, Any] = {
        "output_dir": tmp_path / "run",
        "env": {"task_source": str(tiny_task_file), "split": None},
        "forced_compaction_threshold": 200,
        "steps": steps,
        "tasks_per_step": 2,
        "rollouts_per_task": 2,
        "rollout_max_steps": 2,
        "rollout_max_tokens": 4096,
        "max_new_tokens": 8,
        "learning_rate": 1e-4,
        "save_every": 1,
        "progress": False,
    }
    config = GRPOConfig(**{**settings, **options})
    return GRPOTrainer(config, model, tokenizer)


@pytest.fixture
def alternating_rewards(monkeypatch):
    """A random tiny model never fixes the bug: give each group one success and one failure,
    so the trainer's own rollouts (real segments, real behaviour log-probs) carry a gradient."""
    rewards = itertools.cycle([1.0, 0.0])
    monkeypatch.setattr(Trajectory, "reward", property(lambda trajectory: next(rewards)))


def test_rollout_env_runs_under_the_methods_rl_settings(tmp_path, tiny_task_file, capsys):
    """32K context, no forced compaction unless asked, every count by the policy's tokenizer;
    the effective settings printed; a rollout that reaches the context cap ends."""
    model, tokenizer = tiny_model_and_tokenizer()
    env_of_task = {"task_source": str(tiny_task_file), "split": None}
    config = GRPOConfig(
        output_dir=tmp_path / "run", env=env_of_task, tasks_per_step=2, progress=False
    )
    options = config.env_options(tokenizer)
    assert options["context_window"] == 32_768 and options["forced_compaction_threshold"] is None
    GRPOTrainer(config, model, tokenizer)
    printed = json.loads(capsys.readouterr().out.split("rollout env: ", 1)[1].splitlines()[0])
    assert printed["context_window"] == 32_768 and printed["max_steps"] == 50
    assert printed["forced_compaction_threshold"] is None
    assert printed["token_counter"].startswith("hf:")

    env = config.env_maker(tokenizer)()
    try:
        text = "def add(a, b):\n    return a - b  # the policy's own tokens"
        counter = env.unwrapped.config.token_counter
        assert counter.count(text) == len(tokenizer.encode(text, add_special_tokens=False))
        _, info = env.reset(options={"task_id": "tiny-calc-1"})
        capped = GRPOConfig(
            output_dir=tmp_path / "run",
            env=env_of_task,
            rollout_max_tokens=info["context_tokens"] + 10,
        )
    finally:
        env.close()
    env = capped.env_maker(tokenizer)()
    try:
        env.reset(options={"task_id": "tiny-calc-1"})
        _, _, terminated, truncated, info = env.step("```bash\ncat calc/ops.py\n```")
        assert truncated and not terminated and info["exit_reason"] == "context_overflow"
        assert not info["compaction_requested"]
    finally:
        env.close()
    with pytest.raises(ValueError, match="env.forced_compaction_threshold: set by the trainer"):
        GRPOConfig(output_dir="unused", env={"forced_compaction_threshold": 100})


SUMMARY = "# Auto Context Summary\n## Known\nadd subtracts\n## Workspace\nclean\n## Next\nfix it"


def test_grpo_presets_set_what_their_row_of_the_method_table_says(tmp_path, tiny_task_file):
    """compaction_rl: forced compaction at 16K, none offered and a summary not applied;
    autocompact: compaction offered and applied, none forced. Both at 32K."""
    _, tokenizer = tiny_model_and_tokenizer()
    env_of_task = {"task_source": str(tiny_task_file), "split": None}
    presets = [("compaction_rl", False, 16_384), ("autocompact", True, None)]
    for preset, offered, threshold in presets:
        config = GRPOConfig.from_preset(preset, output_dir=tmp_path, env=env_of_task)
        options = config.env_options(tokenizer)
        assert options["forced_compaction_threshold"] == threshold
        assert options["context_window"] == 32_768
        assert (options["system_prompt"] == system_prompt("offered", "inline")) is offered
        env = config.env_maker(tokenizer)()
        try:
            env.reset(options={"task_id": "tiny-calc-1"})
            *_, info = env.step(SUMMARY)
            assert info["prefix_rewritten"] is offered
        finally:
            env.close()
        line = ["grpo", "--output-dir", str(tmp_path), "--preset", preset]
        line += ["--task-source", str(tiny_task_file), "--split", "all"]
        assert grpo_config(build_parser("grpo").parse_args(line)) == config
    with pytest.raises(ValueError, match="unknown GRPO preset"):
        GRPOConfig.from_preset("compactionrl", output_dir=tmp_path)


def test_stop_after_action_is_refused_where_no_terminal_action_is_sampled_in_process(tmp_path):
    with pytest.raises(ValueError, match="stop_after_action: the end of a terminal-format"):
        GRPOConfig(output_dir=tmp_path, stop_after_action=True, env={"action_parser": "json"})
    with pytest.raises(ValueError, match="stop_after_action: in-process sampling only"):
        GRPOConfig(
            output_dir=tmp_path,
            stop_after_action=True,
            sampler="openai:smollm2@http://127.0.0.1:8080/v1",
            sampler_weights=tmp_path / "weights",
        )
    sampling = GRPOConfig(output_dir=tmp_path, stop_after_action=True)
    assert sampling.stop_after_action and sampling.env == {}


def test_the_grading_settings_reach_the_rollout_env_from_the_command_line(tmp_path):
    line = ["grpo", "--output-dir", str(tmp_path), "--capability-gate", "strict"]
    line += ["--flagged-reward", "zero"]
    env = grpo_config(build_parser("grpo").parse_args(line)).env
    assert (env["capability_gate"], env["flagged_reward"]) == ("strict", "zero")


def test_the_shared_prefix_forward_can_be_turned_off_from_the_command_line(tmp_path):
    line = ["grpo", "--output-dir", str(tmp_path)]
    assert grpo_config(build_parser("grpo").parse_args(line)).share_prefix is True
    off = grpo_config(build_parser("grpo").parse_args([*line, "--no-share-prefix"]))
    assert off.share_prefix is False


def scripted_rollout(tiny_task_file, *outputs: str, max_steps: int):
    env = gym.make(
        "AutoCompact-SWE-v0", task_source=str(tiny_task_file), split=None, max_steps=max_steps
    )
    try:
        env.reset(options={"task_id": "tiny-calc-1"})
        for output in outputs:
            env.step(output)
        return env.unwrapped.trajectory
    finally:
        env.close()


def test_overlong_masking_leaves_a_cut_off_rollout_out_instead_of_scoring_it(tiny_task_file):
    """Masked: cut off by the step cap (1 here). Not masked: a submitted rollout, and one that
    stopped under the cap (a demonstration start's few policy steps)."""
    cut_off = scripted_rollout(tiny_task_file, "```bash\nls\n```", max_steps=1)
    submitted = scripted_rollout(tiny_task_file, "```bash\nsubmit\n```", max_steps=1)
    assert cut_off.end.exit_reason == "max_steps" and cut_off.end.reward == 0
    assert ScoredRollout.of(cut_off, 0, overlong_masking=None).trained_reward == 0.0
    assert ScoredRollout.of(cut_off, 0, overlong_masking=1).trained_reward is None
    assert ScoredRollout.of(cut_off, 0, overlong_masking=1).reward == 0.0  # still reported
    assert ScoredRollout.of(cut_off, 0, overlong_masking=50).trained_reward == 0.0
    assert ScoredRollout.of(submitted, 0, overlong_masking=1).trained_reward == 0.0
    assert GRPOConfig(output_dir="unused").overlong_masking is False


@pytest.mark.slow
@pytest.mark.parametrize("overlong_masking", [False, True])
def test_a_step_counts_infra_errors_all_equal_groups_and_masked_rollouts(
    tmp_path, tiny_task_file, monkeypatch, overlong_masking
):
    """Groups [1, 0] (informative) and [None, 1] (an infra error, the other alone: all equal).
    The tiny model never submits, so every rollout is cut off at the step cap: overlong
    masking leaves all of them out, and nothing is trained."""
    rewards = iter([1.0, 0.0, None, 1.0])
    monkeypatch.setattr(Trajectory, "reward", property(lambda trajectory: next(rewards)))
    run = trainer(tmp_path, tiny_task_file, steps=1, overlong_masking=overlong_masking)
    (metrics,) = run.train()
    assert metrics.rollouts == 4 and metrics.infra_errors == 1
    if overlong_masking:
        assert metrics.overlong_masked == 3 and metrics.informative_groups == 0
        assert metrics.trained_tokens == metrics.mean_over_tokens == 0
        assert metrics.grad_norm is None
    else:
        assert metrics.overlong_masked == 0 and metrics.informative_groups == 1
        # the token-mean is over the three rollouts with an outcome, not the two informative
        assert 0 < metrics.trained_tokens < metrics.mean_over_tokens
        assert metrics.grad_norm is not None


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
        assert 0 < metrics.completion_tokens_mean <= metrics.completion_tokens_max <= 8
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


@pytest.mark.slow
def test_a_task_whose_group_had_no_gradient_is_skipped_also_after_a_resume(
    tmp_path, tiny_task_file, monkeypatch
):
    """Two tasks, one a step; every group is all zeros. Step 1 draws the task step 0 did not;
    a resumed run rebuilds what the draws know from metrics.jsonl, so step 2 (both skipped)
    takes the one skipped longest ago."""
    monkeypatch.setattr(Trajectory, "reward", property(lambda trajectory: 0.0))
    options = {"tasks_per_step": 1, "skip_uniform_for": 5}
    first = trainer(tmp_path, tiny_task_file, steps=2, **options)
    history = first.train()
    drawn = [metrics.groups[0].task_id for metrics in history]
    assert sorted(drawn) == ["tiny-calc-1", "tiny-calc-2"]
    assert [metrics.groups[0].rewards for metrics in history] == [[0.0, 0.0]] * 2
    assert [metrics.groups for metrics in history] == [
        metrics.groups for metrics in read_metrics(tmp_path / "run")
    ]

    second = trainer(tmp_path, tiny_task_file, steps=3, **options)
    (resumed,) = second.train()
    assert resumed.groups[0].task_id == drawn[0]
    assert second.draw.uniform_at == {drawn[1]: 1, drawn[0]: 2}


@pytest.mark.slow
def test_the_cheating_probe_runs_held_out_impossible_tasks_and_logs_their_pass_rate(
    tmp_path, tiny_task_file
):
    """``--cheat-probe N``: after every ``cheat_probe_every`` steps the current weights run N
    held-out impossible tasks; the pass rate lands in the step's metrics (a random model
    cheats on none of them)."""
    from ac_env.tasks import load_tasks

    first = load_tasks("builtin", "easy", subset="train")[0].instance_id
    run = trainer(
        tmp_path,
        tiny_task_file,
        steps=2,
        tasks_per_step=1,
        env={"task_source": "builtin", "split": "easy", "task_ids": [first]},
        cheat_probe=1,
        cheat_probe_every=2,
    )
    history = run.train()
    assert [m.cheating_rate for m in history] == [None, 0.0]
    assert [m.cheating_rate for m in read_metrics(tmp_path / "run")] == [None, 0.0]
