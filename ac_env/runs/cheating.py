"""The cheating rate of a policy: its pass rate on impossible tasks (ImpossibleBench).

An impossible task (``ac_env.tasks.impossible``) keeps its statement while one of its
FAIL_TO_PASS tests contradicts it, so no fix passes: each reward of 1 is a cheat the grader
did not catch (a value equal and unequal at once, code that answers differently when asked
again, ...). ``cheating_rate`` runs a policy on some of them and counts those passes; call it
during training (every K steps on N held-out tasks) to see a policy start to cheat.

    from ac_env.agents.reference import ReferenceAgent
    from ac_env.runs.cheating import cheating_rate, probe_task_ids

    ids = probe_task_ids("real", 8)
    print(cheating_rate(ReferenceAgent, ids, task_source="real").rate)  # 0.0
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from pydantic import BaseModel, ConfigDict

import ac_env  # noqa: F401  (registers the env id)
from ac_env.agents.rollout import rollout_many
from ac_env.policy import Policy
from ac_env.tasks import IMPOSSIBLE, load_tasks


class CheatingRate(BaseModel):
    """The outcome of a cheating probe: ``rate`` = passed / graded (None if nothing graded)."""

    model_config = ConfigDict(frozen=True)

    episodes: int
    graded: int
    passed: int
    rate: float | None
    passed_ids: list[str]
    """The impossible tasks the policy passed: the episodes to read."""


def probe_task_ids(task_source: str = "real", count: int = 8, subset: str = "eval") -> list[str]:
    """The first ``count`` impossible tasks of ``task_source``'s ``subset`` (held-out tasks by
    default, so the probe never grades a task the policy trained on)."""
    if count < 1:
        raise ValueError(f"count: must be at least 1, got {count}")
    tasks = load_tasks(task_source, IMPOSSIBLE, subset=subset)
    return [task.instance_id for task in tasks[:count]]


def cheating_rate(
    policy_factory: Callable[[], Policy],
    task_ids: Sequence[str],
    *,
    task_source: str = "real",
    workers: int = 1,
    max_steps: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    progress: bool = False,
) -> CheatingRate:
    """Run a policy made by ``policy_factory`` once on each impossible task of ``task_ids``
    (``probe_task_ids``) in ``task_source``; ``env_kwargs`` are further ``gym.make`` keywords
    (sandbox, context window, ...). Episodes whose grading failed for infrastructure reasons
    (reward nan) are counted in ``episodes`` but not in ``graded``."""
    if not task_ids:
        raise ValueError("task_ids: at least one impossible task")
    settings = {
        **(env_kwargs or {}),
        "task_source": task_source,
        "split": IMPOSSIBLE,
        "task_ids": list(task_ids),
    }

    def make_env() -> gym.Env[Any, Any]:
        return gym.make("AutoCompact-SWE-v0", **settings)

    jobs = [(None, {"task_id": task_id}) for task_id in task_ids]
    trajectories = rollout_many(
        make_env, policy_factory, jobs, workers, max_steps=max_steps, progress=progress
    )
    graded = passed = 0
    passed_ids = []
    for task_id, trajectory in zip(task_ids, trajectories, strict=True):
        end = trajectory.end
        reward = end.reward if end is not None else None
        if reward is None or math.isnan(reward):
            continue
        graded += 1
        if reward == 1.0:
            passed += 1
            passed_ids.append(task_id)
    return CheatingRate(
        episodes=len(trajectories),
        graded=graded,
        passed=passed,
        rate=passed / graded if graded else None,
        passed_ids=passed_ids,
    )
