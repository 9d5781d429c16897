"""Task sources: the names ``load_tasks`` and the env's ``task_source`` keyword take.

``TASK_SOURCES`` maps each name to what it means (the configuration's and the CLIs' help text
read it), the function that loads its tasks (``"module:function"``, imported only when the
name is used), the split a configuration picks when it names none, and whether it has an
impossible split. Any other ``task_source`` is the path of a SWE-bench-format task file
(``ac_env.tasks.swebench_file``). A new source is one module with its loader and one entry
here; ``docs/extending.md`` walks through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ac_env.lazy_import import import_target
from ac_env.tasks.model import Task


@dataclass(frozen=True)
class TaskSource:
    """One named task source.

    ``load``: ``"module:function"``; the function takes the keywords ``split``, ``subset`` and
    ``task_ids`` (None: no filter), returns the tasks (in ``task_ids``'s order when given) and
    raises ``ValueError`` listing the valid values of one it does not know.
    ``default_split``: the split a configuration picks when it names none (None: every split
    but the impossible one). ``impossible``: ``split="impossible"`` gives the impossible
    variant of each of its tasks (``ac_env.tasks.impossible``); the loader never sees that
    split, but lists it among its valid ones."""

    description: str
    load: str
    default_split: str | None = None
    impossible: bool = False

    def tasks(
        self, split: str | None, subset: str | None, task_ids: Sequence[str] | None
    ) -> list[Task]:
        tasks: list[Task] = import_target(self.load)(split=split, subset=subset, task_ids=task_ids)
        return tasks


TASK_SOURCES: dict[str, TaskSource] = {
    "builtin": TaskSource(
        "the synthetic suite shipped in the package",
        "ac_env.tasks.synthetic.suite:suite_tasks",
        default_split="easy",
        impossible=True,
    ),
    "real": TaskSource(
        "bugs in real libraries, shipped in the package",
        "ac_env.tasks.real.suite:real_tasks",
        impossible=True,
    ),
}
"""Task source name -> what it is and how its tasks load."""


def task_source_help() -> str:
    """Each name with what it means, for help texts."""
    return ", ".join(f"'{name}' ({source.description})" for name, source in TASK_SOURCES.items())


def default_split(task_source: str) -> str | None:
    """The split a configuration picks for ``task_source`` when it names none (a task file:
    every split)."""
    source = TASK_SOURCES.get(task_source)
    return source.default_split if source is not None else None
