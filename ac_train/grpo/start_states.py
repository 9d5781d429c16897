"""Start states from demonstrations: GRPO rollouts that begin part-way through a solved episode.

A model that never solves a task from its start gives GRPO no signal: every group's rewards
are equal, every advantage is 0. A reverse curriculum (Salimans & Chen, 2018, "Learning
Montezuma's Revenge from a Single Demonstration") starts the rollouts late in a demonstration
instead, where a few right actions earn the reward, and moves the start earlier as the policy
learns. Here the demonstrator is the model-free reference agent compacting after it locates the
bug (``ReferenceAgent("after_locate")``), so most start states sit after a compaction: the policy
continues from a summary, the third learnable part of the method.

``demonstration_starts`` runs the demonstrator once per task, snapshots the env
(``env.unwrapped.snapshot()``) before each of its model calls, and keeps, for each solved task,
the snapshots before the calls ``steps_left`` from its end (1: before its last call). The env
grades the workspace however an episode ends, so a start after the demonstrator's fixing edit
earns the reward whatever the policy does short of undoing it: such a start is ``decided``
(its workspace, graded as it stands, passes), and ``teachable`` leaves it out of training, so
no rollout is rewarded for a fix it did not write. On the built-in suite the demonstrator's
last three calls are usually edit, verify, submit: ``steps_left=[3]`` starts right before the
edit, ``[2]`` and ``[1]`` are decided. A rollout from a ``StartState`` restores
the snapshot (``RolloutJob(start=...)``): its context holds the demonstrator's turns, its
workspace the demonstrator's edits so far. The demonstrator is deterministic, so the same tasks
always give the same start states (a resumed run rebuilds them).

What the policy wrote is ``policy_events``: the demonstrator's model calls are context, never
trained; its compaction events are kept so that segment numbers still line up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from tqdm import tqdm

from ac_env.agents.reference import ReferenceAgent
from ac_env.agents.rollout import rollout
from ac_env.policy import PolicyOutput
from ac_env.snapshot import EpisodeSnapshot
from ac_env.trajectory import CompactionEvent, ModelCall, Trajectory


@dataclass(frozen=True)
class StartState:
    """The demonstration of ``task_id`` with ``steps_left`` of its model calls still to come."""

    task_id: str
    steps_left: int
    snapshot: EpisodeSnapshot
    decided: bool = False
    """The workspace, graded as it stands, already passes: the outcome is not the policy's."""
    label: str = ""
    """Names a start built otherwise than by depth (``ac_train.grpo.continuation``'s plans)."""

    @property
    def id(self) -> str:
        return (
            f"{self.task_id}@{self.label}" if self.label else f"{self.task_id}@-{self.steps_left}"
        )

    @property
    def step(self) -> int:
        """Env steps the demonstrator took before this state."""
        return self.snapshot.steps


def demonstration_starts(
    make_env: Callable[[], gym.Env[Any, Any]],
    task_ids: Sequence[str],
    *,
    steps_left: Sequence[int],
    progress: bool = True,
) -> list[StartState]:
    """For each task the demonstrator solves, the state before its model call ``n`` from the
    end for each ``n`` in ``steps_left`` that its episode has, in task order, each graded as
    it stands (``decided``). Tasks it does not solve give none."""
    if not steps_left or min(steps_left) < 1:
        raise ValueError(f"steps_left: must be numbers of at least 1, got {list(steps_left)}")
    starts: list[StartState] = []
    env = make_env()
    try:
        for task_id in tqdm(task_ids, desc="demonstrations", unit="task", disable=not progress):
            before_call: list[EpisodeSnapshot] = []
            trajectory = rollout(
                env,
                ReferenceAgent("after_locate"),
                options={"task_id": task_id},
                review=_snapshot_into(before_call),
            )
            end = trajectory.end
            if end is None or end.reward != 1 or end.infra_error is not None:
                continue
            starts += [
                StartState(task_id, left, snapshot, passes_as_it_stands(env, snapshot))
                for left in sorted(set(steps_left))
                if left <= len(before_call)
                for snapshot in [before_call[-left]]
            ]
    finally:
        env.close()
    return starts


def passes_as_it_stands(env: gym.Env[Any, Any], snapshot: EpisodeSnapshot) -> bool:
    """Whether ``snapshot``'s workspace passes the task's tests with nothing more done: the
    episode is restored in ``env`` and ended at once (graded like a rollout's step cap)."""
    env.reset(options={"task_id": snapshot.task.instance_id})
    env.unwrapped.restore(snapshot)  # type: ignore[attr-defined]
    reward, _ = env.unwrapped.abort("max_steps")  # type: ignore[attr-defined]
    return bool(reward == 1)


def teachable(starts: Sequence[StartState]) -> list[StartState]:
    """The starts whose outcome the policy decides: not ``decided``. ValueError when none is
    left, naming the decided ones."""
    kept = [start for start in starts if not start.decided]
    if starts and not kept:
        decided = ", ".join(start.id for start in starts[:6])
        raise ValueError(
            f"every start state is decided ({decided}{', ...' if len(starts) > 6 else ''}): "
            "its workspace passes the tests as it stands (the demonstrator's fix is in place), "
            "so no rollout from it could earn the reward by what it writes; start before the "
            "fixing edit (steps_left 3 on the built-in suite)"
        )
    return kept


def _snapshot_into(
    snapshots: list[EpisodeSnapshot],
) -> Callable[[gym.Env[Any, Any], Any, PolicyOutput], PolicyOutput]:
    """A ``review`` hook that snapshots the env before each output executes."""

    def review(env: gym.Env[Any, Any], _observation: Any, output: PolicyOutput) -> PolicyOutput:
        snapshots.append(env.unwrapped.snapshot())  # type: ignore[attr-defined]
        return output

    return review


def policy_events(trajectory: Trajectory, start_step: int) -> Trajectory:
    """``trajectory`` without the model calls taken before env step ``start_step`` (a
    demonstrator's, in a rollout continued from a start state). Everything else stays: the
    compaction events keep the later calls' segment numbers consistent."""
    if start_step == 0:
        return trajectory
    own = Trajectory(trajectory.header)
    own.events = [
        event
        for event in trajectory.events
        if not (isinstance(event, ModelCall) and event.step < start_step)
    ]
    return own


def policy_compactions(trajectory: Trajectory, start_step: int) -> list[CompactionEvent]:
    """The compactions from env step ``start_step`` on: the policy's own."""
    return [event for event in trajectory.compactions() if event.step >= start_step]


__all__ = [
    "StartState",
    "demonstration_starts",
    "passes_as_it_stands",
    "policy_compactions",
    "policy_events",
    "teachable",
]
