"""The trajectory's advantage, shared by its segments: the one step every trainer takes.

GRPO scores a group of rollouts of one start state, turns each rollout's reward into an
advantage against the group's (``group_advantages``), cuts each rollout into segments at its
rewrites, and gives every segment of a rollout that rollout's advantage (``segment_group``). Our
trainer (``ac_train.grpo``) and every adapter for another trainer call ``segment_group``, so a
compaction's segments are credited the same way whichever trainer learns from them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ac_env.trajectory import Trajectory
from ac_train.segments import PrefixMismatch, Segment, segment_trajectory


def group_advantages(
    rewards: Sequence[float | None], *, scale_by_std: bool = True, eps: float = 1e-6
) -> list[float | None]:
    """``r_i - mean(r)`` over the group, divided by ``std(r) + eps`` when ``scale_by_std``
    (off: Dr. GRPO). A ``None`` reward (infra error) is left out of the baseline and gets
    ``None``: no gradient. A group whose rewards are all equal gets 0 everywhere. The std is the
    population std of the group's valid rewards."""
    valid = [r for r in rewards if r is not None]
    if not valid:
        return [None] * len(rewards)
    mean = sum(valid) / len(valid)
    std = math.sqrt(sum((r - mean) ** 2 for r in valid) / len(valid))
    if std == 0:
        return [None if r is None else 0.0 for r in rewards]
    scale = std + eps if scale_by_std else 1.0
    return [None if r is None else (r - mean) / scale for r in rewards]


@dataclass(frozen=True)
class SegmentedRollout:
    """One rollout of a group: its segments (in order) and the advantage they all share."""

    run_id: str
    segments: list[Segment]
    advantage: float | None


def segment_group(
    trajectories: Sequence[Trajectory],
    rewards: Sequence[float | None],
    tokenizer: Any,
    *,
    run_ids: Sequence[str],
    prefix_mismatch: PrefixMismatch = "raise",
    scale_by_std: bool = True,
    eps: float = 1e-6,
) -> list[SegmentedRollout]:
    """Each of one group's rollouts cut into segments (``segment_trajectory`` with the
    policy's ``tokenizer``), every segment carrying its rollout's group advantage.

    ``rewards[i]`` is what rollout ``i`` is trained on (its grade, or ``None`` for no outcome);
    ``run_ids[i]`` tells its segments apart from other runs of the same task.
    """
    if not len(trajectories) == len(rewards) == len(run_ids):
        raise ValueError(
            f"segment_group: {len(trajectories)} trajectories, {len(rewards)} rewards and "
            f"{len(run_ids)} run ids; one of each per rollout"
        )
    advantages = group_advantages(rewards, scale_by_std=scale_by_std, eps=eps)
    return [
        SegmentedRollout(
            run_id=run_id,
            segments=segment_trajectory(
                trajectory, tokenizer, run_id=run_id, prefix_mismatch=prefix_mismatch
            ),
            advantage=advantage,
        )
        for trajectory, advantage, run_id in zip(trajectories, advantages, run_ids, strict=True)
    ]


__all__ = ["SegmentedRollout", "group_advantages", "segment_group"]
