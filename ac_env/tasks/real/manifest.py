"""The records of the real-code suite shipped in the package (``ac_env/tasks/real/data/``).

``manifest.json`` names the suite's version and its libraries; ``tasks.jsonl.xz`` holds one
``TaskRow`` per line. A library's base tree (its sdist as published, licence included) is
``<slug>.tar.xz``; a task's buggy repository is that tree with the task's gold patch applied
in reverse.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ac_env.paths import check_name
from ac_env.tasks.model import Task

Subset = Literal["train", "eval"]
SUBSETS: tuple[Subset, ...] = ("train", "eval")


class LibraryEntry(BaseModel):
    """One library of the suite: where its base tree is and what it may be used under."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slug: str = Field(description="``<name>-<version>``; names the archive and the cache folder")
    name: str
    version: str
    license: str = Field(description="the licence as the sdist's metadata names it")
    license_files: list[str] = Field(description="the licence texts inside the base tree")
    commit_message: str = Field(description="message of every task repository's one commit")
    archive_sha256: str
    held_out: bool = Field(description="every task of this library is in the eval subset")

    @field_validator("slug")
    @classmethod
    def _safe_slug(cls, value: str) -> str:
        return check_name(value)


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    suite_version: str = Field(description="changes whenever any task or tree changes")
    libraries: list[LibraryEntry]

    def library(self, slug: str) -> LibraryEntry:
        for entry in self.libraries:
            if entry.slug == slug:
                return entry
        raise KeyError(f"no library {slug!r} in the real-code suite")


class TaskRow(BaseModel):
    """One line of ``tasks.jsonl.xz``: a task (without ``snapshot_dir``) and its place."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    library: str
    subset: Subset
    task: Task
