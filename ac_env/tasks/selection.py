"""Choosing tasks by split, subset and id, with errors that list the valid values."""

from __future__ import annotations

from collections.abc import Sequence


def choose_ids(available: list[str], task_ids: Sequence[str]) -> list[int]:
    """Positions of ``task_ids`` in ``available``, in the order given."""
    index = {instance_id: position for position, instance_id in enumerate(available)}
    unknown = [instance_id for instance_id in task_ids if instance_id not in index]
    if unknown:
        raise ValueError(
            f"unknown task id(s) {', '.join(unknown)}; valid ids: {', '.join(available)}"
        )
    return [index[instance_id] for instance_id in task_ids]


def check_choice(kind: str, value: str, valid: Sequence[str]) -> None:
    if value not in valid:
        raise ValueError(f"unknown {kind} {value!r}; valid {kind}s: {', '.join(valid)}")
