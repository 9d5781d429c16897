"""Load the real-code suite and materialise its task repositories in the cache on first use.

A library's base tree is unpacked once into ``<cache>/real/<suite-version>/base/<slug>/``;
a task's repository, ``<cache>/real/<suite-version>/repos/<instance_id>/``, is that tree with
the task's gold patch applied in reverse, committed once with the fixed identity and date
the miner used, so its commit is the task's ``base_commit`` (checked: a mismatch means the
data or the cache is corrupt, and is an error).
"""

from __future__ import annotations

import hashlib
import lzma
import shutil
import tarfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from pydantic import ValidationError
from tqdm import tqdm

from ac_env.host_git import HostGitError, git_text
from ac_env.paths import safe_child
from ac_env.tasks.git_repo import cache_root, write_atomically, write_repo
from ac_env.tasks.impossible import SPLIT as IMPOSSIBLE_SPLIT
from ac_env.tasks.model import Task
from ac_env.tasks.real.manifest import SUBSETS, Manifest, TaskRow
from ac_env.tasks.selection import check_choice, choose_ids

DATA_DIR = Path(__file__).parent / "data"
SPLITS = ("real", "long")
_PROGRESS_FROM = 8  # tasks materialised at once before a progress bar is shown


class SuiteDataError(ValueError):
    """The shipped (or given) suite data is malformed; the message names the file and line."""


@cache
def read_manifest(data_dir: Path = DATA_DIR) -> Manifest:
    path = data_dir / "manifest.json"
    try:
        return Manifest.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise SuiteDataError(f"{path}: missing; the real-code suite is not installed") from None
    except ValidationError as error:
        raise SuiteDataError(f"{path}: {error}") from None


@cache
def read_rows(data_dir: Path = DATA_DIR) -> tuple[TaskRow, ...]:
    path = data_dir / "tasks.jsonl.xz"
    manifest = read_manifest(data_dir)
    known = {entry.slug for entry in manifest.libraries}
    rows = []
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                row = TaskRow.model_validate_json(line)
            except ValidationError as error:
                first = error.errors()[0]
                field = ".".join(str(part) for part in first["loc"]) or "line"
                raise SuiteDataError(f"{path}:{number}: {field}: {first['msg']}") from None
            if row.library not in known:
                raise SuiteDataError(f"{path}:{number}: library: unknown {row.library!r}")
            rows.append(row)
    return tuple(rows)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _base_tree(manifest: Manifest, slug: str, data_dir: Path, root: Path) -> Path:
    """The library's unpacked base tree (unpacked now if it is not yet)."""
    target = safe_child(root, "base", slug)
    if target.is_dir():
        return target
    entry = manifest.library(slug)
    archive = safe_child(data_dir, f"{slug}.tar.xz")
    if _sha256(archive) != entry.archive_sha256:
        raise SuiteDataError(f"{archive}: checksum differs from manifest.json's")

    def unpack(staging: Path) -> None:
        with tarfile.open(archive, "r:xz") as tar:
            tar.extractall(staging, filter="data")  # no absolute paths, no links out

    write_atomically(target, unpack)
    return target


def _reverse_apply(patch: str, tree: Path) -> None:
    """Apply ``patch`` in reverse inside ``tree`` (no repository: git must not find one
    above it, or it would apply relative to that repository's root)."""
    try:
        git_text(
            ["apply", "-R", "--whitespace=nowarn", "-"], cwd=tree, stdin=patch, ceiling=tree.parent
        )
    except HostGitError as error:
        raise SuiteDataError(f"the gold patch does not reverse-apply: {error}") from None


def _materialize(row: TaskRow, manifest: Manifest, data_dir: Path, root: Path) -> Task:
    task = row.task
    snapshot = safe_child(root, "repos", task.instance_id)
    if not (snapshot / ".git").is_dir():
        base = _base_tree(manifest, row.library, data_dir, root)

        def populate(staging: Path) -> None:
            shutil.copytree(base, staging, symlinks=True, dirs_exist_ok=True)
            _reverse_apply(task.patch, staging)

        message = manifest.library(row.library).commit_message
        commit = write_repo(snapshot, message, populate)
        if task.base_commit and commit != task.base_commit:
            shutil.rmtree(snapshot, ignore_errors=True)
            raise SuiteDataError(
                f"{task.instance_id}: materialised commit {commit} is not the task's "
                f"base_commit {task.base_commit}"
            )
    return task.model_copy(update={"snapshot_dir": snapshot})


def real_tasks(
    split: str | None = None,
    subset: str | None = None,
    task_ids: Sequence[str] | None = None,
    data_dir: Path = DATA_DIR,
) -> list[Task]:
    """The suite's tasks (``split``: ``"real"``, one bug each, or ``"long"``, several bugs in
    different files; ``subset``: ``"train"`` or ``"eval"``), their repositories ready.

    Unknown values raise ``ValueError`` listing the valid ones.
    """
    manifest = read_manifest(data_dir)
    rows = list(read_rows(data_dir))
    if split is not None:
        check_choice("split", split, [*SPLITS, IMPOSSIBLE_SPLIT])
        rows = [row for row in rows if row.task.split == split]
    if subset is not None:
        check_choice("subset", subset, SUBSETS)
        rows = [row for row in rows if row.subset == subset]
    if task_ids is not None:
        positions = choose_ids([row.task.instance_id for row in rows], task_ids)
        rows = [rows[position] for position in positions]
    root = cache_root() / "real" / manifest.suite_version
    return [
        _materialize(row, manifest, data_dir, root)
        for row in tqdm(
            rows,
            desc="real-code tasks",
            unit="task",
            disable=len(rows) < _PROGRESS_FROM,
            leave=False,
        )
    ]
