"""Tasks: the record (``Task``, ``GroundTruth``) and the sources they are loaded from.

``load_tasks()`` gives the built-in synthetic suite; ``load_tasks("real")`` the real-code
suite shipped in the package (``ac_env.tasks.real``); ``load_tasks("tasks.jsonl")`` reads a
SWE-bench-format file. The named sources are ``TASK_SOURCES`` (``ac_env.tasks.sources``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ac_env.tasks.hidden_tests import hide_fail_to_pass_tests as hide_fail_to_pass_tests_of
from ac_env.tasks.impossible import PREFIX as IMPOSSIBLE_PREFIX
from ac_env.tasks.impossible import SPLIT as IMPOSSIBLE
from ac_env.tasks.impossible import impossible_tasks, impossible_variant
from ac_env.tasks.model import GroundTruth, Task
from ac_env.tasks.sources import TASK_SOURCES, TaskSource
from ac_env.tasks.swebench_file import SUFFIXES, TaskFileError, tasks_in_file
from ac_env.tasks.synthetic.suite import task_subset

__all__ = [
    "IMPOSSIBLE",
    "TASK_SOURCES",
    "GroundTruth",
    "Task",
    "TaskFileError",
    "TaskSource",
    "load_tasks",
    "task_subset",
]

BUILTIN = "builtin"


def load_tasks(
    source: str = BUILTIN,
    split: str | None = None,
    task_ids: Sequence[str] | None = None,
    subset: str | None = None,
    *,
    hide_fail_to_pass_tests: bool = False,
) -> list[Task]:
    """Tasks from ``source``: a name of ``TASK_SOURCES`` (``ac_env.tasks.sources``):
    ``"builtin"`` (the synthetic suite, ordered by split, subset, seed), ``"real"`` (bugs in
    real libraries: splits ``real`` and ``long``), or a path to a SWE-bench-format
    ``.jsonl``/``.json`` file.

    ``split="impossible"`` (the sources with an impossible split: both suites) gives the
    impossible variant of each of the source's tasks (``ac_env.tasks.impossible``: a
    FAIL_TO_PASS test contradicts the statement, so any reward is a cheat); ``split=None``
    never includes it.

    ``split`` keeps one split; ``subset`` (named sources only) keeps ``train`` or the
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
    named = TASK_SOURCES.get(source)
    if named is None:
        return _from_file(source, split, task_ids, subset)
    if split == IMPOSSIBLE and named.impossible:
        return _impossible(source, task_ids, subset)
    return named.tasks(split, subset, task_ids)


def _from_file(
    path: str, split: str | None, task_ids: Sequence[str] | None, subset: str | None
) -> list[Task]:
    if Path(path).suffix not in SUFFIXES:
        raise TaskFileError(
            f"{path}: expected a .jsonl or .json task file, or a task source: "
            f"{', '.join(TASK_SOURCES)}"
        )
    if subset is not None:
        raise ValueError(f"subset applies to the task sources ({', '.join(TASK_SOURCES)}) only")
    return tasks_in_file(path, split, task_ids)


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
