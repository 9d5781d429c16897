"""Tasks: the record (``Task``, ``GroundTruth``) and the sources they are loaded from.

``load_tasks()`` gives the built-in synthetic suite; ``load_tasks("real")`` the real-code
suite shipped in the package (``ac_env.tasks.real``); ``load_tasks("tasks.jsonl")`` reads a
SWE-bench-format file.
"""

from __future__ import annotations

from collections.abc import Sequence

from ac_env.tasks.model import GroundTruth, Task
from ac_env.tasks.real.suite import real_tasks
from ac_env.tasks.selection import check_choice, choose_ids
from ac_env.tasks.swebench_file import TaskFileError, read_task_file
from ac_env.tasks.synthetic.profiles import PROFILES, SUBSETS
from ac_env.tasks.synthetic.suite import builtin_tasks, plan_suite, task_subset

__all__ = ["GroundTruth", "Task", "TaskFileError", "load_tasks", "task_subset"]

BUILTIN = "builtin"
REAL = "real"


def load_tasks(
    source: str = BUILTIN,
    split: str | None = None,
    task_ids: Sequence[str] | None = None,
    subset: str | None = None,
) -> list[Task]:
    """Tasks from ``source``: ``"builtin"`` (the synthetic suite, ordered by split, subset,
    seed), ``"real"`` (bugs in real libraries: splits ``real`` and ``long``) or a path to a
    SWE-bench-format ``.jsonl``/``.json`` file.

    ``split`` keeps one split; ``subset`` (the two suites only) keeps ``train`` or the
    held-out ``eval`` tasks; ``task_ids`` keeps those tasks in the order given. Unknown values
    raise ``ValueError`` listing the valid ones. The suites' repositories are written on first
    use and cached (see ``ac_env.tasks.git_repo``).
    """
    if source == BUILTIN:
        plans = list(plan_suite())
        if split is not None:
            check_choice("split", split, list(PROFILES))
            plans = [plan for plan in plans if plan.split == split]
        if subset is not None:
            check_choice("subset", subset, SUBSETS)
            plans = [plan for plan in plans if plan.subset == subset]
        if task_ids is not None:
            ids = [plan.instance_id for plan in plans]
            plans = [plans[position] for position in choose_ids(ids, task_ids)]
        return builtin_tasks(plans)
    if source == REAL:
        return real_tasks(split, subset, task_ids)
    if subset is not None:
        raise ValueError("subset applies to the built-in and real-code suites only")
    tasks = read_task_file(source)
    if split is not None:
        check_choice("split", split, sorted({task.split for task in tasks}))
        tasks = [task for task in tasks if task.split == split]
    if task_ids is not None:
        tasks = [tasks[p] for p in choose_ids([t.instance_id for t in tasks], task_ids)]
    return tasks
