"""Read SWE-bench-format task files (``.jsonl``: one task per line; ``.json``: a list).

Rows use SWE-bench's field names. ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` may be lists or, as
in the published datasets, JSON-encoded strings of lists. Rows without a ``split`` get
``swe-bench``. Columns some SWE-bench variants add and AutoCompact does not use
(``IGNORED_COLUMNS``) are dropped; any other unknown column is an error. Errors name the
file, the line where the row starts, and the field:
``tasks.jsonl:17: FAIL_TO_PASS: Input should be a valid list``. A relative ``snapshot_dir``
is relative to the file's directory, so a task file and its snapshots can move together.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ac_env.tasks.model import Task
from ac_env.tasks.selection import check_choice, choose_ids

LIST_FIELDS = ("FAIL_TO_PASS", "PASS_TO_PASS", "test_files")
IGNORED_COLUMNS = frozenset({"difficulty"})
SUFFIXES = (".jsonl", ".json")


class TaskFileError(ValueError):
    """A task file could not be read; the message says where and why."""


def _rows_jsonl(text: str, name: str) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as error:
            raise TaskFileError(f"{name}:{number}: invalid JSON: {error.msg}") from None


def _rows_json(text: str, name: str) -> Iterator[tuple[int, Any]]:
    """Elements of a top-level JSON array with the line each one starts on."""
    decoder = json.JSONDecoder()
    position = len(text) - len(text.lstrip())
    if not text[position:].startswith("["):
        raise TaskFileError(f"{name}:1: expected a JSON list of tasks")
    position += 1
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text):
            raise TaskFileError(f"{name}: unterminated JSON list")
        if text[position] == "]":
            return
        line = text.count("\n", 0, position) + 1
        try:
            row, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            raise TaskFileError(f"{name}:{error.lineno}: invalid JSON: {error.msg}") from None
        yield line, row


def _normalize(row: dict[str, Any], directory: Path) -> dict[str, Any]:
    row = {key: value for key, value in row.items() if key not in IGNORED_COLUMNS}
    snapshot = row.get("snapshot_dir")
    if isinstance(snapshot, str) and snapshot and not Path(snapshot).is_absolute():
        row["snapshot_dir"] = str(directory / snapshot)
    for key in LIST_FIELDS:
        value = row.get(key)
        if isinstance(value, str):
            try:
                decoded = json.loads(value)
            except json.JSONDecodeError:
                continue
            if isinstance(decoded, list):
                row[key] = decoded
    row.setdefault("split", "swe-bench")
    return row


def _describe(error: ValidationError, name: str, line: int) -> str:
    lines = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "row"
        lines.append(f"{name}:{line}: {field}: {item['msg']}")
    return "\n".join(lines)


def read_task_file(path: str | Path) -> list[Task]:
    """Every task in a ``.jsonl`` or ``.json`` file, in file order."""
    path = Path(path)
    name = str(path)
    if path.suffix not in SUFFIXES:
        raise TaskFileError(f"{name}: expected a .jsonl or .json task file")
    if not path.is_file():
        raise TaskFileError(f"{name}: no such task file")
    text = path.read_text()
    rows = _rows_jsonl(text, name) if path.suffix == ".jsonl" else _rows_json(text, name)
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for line, row in rows:
        if not isinstance(row, dict):
            raise TaskFileError(f"{name}:{line}: expected a JSON object, got {type(row).__name__}")
        try:
            task = Task.model_validate(_normalize(row, path.parent.absolute()))
        except ValidationError as error:
            raise TaskFileError(_describe(error, name, line)) from None
        if task.instance_id in seen:
            raise TaskFileError(
                f"{name}:{line}: instance_id: {task.instance_id!r} already "
                f"defined on line {seen[task.instance_id]}"
            )
        seen[task.instance_id] = line
        tasks.append(task)
    return tasks


def tasks_in_file(
    path: str | Path, split: str | None = None, task_ids: Sequence[str] | None = None
) -> list[Task]:
    """The tasks of a task file (of ``split`` only, and ``task_ids`` only, in the order given,
    when given); an unknown split or id raises ``ValueError`` listing the file's."""
    tasks = read_task_file(path)
    if split is not None:
        check_choice("split", split, sorted({task.split for task in tasks}))
        tasks = [task for task in tasks if task.split == split]
    if task_ids is not None:
        tasks = [tasks[p] for p in choose_ids([t.instance_id for t in tasks], task_ids)]
    return tasks
