"""An episode's state at one moment: what ``AutoCompactSWEEnv.snapshot()`` returns and
``restore(snapshot)`` continues from, in the same env or in another one (the counterfactual
fork, ``ac_env.bench.fork``, continues one snapshot twice).

A snapshot holds everything the env keeps per episode: the task; the workspace (the sandbox's
archive: the repo with uncommitted edits, untracked files and its .git, and the sandbox's
/tmp); the context (messages with their ids and token counts, the segment index); the cost
meter (totals, and the previous prompt that the next call's cached prefix is measured
against); the step count; a pending summary request (forced, or after a ``compact`` call);
the commands run so far (the fallback summarizer reads them); the wall-clock time spent; the
env's random generator; the trajectory so far; the last render.

It does not hold the env's configuration: a restored episode continues under the
configuration of the env that restores it (the same one, for an exact continuation). Nor does
it hold the state of wrappers around the env, nor of the policy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ac_env.compaction import CommandRecord, Trigger
from ac_env.context import Context
from ac_env.cost import CostMeter
from ac_env.tasks import Task
from ac_env.trajectory import Trajectory


@dataclass(frozen=True)
class EpisodeSnapshot:
    """Private copies throughout: continuing an episode never changes its snapshot, so one
    snapshot can be restored any number of times."""

    task: Task
    workspace: bytes
    context: Context
    meter: CostMeter
    trajectory: Trajectory
    steps: int
    compaction_pending: Trigger | None
    commands: tuple[CommandRecord, ...]
    elapsed_s: float
    np_random: np.random.Generator | None
    np_random_seed: int | None
    last_render: str


def copy_trajectory(trajectory: Trajectory) -> Trajectory:
    """A trajectory that can grow apart from ``trajectory`` (events are never changed once
    appended, so they are shared)."""
    twin = Trajectory(trajectory.header.model_copy(deep=True))
    twin.events = list(trajectory.events)
    return twin
