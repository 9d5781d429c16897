"""``ac-env tasks pack``: turn a mining build directory into the real-code suite's data.

Per built library (``<build>/<slug>/``) the unmutated base tree (``repo/`` without ``.git``)
becomes ``<slug>.tar.xz`` (deterministic: sorted members, no owners, fixed times), and every
task of ``tasks.jsonl`` (one bug) and ``long.jsonl`` (several) becomes a line of
``tasks.jsonl.xz`` without its snapshot: ``ac_env.tasks.real`` rebuilds each repository from
the tree and the gold patch. Subsets: every task of a held-out library, and about one in
``eval_every`` of the others' (chosen by a hash of the instance id), are ``eval``. With
``max_per_function``, a function keeps only its first that many one-bug tasks (in mining
order), so a library whose bugs cluster in one function does not dominate the suite.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import os
import tarfile
from collections import Counter
from collections.abc import Sequence
from email.parser import HeaderParser
from pathlib import Path

from ac_env.mining.build import LibraryReport
from ac_env.paths import safe_child
from ac_env.tasks.model import Task
from ac_env.tasks.real.manifest import LibraryEntry, Manifest, Subset, TaskRow
from ac_env.tasks.swebench_file import read_task_file

LICENSE_PREFIXES = ("license", "licence", "copying", "notice", "authors")
_XZ_PRESET = 9 | lzma.PRESET_EXTREME


def _tree_files(repo: Path) -> list[Path]:
    files = []
    for directory, subdirs, names in os.walk(repo):
        here = Path(directory)
        subdirs[:] = [d for d in subdirs if d != ".git" or here != repo]
        files += [here / name for name in names]
        files += [here / name for name in subdirs if (here / name).is_symlink()]
    return sorted(files, key=lambda path: path.relative_to(repo).as_posix())


def write_tree_archive(repo: Path, target: Path) -> str:
    """``repo``'s files (not ``.git``) as a reproducible ``.tar.xz``; returns its sha256."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in _tree_files(repo):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(repo).as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            info.mode = 0o755 if info.mode & 0o111 else 0o644
            if info.isreg():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            elif info.issym():
                tar.addfile(info)
    data = lzma.compress(buffer.getvalue(), preset=_XZ_PRESET)
    target.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def license_of(repo: Path) -> tuple[str, list[str]]:
    """The licence the sdist's ``PKG-INFO`` names, and the licence files at its top."""
    license_name = "unknown"
    metadata = repo / "PKG-INFO"
    if metadata.is_file():
        headers = HeaderParser().parsestr(metadata.read_text(encoding="utf-8", errors="replace"))
        expression = headers.get("License-Expression") or ""
        classifiers = [
            value.rsplit("::", 1)[-1].strip()
            for value in headers.get_all("Classifier") or []
            if value.startswith("License ::")
        ]
        short = (headers.get("License") or "").strip().splitlines()
        license_name = (
            expression
            or (classifiers[0] if classifiers else "")
            or (short[0] if short and len(short[0]) < 80 else "unknown")
        )
    files = sorted(
        path.name
        for path in repo.iterdir()
        if path.is_file() and path.name.lower().startswith(LICENSE_PREFIXES)
    )
    return license_name, files


def _subset(instance_id: str, held_out: bool, eval_every: int) -> Subset:
    if held_out:
        return "eval"
    digest = int(hashlib.sha256(instance_id.encode()).hexdigest(), 16)
    return "eval" if digest % eval_every == 0 else "train"


def _spread(tasks: list[Task], max_per_function: int | None) -> list[Task]:
    if max_per_function is None:
        return tasks
    seen: Counter[str] = Counter()
    kept = []
    for task in tasks:
        functions = task.ground_truth.functions if task.ground_truth else []
        if task.split == "real" and functions:
            seen[functions[0]] += 1
            if seen[functions[0]] > max_per_function:
                continue
        kept.append(task)
    return kept


def write_rows(into: Path, rows: Sequence[TaskRow], entries: Sequence[LibraryEntry]) -> Manifest:
    """Write ``tasks.jsonl.xz`` and ``manifest.json`` (whose ``suite_version`` is a digest of
    both, so any change to a task moves the suite to a new cache folder)."""
    lines = "".join(row.model_dump_json() + "\n" for row in rows)
    (into / "tasks.jsonl.xz").write_bytes(lzma.compress(lines.encode(), preset=_XZ_PRESET))
    fingerprint = hashlib.sha256(lines.encode())
    for entry in entries:
        fingerprint.update(entry.archive_sha256.encode())
    manifest = Manifest(suite_version=fingerprint.hexdigest()[:12], libraries=list(entries))
    (into / "manifest.json").write_text(manifest.model_dump_json(indent=1) + "\n")
    return manifest


def pack_suite(
    build_dir: Path,
    into: Path,
    held_out: Sequence[str] = (),
    eval_every: int = 5,
    max_per_function: int | None = None,
) -> Manifest:
    """Write ``into`` (``manifest.json``, ``tasks.jsonl.xz``, one archive per library) from
    every built library of ``build_dir`` that has tasks; older archives there are removed."""
    into.mkdir(parents=True, exist_ok=True)
    entries: list[LibraryEntry] = []
    rows: list[TaskRow] = []
    names_held_out = set(held_out)
    for report_path in sorted(build_dir.glob("*/report.json")):
        library_dir = report_path.parent
        report = LibraryReport.model_validate_json(report_path.read_text())
        task_files = [library_dir / "tasks.jsonl", library_dir / "long.jsonl"]
        tasks = [t for path in task_files if path.is_file() for t in read_task_file(path)]
        tasks = _spread(tasks, max_per_function)
        if report.status != "built" or not tasks:
            continue
        name, version = report.library.split(" ", 1)
        slug = library_dir.name
        repo = library_dir / "repo"
        sha = write_tree_archive(repo, safe_child(into, f"{slug}.tar.xz"))
        license_name, license_files = license_of(repo)
        is_held_out = name in names_held_out or slug in names_held_out
        entries.append(
            LibraryEntry(
                slug=slug,
                name=name,
                version=version,
                license=license_name,
                license_files=license_files,
                commit_message=f"Import {name} {version}",
                archive_sha256=sha,
                held_out=is_held_out,
            )
        )
        rows += [
            TaskRow(
                library=slug,
                subset=_subset(task.instance_id, is_held_out, eval_every),
                task=task.model_copy(update={"snapshot_dir": None}),
            )
            for task in tasks
        ]
    unknown = names_held_out - {e.name for e in entries} - {e.slug for e in entries}
    if unknown:
        raise ValueError(f"held-out libraries not in {build_dir}: {', '.join(sorted(unknown))}")
    manifest = write_rows(into, rows, entries)
    keep = {f"{entry.slug}.tar.xz" for entry in entries}
    for stale in into.glob("*.tar.xz"):
        if stale.name not in keep:
            stale.unlink()
    return manifest
