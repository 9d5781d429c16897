"""Every budget from one run.

A policy that does not see its remaining budget acts the same under any budget until the budget
stops it, so a run at the highest budget holds every lower-budget run as a prefix. The env's
rule: the model call that pushes the total over the budget is paid for and not executed, and
the workspace as it was before that call is graded. ``BudgetCrossings`` applies that rule for
each lower budget: before a call that would cross one (``env.quote``), it keeps the workspace
diff; ``budget_outcomes`` grades those diffs afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from pydantic import BaseModel

from ac_env.cost import CallCost
from ac_env.grading import grade
from ac_env.sandbox.base import Sandbox, WorkspaceError
from ac_env.tasks import Task
from ac_env.trajectory import Trajectory


@dataclass(frozen=True)
class Crossing:
    """The run at ``budget`` would have ended at model call ``step`` (0-based, paid for, not
    executed), with the workspace holding ``diff`` and ``cost`` spent."""

    budget: float
    step: int
    diff: str
    cost: CallCost


class BudgetCrossings(gym.Wrapper[Any, Any, Any, Any]):
    """Records a ``Crossing`` for each of ``budgets`` the episode's spending passes."""

    def __init__(self, env: gym.Env[Any, Any], budgets: Sequence[float]) -> None:
        super().__init__(env)
        self.budgets = sorted(budgets)
        self.crossings: list[Crossing] = []
        self._steps = 0

    def reset(self, **kwargs: Any) -> Any:
        self.crossings = []
        self._steps = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        base = self.env.unwrapped
        total = base.meter.total  # type: ignore[attr-defined]
        pending = self.budgets[len(self.crossings) :]
        if pending and total.usd + base.quote(action).usd > pending[0]:  # type: ignore[attr-defined]
            diff = _workspace_patch(base.sandbox)  # type: ignore[attr-defined]
            result = self.env.step(action)
            after = base.meter.total  # type: ignore[attr-defined]
            for budget in pending:
                if after.usd > budget:
                    self.crossings.append(Crossing(budget, self._steps, diff, after))
        else:
            result = self.env.step(action)
        self._steps += 1
        return result


def _workspace_patch(sandbox: Sandbox) -> str:
    """The workspace's diff; an empty patch (nothing fixed: reward 0) when what the agent did
    makes it unreadable (``WorkspaceError``), so that it cannot pass as an infra error."""
    try:
        return sandbox.diff()
    except WorkspaceError:
        return ""


class BudgetOutcome(BaseModel):
    """How the episode ends at one budget."""

    budget: float
    reward: float | None
    exit_reason: str
    steps: int
    cost: CallCost
    infra_error: str | None = None


def budget_outcomes(
    trajectory: Trajectory,
    crossings: Sequence[Crossing],
    budgets: Sequence[float],
    task: Task,
    make_sandbox: Callable[[], Sandbox],
    grading_timeout: float,
) -> list[BudgetOutcome]:
    """One outcome per budget: the run's own end where it was not crossed, else the crossing's
    workspace graded in a fresh sandbox (a diff equal to the final patch reuses its grade)."""
    end = trajectory.end
    if end is None:
        raise ValueError(f"trajectory of {trajectory.header.instance_id} has no end")
    steps = len(trajectory.model_calls())
    graded: dict[str, tuple[float | None, str | None]] = {end.patch: (end.reward, end.infra_error)}
    by_budget = {c.budget: c for c in crossings}
    outcomes = []
    for budget in sorted(budgets):
        crossing = by_budget.get(budget)
        if crossing is None:
            outcomes.append(
                BudgetOutcome(
                    budget=budget,
                    reward=end.reward,
                    exit_reason=end.exit_reason,
                    steps=steps,
                    cost=end.cost,
                    infra_error=end.infra_error,
                )
            )
            continue
        if crossing.diff not in graded:
            result = grade(task, crossing.diff, make_sandbox(), grading_timeout)
            graded[crossing.diff] = (result.reward, result.infra_error)
        reward, infra_error = graded[crossing.diff]
        outcomes.append(
            BudgetOutcome(
                budget=budget,
                reward=reward,
                exit_reason="budget",
                steps=crossing.step + 1,
                cost=crossing.cost,
                infra_error=infra_error,
            )
        )
    return outcomes
