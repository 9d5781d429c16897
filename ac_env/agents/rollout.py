"""Driving episodes: one (``rollout``) or many at once in a thread pool (``rollout_many``).

A policy that raises (a ``PolicyError`` from an HTTP backend, a bug) does not crash the run:
the episode ends through ``env.unwrapped.abort("policy_error")``, which grades the workspace
and records the end like any other exit reason. A ``ModelServerError`` (the server was
unreachable or failing: no fault of the policy) ends it as an infrastructure failure instead:
nothing is graded, the reward is nan and ``infra_error`` names the server's failure.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, NamedTuple

import gymnasium as gym
from tqdm import tqdm

from ac_env.agents.errors import ModelServerError
from ac_env.policy import Policy, PolicyOutput
from ac_env.snapshot import EpisodeSnapshot
from ac_env.trajectory import Trajectory

logger = logging.getLogger(__name__)


Review = Callable[[gym.Env[Any, Any], Any, PolicyOutput], PolicyOutput]


class RolloutJob(NamedTuple):
    """One episode to run: ``env.reset(seed=seed, options=options)``, then, with ``start``,
    ``env.unwrapped.restore(start)``: the episode continues that snapshot."""

    seed: int | None = None
    options: dict[str, Any] | None = None
    start: EpisodeSnapshot | None = None


def rollout(
    env: gym.Env[Any, Any],
    policy: Policy,
    *,
    seed: int | None = None,
    options: dict[str, Any] | None = None,
    max_steps: int | None = None,
    review: Review | None = None,
    start: EpisodeSnapshot | None = None,
) -> Trajectory:
    """Run one episode to its end and return its trajectory.

    ``max_steps`` caps the turns on top of the env's own limit; reaching it ends the episode
    with exit reason ``max_steps`` (graded like any truncation). ``review(env, observation,
    candidate)`` sees each policy output before it executes and returns the output to execute
    (a Judge's hook, ``ac_train.collect``); an exception from it ends the episode like a policy
    error. ``start``: continue this snapshot of an episode (taken in an env with the same
    configuration) instead of the fresh one ``reset`` began; ``max_steps`` counts from it."""
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps: must be at least 1, got {max_steps}")
    observation, _ = env.reset(seed=seed, options=options)
    if start is not None:
        observation = env.unwrapped.restore(start)  # type: ignore[attr-defined]
    return play(env, policy, observation, max_steps=max_steps, review=review)


def play(
    env: gym.Env[Any, Any],
    policy: Policy,
    observation: Any,
    *,
    max_steps: int | None = None,
    review: Review | None = None,
) -> Trajectory:
    """Run an episode under way (after ``reset``, or after ``env.unwrapped.restore``) from
    ``observation`` to its end and return its trajectory; ``max_steps`` (counted from here)
    and ``review`` as in ``rollout``."""
    steps = 0
    done = False
    while not done:
        if max_steps is not None and steps >= max_steps:
            env.unwrapped.abort("max_steps")  # type: ignore[attr-defined]
            break
        try:
            action = policy.act(observation)
            if review is not None:
                action = review(env, observation, action)
        except ModelServerError as error:  # the server's failure, not the policy's
            logger.warning("model server failed at step %d: %s", steps, error)
            env.unwrapped.abort("policy_error", infra_error=f"model server: {error}")  # type: ignore[attr-defined]
            break
        except Exception as error:  # any policy failure ends the episode, never the run
            logger.warning("policy error at step %d: %s: %s", steps, type(error).__name__, error)
            env.unwrapped.abort("policy_error")  # type: ignore[attr-defined]
            break
        observation, _, terminated, truncated, _ = env.step(action)
        steps += 1
        done = terminated or truncated
    trajectory: Trajectory | None = env.unwrapped.trajectory  # type: ignore[attr-defined]
    if trajectory is None:
        raise RuntimeError("the env recorded no trajectory")
    return trajectory


def rollout_many(
    make_env: Callable[[], gym.Env[Any, Any]],
    policy_factory: Callable[[], Policy],
    jobs: Sequence[RolloutJob | tuple[int | None, dict[str, Any] | None]],
    workers: int,
    *,
    max_steps: int | None = None,
    progress: bool = True,
) -> list[Trajectory]:
    """Run ``jobs`` on ``workers`` threads, each with its own env and policy (made once per
    thread and reused), so that slow commands and grading overlap. Returns the trajectories
    in job order; an env error (not a policy error) is raised after all workers stop."""
    if workers < 1:
        raise ValueError(f"workers: must be at least 1, got {workers}")
    parsed = [RolloutJob(*job) for job in jobs]
    local = threading.local()
    made: list[gym.Env[Any, Any]] = []
    lock = threading.Lock()

    def run(job: RolloutJob) -> Trajectory:
        if not hasattr(local, "env"):
            local.env, local.policy = make_env(), policy_factory()
            with lock:
                made.append(local.env)
        return rollout(
            local.env,
            local.policy,
            seed=job.seed,
            options=job.options,
            max_steps=max_steps,
            start=job.start,
        )

    results: list[Trajectory | None] = [None] * len(parsed)
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout") as pool:
            futures = {pool.submit(run, job): index for index, job in enumerate(parsed)}
            bar = tqdm(total=len(futures), desc="rollouts", unit="ep", disable=not progress)
            with bar:
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    bar.update(1)
    finally:
        for env in made:
            env.close()
    return [trajectory for trajectory in results if trajectory is not None]
