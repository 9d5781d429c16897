"""Tasks: the record (``Task``, ``GroundTruth``) and the sources they are loaded from.

``load_tasks()`` gives the built-in synthetic suite; ``load_tasks("real")`` the real-code
suite shipped in the package (``ac_env.tasks.real``); ``load_tasks("tasks.jsonl")`` reads a
SWE-bench-format file.
"""

from __future__ import annotations

from collections.abc import Sequence

from ac_env.tasks.hidden_tests import hide_fail_to_pass_tests as hide_fail_to_pass_tests_of
from ac_env.tasks.impossible import PREFIX as IMPOSSIBLE_PREFIX
from ac_env.tasks.impossible import impossible_tasks, impossible_variant
from ac_env.tasks.model import GroundTruth, Task
from ac_env.tasks.real.suite import real_tasks
from ac_env.tasks.selection import check_choice, choose_ids
from ac_env.tasks.swebench_file import TaskFileError, read_task_file
from ac_env.tasks.synthetic.profiles import PROFILES, SUBSETS
from ac_env.tasks.synthetic.suite import builtin_tasks, plan_suite, task_subset

__all__ = ["IMPOSSIBLE", "GroundTruth", "Task", "TaskFileError", "load_tasks", "task_subset"]

BUILTIN = "builtin"
REAL = "real"
IMPOSSIBLE = "impossible"


def load_tasks(
    source: str = BUILTIN,
    split: str | None = None,
    task_ids: Sequence[str] | None = None,
    subset: str | None = None,
    *,
    hide_fail_to_pass_tests: bool = False,
) -> list[Task]:
    """Tasks from ``source``: ``"builtin"`` (the synthetic suite, ordered by split, subset,
    seed), ``"real"`` (bugs in real libraries: splits ``real`` and ``long``) or a path to a
    SWE-bench-format ``.jsonl``/``.json`` file.

    ``split="impossible"`` (the two suites) gives the impossible variant of each of the
    suite's tasks (``ac_env.tasks.impossible``: a FAIL_TO_PASS test contradicts the
    statement, so any reward is a cheat); ``split=None`` never includes it.

    ``split`` keeps one split; ``subset`` (the two suites only) keeps ``train`` or the
    held-out ``eval`` tasks; ``task_ids`` keeps those tasks in the order given. Unknown values
    raise ``ValueError`` listing the valid ones. ``hide_fail_to_pass_tests`` takes the
    FAIL_TO_PASS tests' functions out of each task's workspace until grading
    (``ac_env.tasks.hidden_tests``). The suites' repositories are written on first use and
    cached (see ``ac_env.tasks.git_repo``).
    """
    tasks = _load(source, split, task_ids, subset)
    if hide_fail_to_pass_tests:
        return [hide_fail_to_pass_tests_of(task) for task in tasks]
    return tasks


def _load(
    source: str, split: str | None, task_ids: Sequence[str] | None, subset: str | None
) -> list[Task]:
    if split == IMPOSSIBLE and source in (BUILTIN, REAL):
        return _impossible(source, task_ids, subset)
    if source == BUILTIN:
        plans = list(plan_suite())
        if split is not None:
            check_choice("split", split, [*PROFILES, IMPOSSIBLE])
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


def _impossible(source: str, task_ids: Sequence[str] | None, subset: str | None) -> list[Task]:
    """The impossible variants of the suite's tasks (of ``task_ids`` only, when given)."""
    if task_ids is None:
        return impossible_tasks(load_tasks(source, None, None, subset))
    bad = [task_id for task_id in task_ids if not task_id.startswith(IMPOSSIBLE_PREFIX)]
    if bad:
        raise ValueError(
            f"unknown task id(s) {', '.join(bad)}: impossible tasks are named "
            f"{IMPOSSIBLE_PREFIX}<instance id>"
        )
    base = load_tasks(source, None, [i.removeprefix(IMPOSSIBLE_PREFIX) for i in task_ids], subset)
    tasks = []
    for task in base:
        variant = impossible_variant(task)
        if variant is None:
            raise ValueError(f"task {task.instance_id} has no impossible variant")
        tasks.append(variant)
    return tasks
