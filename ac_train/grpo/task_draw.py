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

With ``favour_mixed`` the eligible tasks are not drawn uniformly: the ``count`` with the
highest posterior chance of a mixed group of ``group_size`` are drawn, ties in random order.
Each task's pass-rate posterior (``ac_train.grpo.start_probe.pass_rates``) is fitted to the rewards
``seen`` of it: a probe of the starting policy, if one ran, then every group's. So a task whose
group was mixed is drawn again while it stays mixed, and a task never tried takes the pool's
prior; skipping is what rotates them: a favourite whose group came out uniform steps aside for
``k`` steps and the next-likeliest task takes its place. (Thompson sampling, drawing a pass
rate from each posterior and taking the best, was tried first: on a pool of 16 settled starts
and 2 mixed ones the luckiest of the 16 beat both mixed starts in nearly half the steps, 52%
mixed draws against 100% here.)
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from ac_train.grpo.start_probe import pass_rates


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
    favour_mixed: bool = False
    """draw the eligible tasks likeliest to give a mixed group (False: uniformly)"""
    group_size: int = 2
    """the rollouts of a group (what ``favour_mixed`` draws are scored for)"""
    seen: dict[str, list[float]] = field(default_factory=dict)
    """task id -> the rewards of its rollouts so far (a probe's, then every group's)"""
    uniform_at: dict[str, int] = field(default_factory=dict)
    """task id -> the step of its latest group, for tasks whose latest group was uniform"""

    def draw(self, step: int, count: int) -> list[str]:
        rng = random.Random(f"{self.seed}:{step}")
        k = self.skip_uniform_for
        skipped = {task_id for task_id, at in self.uniform_at.items() if k and step - at <= k}
        eligible = [task_id for task_id in self.task_ids if task_id not in skipped]
        if len(eligible) >= count:
            return self._sample(rng, eligible, count)
        in_order = [task_id for task_id in self.task_ids if task_id in skipped]
        oldest_first = sorted(in_order, key=lambda task_id: self.uniform_at[task_id])
        return eligible + oldest_first[: count - len(eligible)]

    def _sample(self, rng: random.Random, task_ids: list[str], count: int) -> list[str]:
        if not self.favour_mixed:
            return rng.sample(task_ids, count)
        rates, shuffled = pass_rates(self.seen, task_ids), rng.sample(task_ids, len(task_ids))
        chance = {t: rates[t].informative_chance(self.group_size) for t in task_ids}
        return sorted(shuffled, key=chance.__getitem__, reverse=True)[:count]

    def record(self, step: int, groups: Iterable[GroupOutcome]) -> None:
        for group in groups:
            rewards = [reward for reward in group.rewards if reward is not None]
            self.seen.setdefault(group.task_id, []).extend(rewards)
            if group.uniform:
                self.uniform_at[group.task_id] = step
            elif group.informative:
                self.uniform_at.pop(group.task_id, None)
