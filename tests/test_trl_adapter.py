"""TRL's own GRPOTrainer on real AutoCompact episodes (``ac_train.integrations.trl``): what TRL
trains, row by row and token by token, is what our segmenter cuts from the same trajectories."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from trl import GRPOConfig, GRPOTrainer

from ac_env.trajectory import Trajectory
from ac_train.advantages import group_advantages
from ac_train.integrations.trl import (
    AutoCompactRollout,
    Episode,
    SegmentSlotsExceeded,
    TRLRolloutConfig,
)
from ac_train.models.checkpoints import tiny_model_and_tokenizer
from ac_train.segments import segment_trajectory

ROOT = Path(__file__).resolve().parents[1]
ENV = {
    "task_source": "builtin",
    "split": "easy",
    "max_steps": 3,
    "context_window": 4096,
    "forced_compaction_threshold": 200,  # below the prompt: every turn asks for a summary
}


@pytest.fixture
def two_grades(monkeypatch):
    """A random tiny model never fixes the bug: grade each group's episodes 1 and 0 (once per
    trajectory object), so the advantages TRL trains with are not all zero."""
    grades: dict[int, float] = {}
    cycle = itertools.cycle([1.0, 0.0])
    monkeypatch.setattr(
        Trajectory,
        "reward",
        property(lambda t: grades.setdefault(id(t), next(cycle))),
    )


def trainer_for(
    rollout: AutoCompactRollout, model: Any, tokenizer: Any, tmp_path, **settings: Any
) -> GRPOTrainer:
    args = GRPOConfig(
        output_dir=str(tmp_path / "trl"),
        use_cpu=True,
        bf16=False,  # TRL's default bf16 autocast moves padded rows' log-probs by ~1e-3
        max_steps=2,
        per_device_train_batch_size=rollout.config.num_generations,
        max_completion_length=8,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        **{**rollout.trainer_settings(), **settings},
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=rollout.reward_funcs,
        args=args,
        train_dataset=rollout.dataset(),
        processing_class=tokenizer,
        rollout_func=rollout,
    )


def trained_rows(inputs: dict[str, torch.Tensor]) -> list[tuple[list[int], list[int], float]]:
    """Each row TRL trained: the unpadded sequence, its loss mask over it, its advantage."""
    rows = []
    loss_mask = inputs["completion_mask"] * inputs["tool_mask"]
    for i in range(inputs["prompt_ids"].shape[0]):
        prompt = inputs["prompt_ids"][i][inputs["prompt_mask"][i].bool()].tolist()
        kept = inputs["completion_mask"][i].bool()
        completion = inputs["completion_ids"][i][kept].tolist()
        mask = [0] * len(prompt) + loss_mask[i][kept].tolist()
        rows.append((prompt + completion, mask, float(inputs["advantages"][i])))
    return rows


def expected_rows(
    episodes: list[Episode], tokenizer: Any, group: int
) -> list[tuple[list[int], list[int], float]]:
    """Our own method on the same trajectories: segments, GRPO masks, group advantages."""
    rows = []
    for start in range(0, len(episodes), group):
        trajectories = [e.trajectory for e in episodes[start : start + group]]
        advantages = group_advantages([t.reward for t in trajectories])
        for trajectory, advantage in zip(trajectories, advantages, strict=True):
            for segment in segment_trajectory(trajectory, tokenizer, prefix_mismatch="split"):
                mask = [int(m) for m in segment.grpo_mask()]
                rows.append((segment.input_ids, mask, float(advantage or 0.0)))
    return rows


def test_trl_trains_exactly_our_segments_with_their_episode_advantage(
    tmp_path, two_grades, one_torch_thread
):
    model, tokenizer = tiny_model_and_tokenizer()
    config = TRLRolloutConfig(env=ENV, episodes_per_group=2, segments_per_episode=4)
    rollout = AutoCompactRollout(config, tokenizer)
    trainer = trainer_for(rollout, model, tokenizer, tmp_path)

    calls: list[list[Episode]] = []
    batches: list[dict[str, torch.Tensor]] = []
    sampled_vs_trained: list[tuple[torch.Tensor, torch.Tensor]] = []
    run_rollout, compute_loss = trainer.rollout_func, trainer._compute_loss

    def recording_rollout(prompts, trl_trainer):
        output = run_rollout(prompts, trl_trainer)
        calls.append(list(rollout.episodes))
        return output

    def recording_loss(trained_model, inputs):
        batches.append({k: v.detach().clone() for k, v in inputs.items() if torch.is_tensor(v)})
        # the padded rows TRL trains, through a plain forward of the weights that sampled them
        # (this step has not moved them): the sampler's log-prob of every trained token
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        with torch.no_grad():
            logits = trained_model(input_ids=ids, attention_mask=attention).logits
        width = inputs["completion_ids"].size(1)
        logps = torch.log_softmax(logits[:, -width - 1 : -1].float(), dim=-1)
        logps = logps.gather(-1, inputs["completion_ids"].unsqueeze(-1)).squeeze(-1)
        mask = (inputs["completion_mask"] * inputs["tool_mask"]).bool()
        sampled_vs_trained.append((inputs["sampling_per_token_logps"][mask], logps[mask]))
        return compute_loss(trained_model, inputs)

    trainer.rollout_func = recording_rollout
    trainer._compute_loss = recording_loss
    before = [p.detach().clone() for p in model.parameters()]
    trainer.train()

    assert trainer.state.global_step == 2 and len(calls) == 2 and len(batches) == 2
    episodes = [e for call in calls for e in call]
    assert any(e.trajectory.compactions() for e in episodes)
    assert max(len(e.segments) for e in episodes) >= 2
    for call, batch in zip(calls, batches, strict=True):
        ours = [r for r in expected_rows(call, tokenizer, group=2) if any(r[1])]
        theirs = [r for r in trained_rows(batch) if any(r[1])]
        assert len(theirs) == len(ours) >= 2
        ours.sort(key=lambda r: (r[0], r[1]))
        theirs.sort(key=lambda r: (r[0], r[1]))
        for (ids, mask, advantage), (trl_ids, trl_mask, trl_advantage) in zip(
            ours, theirs, strict=True
        ):
            assert trl_ids == ids
            assert trl_mask == mask
            assert trl_advantage == pytest.approx(advantage, abs=1e-6)
        assert any(r[2] > 0.9 for r in ours) and any(r[2] < -0.9 for r in ours)
        # the rows nothing trains are the empty slots and segments without a policy output
        assert int((batch["completion_mask"] * batch["tool_mask"]).sum()) == sum(
            sum(r[1]) for r in ours
        )
    # every trained token is scored in the context it was sampled in
    for sampled, trained in sampled_vs_trained:
        assert torch.allclose(sampled, trained, atol=1e-5)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_an_episode_with_more_segments_than_slots_is_refused(tmp_path, one_torch_thread):
    model, tokenizer = tiny_model_and_tokenizer()
    config = TRLRolloutConfig(env=ENV, episodes_per_group=2, segments_per_episode=1)
    rollout = AutoCompactRollout(config, tokenizer)
    trainer = trainer_for(rollout, model, tokenizer, tmp_path)
    with pytest.raises(SegmentSlotsExceeded, match="segments_per_episode"):
        trainer.train()


def test_settings_that_would_change_what_is_trained_are_refused(tmp_path):
    model, tokenizer = tiny_model_and_tokenizer()
    rollout = AutoCompactRollout(TRLRolloutConfig(env=ENV), tokenizer)
    trainer = trainer_for(rollout, model, tokenizer, tmp_path, scale_rewards="group")
    with pytest.raises(ValueError, match="GRPOConfig.scale_rewards"):
        rollout(["any"] * rollout.config.num_generations, trainer)
    trainer = trainer_for(rollout, model, tokenizer, tmp_path)
    with pytest.raises(ValueError, match="instance_id"):
        rollout([[{"role": "user", "content": "hi"}]] * rollout.config.num_generations, trainer)


@pytest.mark.slow
def test_the_trl_example_trains_and_reports_each_step(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trl_grpo.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    steps = re.findall(
        r"^\s+(\d+)\s+([01]\.\d\d)\s+(\d+\.\d\d)\s+\S+\s+\S+\s+(\S+)$", done.stdout, re.MULTILINE
    )
    assert [step for step, *_ in steps] == ["1", "2"], done.stdout
    assert any(float(compactions) > 0 for _, _, compactions, _ in steps)
    # a group with a fix and a failure: the step's mean grade is strictly between 0 and 1, and
    # the optimizer step has a gradient
    assert any(0 < float(reward) < 1 and float(norm) > 0 for _, reward, _, norm in steps), (
        done.stdout
    )
    found = re.search(r"log p\(fix \| first prompt\): (-?\d+\.\d+) before GRPO", done.stdout)
    assert found, done.stdout
    assert "episodes/min" in done.stdout
    assert len(list((tmp_path / "runs" / "trl-grpo" / "trajectories").glob("*.jsonl"))) == 8
