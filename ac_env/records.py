"""Append-only JSONL files of pydantic records: what every resumable run writes (benchmark
episodes, mined mutants and tasks, solo runs, long-task groups).

A record is appended, flushed and synced as soon as it is known, so an interrupted run loses
at most the line it was writing. Reading drops that torn last line from the file (its work
reruns and appends it again on a line of its own); any other line that is not a record is an
error naming the file and the line, and nothing is dropped.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

logger = logging.getLogger(__name__)

Record = TypeVar("Record", bound=BaseModel)


def read_jsonl(path: Path, model: type[Record]) -> list[Record]:
    """The records of ``path`` (none if it does not exist)."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            records.append(model.model_validate_json(line))
        except ValidationError as err:
            if number == len(lines):
                logger.warning("%s:%d: dropping an incomplete record", path, number)
                write_atomic(path, "".join(f"{kept}\n" for kept in lines[:-1]))
                break
            raise ValueError(f"{path}:{number}: not a {model.__name__}: {err}") from err
    return records


def append_jsonl(path: Path, record: BaseModel) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(record.model_dump_json() + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path``'s content at once: a reader sees the old text or the new, never half."""
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    staging.write_text(text, encoding="utf-8")
    staging.replace(path)
