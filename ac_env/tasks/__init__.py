"""Tasks: the record (``Task``, ``GroundTruth``) and the sources they are loaded from.

``load_tasks()`` gives the built-in synthetic suite; ``load_tasks("tasks.jsonl")`` reads a
SWE-bench-format file.
"""

from __future__ import annotations

from collections.abc import Sequence

from ac_env.tasks.model import GroundTruth, Task
from ac_env.tasks.swebench_file import TaskFileError, read_task_file
from ac_env.tasks.synthetic.profiles import PROFILES, SUBSETS
from ac_env.tasks.synthetic.suite import builtin_tasks, plan_suite, task_subset

__all__ = ["GroundTruth", "Task", "TaskFileError", "load_tasks", "task_subset"]

BUILTIN = "builtin"


def _choose_ids(available: list[str], task_ids: Sequence[str]) -> list[int]:
    """Positions of ``task_ids`` in ``available``, in the order given."""
    index = {instance_id: position for position, instance_id in enumerate(available)}
    unknown = [instance_id for instance_id in task_ids if instance_id not in index]
    if unknown:
        raise ValueError(
            f"unknown task id(s) {', '.join(unknown)}; valid ids: {', '.join(available)}"
        )
    return [index[instance_id] for instance_id in task_ids]


def _check_choice(kind: str, value: str, valid: Sequence[str]) -> None:
    if value not in valid:
        raise ValueError(f"unknown {kind} {value!r}; valid {kind}s: {', '.join(valid)}")


def load_tasks(
    source: str = BUILTIN,
    split: str | None = None,
    task_ids: Sequence[str] | None = None,
    subset: str | None = None,
) -> list[Task]:
    """Tasks from ``source``: ``"builtin"`` (the synthetic suite, ordered by split, subset,
    seed) or a path to a SWE-bench-format ``.jsonl``/``.json`` file.

    ``split`` keeps one split; ``subset`` (built-in only) keeps ``train`` or the held-out
    ``eval`` tasks; ``task_ids`` keeps those tasks in the order given. Unknown values raise
    ``ValueError`` listing the valid ones. Built-in tasks are generated on first use and
    cached (see ``ac_env.tasks.git_repo``).
    """
    if source == BUILTIN:
        plans = list(plan_suite())
        if split is not None:
            _check_choice("split", split, list(PROFILES))
            plans = [plan for plan in plans if plan.split == split]
        if subset is not None:
            _check_choice("subset", subset, SUBSETS)
            plans = [plan for plan in plans if plan.subset == subset]
        if task_ids is not None:
            ids = [plan.instance_id for plan in plans]
            plans = [plans[position] for position in _choose_ids(ids, task_ids)]
        return builtin_tasks(plans)
    if subset is not None:
        raise ValueError("subset applies to the built-in suite only")
    tasks = read_task_file(source)
    if split is not None:
        _check_choice("split", split, sorted({task.split for task in tasks}))
        tasks = [task for task in tasks if task.split == split]
    if task_ids is not None:
        tasks = [tasks[p] for p in _choose_ids([t.instance_id for t in tasks], task_ids)]
    return tasks
