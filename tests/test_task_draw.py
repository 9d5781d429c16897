import random

import pytest
from pydantic import ValidationError

from ac_train.grpo.task_draw import GroupOutcome, TaskDraw

TASKS = [f"task-{i}" for i in range(6)]


def group(task_id: str, *rewards: float | None) -> GroupOutcome:
    return GroupOutcome(task_id=task_id, rewards=list(rewards))


def test_without_skipping_the_draws_are_the_uniform_ones_of_earlier_runs():
    draw = TaskDraw(TASKS, seed=3)
    draw.record(0, [group("task-1", 1.0, 1.0)])  # ignored when skip_uniform_for is 0
    for step in range(5):
        assert draw.draw(step, 2) == random.Random(f"3:{step}").sample(TASKS, 2)


def test_a_group_is_uniform_when_every_reward_trained_on_is_the_same():
    assert group("t", 1.0, 1.0).uniform and group("t", 0.0, None, 0.0).uniform
    assert not group("t", 1.0, 0.0).uniform
    assert not group("t", None, None).uniform  # no outcome: nothing known
    with pytest.raises(ValidationError, match="rewards"):
        GroupOutcome(task_id="t", rewards="1,0")  # type: ignore[arg-type]


def test_a_settled_task_is_skipped_for_k_steps_then_comes_back():
    draw = TaskDraw(TASKS, seed=0, skip_uniform_for=3)
    draw.record(0, [group("task-0", 0.0, 0.0), group("task-1", 1.0, 0.0)])
    for step in range(1, 4):  # the 5 others, in the draw's order
        assert sorted(draw.draw(step, 5)) == [t for t in TASKS if t != "task-0"]
    assert sorted(draw.draw(4, 6)) == TASKS
    # a mixed group makes a settled task eligible again at once
    draw.record(5, [group("task-2", 1.0, 1.0)])
    draw.record(6, [group("task-2", 0.0, 1.0)])
    assert "task-2" not in draw.uniform_at


def test_when_too_few_are_eligible_the_ones_skipped_longest_ago_fill_in():
    draw = TaskDraw(TASKS[:3], seed=0, skip_uniform_for=10)
    draw.record(0, [group("task-2", 0.0, 0.0)])
    draw.record(1, [group("task-0", 1.0, 1.0)])
    draw.record(2, [group("task-1", 0.0, 0.0)])
    assert draw.draw(3, 1) == ["task-2"]
    assert draw.draw(3, 2) == ["task-2", "task-0"]
