"""Append-only JSONL records (``ac_env.records``): what an interrupted run wrote is read back,
a torn last line is dropped so its work reruns, and a corrupt line elsewhere names its line."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from ac_env.records import append_jsonl, read_jsonl


class Row(BaseModel):
    key: str
    value: int


def test_appended_records_read_back_in_order(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    assert read_jsonl(path, Row) == []
    for n in range(3):
        append_jsonl(path, Row(key=f"k{n}", value=n))
    assert [row.value for row in read_jsonl(path, Row)] == [0, 1, 2]


def test_a_torn_last_line_is_dropped_and_the_next_record_starts_clean(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    append_jsonl(path, Row(key="a", value=1))
    with path.open("a") as handle:
        handle.write('{"key": "b", "val')  # the process died mid-write
    assert read_jsonl(path, Row) == [Row(key="a", value=1)]
    append_jsonl(path, Row(key="b", value=2))
    assert [row.key for row in read_jsonl(path, Row)] == ["a", "b"]


def test_a_corrupt_line_before_the_last_is_an_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"key": "a", "value": 1}\nnot json\n{"key": "c", "value": 3}\n')
    with pytest.raises(ValueError, match=r"rows\.jsonl:2: not a Row"):
        read_jsonl(path, Row)
    assert len(path.read_text().splitlines()) == 3  # nothing was dropped
