"""Start states from demonstrations: snapshots inside the reference agent's solved episodes,
rollouts that continue them, and GRPO that trains only what the policy wrote after them."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import torch

from ac_env.agents.reference import ReferenceAgent
from ac_env.agents.rollout import rollout
from ac_env.policy import PolicyOutput
from ac_env.trajectory import Trajectory
from ac_train.cli import main
from ac_train.grpo.async_trainer import AsyncGRPOTrainer
from ac_train.grpo.config import DemonstrationStarts, GRPOConfig
from ac_train.grpo.loss import policy_sequences
from ac_train.grpo.start_states import (
    StartState,
    demonstration_starts,
    policy_events,
    teachable,
)
from ac_train.grpo.trainer import GRPOTrainer
from ac_train.models.checkpoints import tiny_model_and_tokenizer
from ac_train.models.policy import TransformersPolicy
from ac_train.segments import segment_trajectory

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TASK = "tiny-calc-1"


def env_options(task_file: Path) -> dict[str, Any]:
    return {"task_source": str(task_file), "split": None, "forced_compaction_threshold": 3000}


def env_maker(task_file: Path, max_steps: int = 20) -> Any:
    return lambda: gym.make(
        "AutoCompact-SWE-v0", max_steps=max_steps, context_window=4096, **env_options(task_file)
    )


class Echo:
    """A valid action that changes nothing."""

    def act(self, observation: Any) -> PolicyOutput:
        return PolicyOutput(text="THOUGHT: look.\n```bash\necho hello\n```")


def continue_start(task_file: Path, start: StartState, policy: Any, max_steps: int) -> Any:
    env = env_maker(task_file)()
    try:
        return rollout(
            env,
            policy,
            options={"task_id": start.task_id},
            start=start.snapshot,
            max_steps=max_steps,
        )
    finally:
        env.close()


def test_starts_sit_before_the_demonstrators_last_calls_and_continue_its_episode(tiny_task_file):
    make_env = env_maker(tiny_task_file)
    env = make_env()
    try:
        full = rollout(env, ReferenceAgent("after_locate"), options={"task_id": TASK})
    finally:
        env.close()
    calls = full.model_calls()
    assert full.end is not None and full.end.reward == 1 and full.compactions()

    starts = demonstration_starts(make_env, [TASK], steps_left=[3, 1], progress=False)
    assert [s.id for s in starts] == [f"{TASK}@-1", f"{TASK}@-3"]
    assert [s.step for s in starts] == [len(calls) - 1, len(calls) - 3]
    for start in starts:
        continued = continue_start(tiny_task_file, start, ReferenceAgent("after_locate"), 10)
        assert continued.end is not None and continued.end.reward == 1
        assert [c.output for c in continued.model_calls()] == [c.output for c in calls]


def test_a_start_holds_the_demonstrators_workspace(tiny_task_file):
    """Before the last call (submit) the fix is in the workspace; before the edit it is not."""
    starts = demonstration_starts(env_maker(tiny_task_file), [TASK], steps_left=[1, 3])
    rewards = {
        s.steps_left: continue_start(tiny_task_file, s, Echo(), max_steps=1).end.reward
        for s in starts
    }
    assert rewards == {1: 1.0, 3: 0.0}


def test_a_start_with_the_fix_in_place_is_decided(tiny_task_file):
    """Before the verify or submit call the demonstrator's fix is in the workspace: any
    rollout from there would be rewarded for a fix it did not write."""
    starts = demonstration_starts(env_maker(tiny_task_file), [TASK], steps_left=[1, 2, 3])
    assert {s.steps_left: s.decided for s in starts} == {1: True, 2: True, 3: False}
    assert [s.id for s in teachable(starts)] == [f"{TASK}@-3"]
    with pytest.raises(ValueError, match="decided"):
        teachable(starts[:2])


@pytest.mark.slow
def test_the_trainer_never_draws_a_decided_start(tmp_path, tiny_task_file):
    """Drawn from depths 1-3, only the depth-3 starts (before the fixing edit) are trained."""
    model, tokenizer = tiny_model_and_tokenizer()
    config = GRPOConfig(
        output_dir=tmp_path / "run",
        env={"task_source": str(tiny_task_file), "split": None},
        forced_compaction_threshold=3000,
        rollout_max_tokens=4096,
        tasks_per_step=2,
        progress=False,
        demonstration=DemonstrationStarts(steps_left=[1, 2, 3], max_policy_steps=1),
    )
    trainer = GRPOTrainer(config, model, tokenizer)
    assert sorted(trainer.task_ids) == [f"{TASK}@-3", "tiny-calc-2@-3"]
    for start in trainer.starts.values():  # nothing done: not rewarded
        assert continue_start(tiny_task_file, start, Echo(), max_steps=1).end.reward == 0


def test_a_task_the_demonstrator_does_not_solve_gives_no_start(tiny_task_file):
    starts = demonstration_starts(env_maker(tiny_task_file, max_steps=3), [TASK], steps_left=[1])
    assert starts == []
    with pytest.raises(ValueError, match="steps_left"):
        demonstration_starts(env_maker(tiny_task_file), [TASK], steps_left=[0])


def test_only_what_the_policy_wrote_after_the_start_is_trained(tiny_task_file):
    model, tokenizer = tiny_model_and_tokenizer()
    (start,) = demonstration_starts(env_maker(tiny_task_file), [TASK], steps_left=[3])
    policy = TransformersPolicy(model, tokenizer, max_new_tokens=6, seed=0, policy_version=0)
    trajectory = continue_start(tiny_task_file, start, policy, max_steps=2)
    own_calls = [c for c in trajectory.model_calls() if c.step >= start.step]
    assert len(own_calls) == 2 and len(trajectory.model_calls()) > 2

    own = policy_events(trajectory, start.step)
    assert own.model_calls() == own_calls
    assert own.compactions() == trajectory.compactions()  # segment numbers stay consistent
    segments = segment_trajectory(own, tokenizer, prefix_mismatch="split")
    sequences = policy_sequences(segments, {s.trajectory_id: 1.0 for s in segments})
    assert sum(s.trained_tokens for s in sequences) == sum(
        len(c.output_token_ids or []) for c in own_calls
    )
    # the demonstrator's calls have no behaviour log-probs: left in, they could not be trained
    whole = segment_trajectory(trajectory, tokenizer, prefix_mismatch="split")
    with pytest.raises(ValueError, match="behaviour log-prob"):
        policy_sequences(whole, {s.trajectory_id: 1.0 for s in whole})


@pytest.mark.slow
def test_grpo_steps_from_demonstration_starts(tmp_path, tiny_task_file, monkeypatch):
    rewards = itertools.cycle([1.0, 0.0])  # the tiny model never fixes the bug itself
    monkeypatch.setattr(Trajectory, "reward", property(lambda trajectory: next(rewards)))
    model, tokenizer = tiny_model_and_tokenizer()
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    config = GRPOConfig(
        output_dir=tmp_path / "run",
        env={"task_source": str(tiny_task_file), "split": None},
        forced_compaction_threshold=3000,
        steps=1,
        tasks_per_step=2,
        rollouts_per_task=2,
        rollout_max_tokens=4096,
        max_new_tokens=6,
        learning_rate=1e-3,
        progress=False,
        demonstration=DemonstrationStarts(steps_left=[3], max_policy_steps=1),
    )
    trainer = GRPOTrainer(config, model, tokenizer)
    assert sorted(trainer.task_ids) == [f"{TASK}@-3", "tiny-calc-2@-3"]
    (metrics,) = trainer.train()
    assert metrics.rollouts == 4 and metrics.informative_groups == 2
    assert metrics.trained_sequences == 4 and metrics.trained_tokens > 0
    assert metrics.compactions_per_trajectory == 0  # the demonstrator's compaction is not counted
    assert metrics.format_error_rate == 1.0  # 6 random tokens are no action; the demo's are
    assert any(not torch.equal(v, initial[k]) for k, v in model.state_dict().items())


def recorded_decodes(monkeypatch) -> list[list[list[int]]]:
    """The prompts of every batched decode ``TransformersPolicy`` runs from now on."""
    decodes = []
    original = TransformersPolicy._decode

    def recorded(self, prompts, budgets, sampling):
        decodes.append(prompts)
        return original(self, prompts, budgets, sampling)

    monkeypatch.setattr(TransformersPolicy, "_decode", recorded)
    return decodes


@pytest.mark.slow
def test_batch_groups_samples_each_group_in_one_decode(tmp_path, tiny_task_file, monkeypatch):
    decodes = recorded_decodes(monkeypatch)
    model, tokenizer = tiny_model_and_tokenizer()
    config = GRPOConfig(
        output_dir=tmp_path / "run",
        env={"task_source": str(tiny_task_file), "split": None},
        forced_compaction_threshold=3000,
        steps=1,
        tasks_per_step=2,
        rollouts_per_task=3,
        rollout_workers=2,
        rollout_max_tokens=4096,
        max_new_tokens=6,
        progress=False,
        demonstration=DemonstrationStarts(steps_left=[3], max_policy_steps=1),
        batch_groups=True,
    )
    (metrics,) = GRPOTrainer(config, model, tokenizer).train()
    assert [len(prompts) for prompts in decodes] == [3, 3] and metrics.rollouts == 6
    with pytest.raises(ValueError, match="batch_groups: gathers the calls of rollout_workers"):
        GRPOConfig(output_dir=tmp_path, batch_groups=True)
    with pytest.raises(ValueError, match="batch_groups: decodes in process"):
        GRPOConfig(
            output_dir=tmp_path,
            batch_groups=True,
            sampler="openai:m@http://127.0.0.1:1/v1",
            sampler_weights=tmp_path,
        )


@pytest.mark.slow
def test_batch_groups_gathers_diverged_calls_of_the_workers(tmp_path, tiny_task_file, monkeypatch):
    """Rollouts of several calls: the rows after the first call have diverged (each its own
    last action and observation) and are still decoded together."""
    decodes = recorded_decodes(monkeypatch)
    model, tokenizer = tiny_model_and_tokenizer()
    config = GRPOConfig(
        output_dir=tmp_path / "run",
        env={"task_source": str(tiny_task_file), "split": None},
        forced_compaction_threshold=3000,
        steps=1,
        tasks_per_step=1,
        rollouts_per_task=3,
        rollout_workers=3,
        rollout_max_tokens=4096,
        rollout_max_steps=3,
        max_new_tokens=6,
        progress=False,
        batch_groups=True,
    )
    (metrics,) = GRPOTrainer(config, model, tokenizer).train()
    assert metrics.rollouts == 3
    assert max(len({tuple(p) for p in prompts}) for prompts in decodes) == 3  # in one decode
    assert len(decodes) < 3 * 3  # fewer decodes than calls


def test_demonstration_starts_are_refused_where_unsupported(tmp_path):
    config = GRPOConfig(output_dir=tmp_path, demonstration=DemonstrationStarts())
    with pytest.raises(ValueError, match="asynchronous"):
        AsyncGRPOTrainer(config)
    grouped = GRPOConfig(output_dir=tmp_path, batch_groups=True, rollout_workers=2)
    with pytest.raises(ValueError, match="batch_groups: the asynchronous trainer"):
        AsyncGRPOTrainer(grouped)
    with pytest.raises(SystemExit, match="--demonstration-steps-left"):
        main(["grpo", "--output-dir", str(tmp_path), "--max-policy-steps", "2"])
    with pytest.raises(SystemExit, match="--probe-samples needs --demonstration-steps-left"):
        main(["grpo", "--output-dir", str(tmp_path), "--probe-samples", "2"])


def test_the_command_line_starts_grpo_on_the_continuation_rung(tmp_path):
    from ac_train.cli import build_parser, grpo_config

    args = build_parser().parse_args(
        [
            "grpo",
            "--output-dir",
            str(tmp_path),
            "--continuation",
            "wrong_line",
            "--probe-samples",
            "2",
        ]
    )
    demonstration = grpo_config(args).demonstration
    assert demonstration.continuation == "wrong_line" and demonstration.probe_samples == 2
