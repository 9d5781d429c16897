"""Which tasks (or demonstration start states) a GRPO step draws.

A group whose rewards are all equal gives every rollout an advantage of zero: it adds no
gradient, and its rollouts were paid for nothing. On a curriculum of start states most are
settled for the current policy (always solved or never), and uniform draws keep paying for
them. With ``skip_uniform_for = k``, a task whose latest group was uniform is not drawn in the
next ``k`` steps, so the draws go to tasks not tried yet and to those whose latest group was
mixed (DAPO's dynamic sampling keeps only mixed groups after sampling them; this avoids
sampling the ones known to be settled). A skipped task comes back after ``k`` steps, since
the policy that settled it keeps changing; when fewer tasks are eligible than a step needs,
the ones skipped longest ago fill in. ``k = 0`` draws uniformly, exactly as without it.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field


class GroupOutcome(BaseModel):
    """One group of a step, as ``metrics.jsonl`` records it."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(description="the task, or the start state (``<task>@-<steps left>``)")
    rewards: list[float | None] = Field(
        description="the rewards trained on, in rollout order (None: an infra error or masked)"
    )

    @property
    def informative(self) -> bool:
        """The rewards trained on differ: the group has a gradient."""
        return len(self._trained()) > 1

    @property
    def uniform(self) -> bool:
        """Every reward trained on is the same (and there is one): no gradient."""
        return len(self._trained()) == 1

    def _trained(self) -> set[float]:
        return {reward for reward in self.rewards if reward is not None}


@dataclass
class TaskDraw:
    """Draws each step's tasks from ``task_ids``; ``record`` tells it each step's groups."""

    task_ids: list[str]
    seed: int
    skip_uniform_for: int = 0
    uniform_at: dict[str, int] = field(default_factory=dict)
    """task id -> the step of its latest group, for tasks whose latest group was uniform"""

    def draw(self, step: int, count: int) -> list[str]:
        rng = random.Random(f"{self.seed}:{step}")
        if self.skip_uniform_for == 0:
            return rng.sample(self.task_ids, count)
        skipped = {
            task_id for task_id, at in self.uniform_at.items() if step - at <= self.skip_uniform_for
        }
        eligible = [task_id for task_id in self.task_ids if task_id not in skipped]
        if len(eligible) >= count:
            return rng.sample(eligible, count)
        in_order = [task_id for task_id in self.task_ids if task_id in skipped]
        oldest_first = sorted(in_order, key=lambda task_id: self.uniform_at[task_id])
        return eligible + oldest_first[: count - len(eligible)]

    def record(self, step: int, groups: Iterable[GroupOutcome]) -> None:
        for group in groups:
            if group.uniform:
                self.uniform_at[group.task_id] = step
            elif group.informative:
                self.uniform_at.pop(group.task_id, None)
