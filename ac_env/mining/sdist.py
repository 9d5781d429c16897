"""A library's source distribution: fetched from PyPI with pip, unpacked with tar, and made a
one-commit git repository.

``NAME==VERSION`` is fetched with ``pip download --no-binary NAME --no-deps`` (only that
package from source, nothing else built); a path to a local ``.tar.gz`` is used as it is. A
bare ``NAME`` means the latest version with an sdist: it is downloaded once, and the version
is recorded in the build's ``versions.json`` so that later builds (and the library's
directory name) stay on it.
The archive is unpacked with ``tar --no-same-owner`` (so git does not report dubious
ownership) and committed once with every file force-added: the tree is exactly the commit,
so ``git reset --hard && git clean -fdx`` restores it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ac_env.host_git import HostGitError, git_text
from ac_env.paths import check_name

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar")
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_SPEC = re.compile(rf"^(?P<name>{_NAME})==(?P<version>[A-Za-z0-9._+!-]+)$")
_BARE_NAME = re.compile(rf"^{_NAME}$")
VERSIONS_FILE = "versions.json"
"""Where a build records the version each bare ``NAME`` was resolved to."""
_DOWNLOAD_TIMEOUT_S = 300.0


class SourceError(RuntimeError):
    """The library's source could not be had; the message is one line saying why."""


@dataclass(frozen=True)
class Source:
    """Where a library comes from: a PyPI requirement or a local archive."""

    name: str
    version: str
    archive: Path | None = None

    @property
    def slug(self) -> str:
        """``name-version``, the library's directory name in a build."""
        return f"{re.sub(r'[-_.]+', '-', self.name).lower()}-{self.version}"

    def __str__(self) -> str:
        return str(self.archive) if self.archive else f"{self.name}=={self.version}"


def parse_source(spec: str) -> Source:
    """``NAME==VERSION`` or the path of a local sdist archive (``NAME-VERSION.tar.gz``); its
    slug names directories and task ids, so it must be a safe name (``ac_env.paths``)."""
    match = _SPEC.match(spec.strip())
    if match:
        return _checked(Source(match["name"], match["version"]), spec)
    path = Path(spec)
    suffix = next((s for s in ARCHIVE_SUFFIXES if path.name.endswith(s)), None)
    if suffix is None:
        raise ValueError(f"{spec!r}: expected NAME, NAME==VERSION or a path to an sdist archive")
    stem = path.name.removesuffix(suffix)
    name, dash, version = stem.rpartition("-")
    if not dash or not name or not version:
        raise ValueError(f"{spec!r}: an sdist archive is named NAME-VERSION{suffix}")
    return _checked(Source(name, version, path.resolve()), spec)


def _checked(source: Source, spec: str) -> Source:
    try:
        check_name(source.slug, "library")
    except ValueError as error:
        raise ValueError(f"{spec!r}: {error}") from None
    return source


def resolve_latest(spec: str, out: Path) -> str:
    """``spec`` itself, or for a bare ``NAME`` ``NAME==VERSION`` with the version recorded in
    ``out/versions.json``; an unrecorded one is the latest sdist, downloaded here into
    ``out/<slug>/sdist/`` (``SourceError`` when it cannot be had)."""
    if not _BARE_NAME.match(spec.strip()):
        return spec
    name = spec.strip()
    key = re.sub(r"[-_.]+", "-", name).lower()
    record = out / VERSIONS_FILE
    versions: dict[str, str] = json.loads(record.read_text()) if record.is_file() else {}
    if key not in versions:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".latest-{key}-", dir=out) as scratch:
            archive = _pip_download(name, name, Path(scratch))
            version = _archive_version(archive)
            source = _checked(Source(name, version), spec)
            target = out / source.slug / "sdist"
            target.mkdir(parents=True, exist_ok=True)
            if not _archives(target):
                archive.rename(target / archive.name)
        versions[key] = version
        staging = record.with_name(f".{record.name}.tmp")
        staging.write_text(json.dumps(versions, indent=1, sort_keys=True) + "\n")
        staging.replace(record)
    return f"{name}=={versions[key]}"


def _archive_version(archive: Path) -> str:
    suffix = next((s for s in ARCHIVE_SUFFIXES if archive.name.endswith(s)), "")
    _, dash, version = archive.name.removesuffix(suffix).rpartition("-")
    if not dash or not version:
        raise SourceError(f"cannot read a version from the sdist's name {archive.name!r}")
    return version


def fetch_sdist(source: Source, directory: Path) -> Path:
    """The library's sdist archive, downloaded into ``directory`` unless it is there."""
    if source.archive is not None:
        if not source.archive.is_file():
            raise SourceError(f"no such sdist archive: {source.archive}")
        return source.archive
    found = _archives(directory)
    if found:
        return found[0]
    return _pip_download(f"{source.name}=={source.version}", source.name, directory)


def _pip_download(requirement: str, name: str, directory: Path) -> Path:
    """Download ``requirement``'s sdist (nothing else) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        name,
        "--dest",
        str(directory),
        "--quiet",
        requirement,
    ]
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=_DOWNLOAD_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise SourceError(f"pip download ran over {_DOWNLOAD_TIMEOUT_S:g} s") from None
    found = _archives(directory)
    if result.returncode != 0 or not found:
        lines = [line for line in result.stderr.splitlines() if "ERROR" in line]
        detail = lines[0].strip() if lines else f"exit code {result.returncode}, no sdist"
        raise SourceError(f"pip download failed: {detail}")
    return found[0]


def _archives(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.endswith(ARCHIVE_SUFFIXES))


def unpack(archive: Path, target: Path) -> None:
    """Unpack ``archive`` (one top-level directory) so that ``target`` holds its contents."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".unpack-", dir=target.parent) as scratch:
        result = subprocess.run(
            ["tar", "--no-same-owner", "-xf", str(archive), "-C", scratch],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise SourceError(f"tar could not unpack {archive.name}: {result.stderr.strip()}")
        entries = list(Path(scratch).iterdir())
        if len(entries) != 1 or not entries[0].is_dir():
            raise SourceError(f"{archive.name} does not hold one top-level directory")
        _drop_git_directories(entries[0])
        entries[0].rename(target)


def _drop_git_directories(root: Path) -> None:
    """Remove every ``.git`` an sdist carries: the host runs git in the unpacked tree, and a
    ``.git/config`` of the archive's (``core.fsmonitor``, hooks) would be the host's to obey."""
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            if name == ".git":
                path = Path(directory, name)
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        dirs[:] = [name for name in dirs if name != ".git"]


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` with a fixed identity and date, isolated (``ac_env.host_git``)."""
    try:
        return git_text(args, cwd=repo, identity=True)
    except HostGitError as error:
        raise SourceError(str(error)) from None


def commit_tree(repo: Path, message: str) -> str:
    """Make ``repo`` a git repository whose one commit holds every file in it."""
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "--all", "--force", ".")
    git(repo, "commit", "-q", "--no-verify", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def copy_tree(source: Path, target: Path) -> None:
    """Copy a working tree without its ``.git``."""
    shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns(".git"))
