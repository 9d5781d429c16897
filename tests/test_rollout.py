"""Driving episodes: ``rollout`` and the thread-pool ``rollout_many``."""

from __future__ import annotations

import threading

import gymnasium as gym
import pytest

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.errors import PolicyError
from ac_env.agents.reference import ReferenceAgent
from ac_env.agents.rollout import RolloutJob, rollout, rollout_many
from ac_env.policy import PolicyOutput


def make_env(tiny_task_file, **kwargs):
    return gym.make("AutoCompact-SWE-v0", task_source=str(tiny_task_file), split=None, **kwargs)


class FailingPolicy:
    """Runs one command, then its backend fails."""

    def act(self, observation):
        if len(observation) == 2:
            return PolicyOutput(text="```bash\nsed -i 's/a - b/a + b/' calc/ops.py\n```")
        raise PolicyError("server answered 503", status=503)


class MeetingPolicy:
    """Sleeps in a command, then waits at a barrier that only opens when every worker is
    inside an episode at the same time, then submits. Run one at a time, the barrier breaks
    (a policy error), so a submitted episode proves the episodes overlapped."""

    def __init__(self, barrier: threading.Barrier) -> None:
        self.barrier = barrier

    def act(self, observation):
        if len(observation) == 2:
            return PolicyOutput(text="```bash\nsleep 1 && echo slept\n```")
        self.barrier.wait(timeout=10)
        return PolicyOutput(text="```bash\nsubmit\n```")


def test_rollout_runs_an_episode_to_its_end(tiny_task_file):
    env = make_env(tiny_task_file)
    trajectory = rollout(env, ReferenceAgent(), options={"task_id": "tiny-calc-1"})
    env.close()
    assert trajectory.header.instance_id == "tiny-calc-1"
    assert trajectory.end.exit_reason == "submitted" and trajectory.end.reward == 1.0


def test_rollout_max_steps_ends_the_episode_early(tiny_task_file):
    env = make_env(tiny_task_file)
    trajectory = rollout(env, ReferenceAgent(), options={"task_id": "tiny-calc-1"}, max_steps=2)
    env.close()
    assert len(trajectory.model_calls()) == 2
    assert trajectory.end.exit_reason == "max_steps" and trajectory.end.reward == 0.0
    with pytest.raises(ValueError, match="max_steps"):
        rollout(env, ReferenceAgent(), max_steps=0)


def test_policy_error_ends_the_episode_and_grades_the_workspace(tiny_task_file):
    env = make_env(tiny_task_file)
    trajectory = rollout(env, FailingPolicy(), options={"task_id": "tiny-calc-1"})
    env.close()
    assert trajectory.end.exit_reason == "policy_error"
    assert trajectory.end.submitted is False
    assert trajectory.end.reward == 1.0  # the edit made before the failure is graded
    assert len(trajectory.model_calls()) == 1


def test_rollout_many_returns_trajectories_in_job_order(tiny_task_file):
    jobs = [
        RolloutJob(options={"task_id": "tiny-calc-2"}),
        RolloutJob(options={"task_id": "tiny-calc-1"}),
        (None, {"task_id": "tiny-calc-2"}),
    ]
    trajectories = rollout_many(
        lambda: make_env(tiny_task_file), ReferenceAgent, jobs, workers=2, progress=False
    )
    assert [t.header.instance_id for t in trajectories] == [
        "tiny-calc-2",
        "tiny-calc-1",
        "tiny-calc-2",
    ]
    assert all(t.end.reward == 1.0 for t in trajectories)


def test_rollout_many_overlaps_episodes(tiny_task_file):
    barrier = threading.Barrier(2)
    jobs = [RolloutJob(seed=seed) for seed in (0, 1)]
    trajectories = rollout_many(
        lambda: make_env(tiny_task_file),
        lambda: MeetingPolicy(barrier),
        jobs,
        workers=2,
        progress=False,
    )
    assert [t.header.seed for t in trajectories] == [0, 1]
    assert [t.end.exit_reason for t in trajectories] == ["submitted", "submitted"]
    assert all("slept" in t.tool_results()[0].output for t in trajectories)


def test_rollout_many_rejects_no_workers(tiny_task_file):
    with pytest.raises(ValueError, match="workers"):
        rollout_many(lambda: make_env(tiny_task_file), ReferenceAgent, [RolloutJob()], 0)
