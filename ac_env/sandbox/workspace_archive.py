"""A sandbox's state as one tar archive, what ``Sandbox.snapshot`` returns and ``restore`` takes:
``repo/`` (the repository with its .git: uncommitted edits, untracked and ignored files) and
``tmp/`` (the sandbox's /tmp, which is also its $HOME). Modes, symlinks and modification times
are kept; hard-linked files are stored once per name, and fifos, devices and sockets are left
out; owners are not kept (the restoring sandbox gives everything to its own user).

Archives are written to a temporary file, counting the bytes written, and stop with
``SnapshotTooLargeError`` at a cap: a sparse file counts at its full size, so files of a few
blocks on disk but gigabytes long end the snapshot with that error, not in host memory.
Restoring first checks the archive (``archive_check``)."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import IO

from ac_env.sandbox.archive_check import PARTS, check_archive
from ac_env.sandbox.base import SandboxError


class SnapshotTooLargeError(SandboxError):
    """A snapshot would be larger than its cap."""


class CappedFile:
    """A temporary file that raises ``SnapshotTooLargeError`` when more than ``max_bytes`` are
    written to it (``what`` names the content in that error)."""

    def __init__(self, max_bytes: int, what: str) -> None:
        self.file: IO[bytes] = tempfile.TemporaryFile(prefix="autocompact-snapshot-")  # noqa: SIM115 (closed by close)
        self.written = 0
        self._max_bytes = max_bytes
        self._what = what

    def write(self, data: bytes) -> int:
        self.written += len(data)
        if self.written > self._max_bytes:
            raise SnapshotTooLargeError(
                f"{self._what} is larger than the snapshot cap of {self._max_bytes} bytes "
                "(sparse files count at their full length)"
            )
        return self.file.write(data)

    def tell(self) -> int:
        return self.file.tell()

    def seek(self, position: int, whence: int = 0) -> int:
        return self.file.seek(position, whence)

    def read(self, size: int = -1) -> bytes:
        return self.file.read(size)

    def contents(self) -> bytes:
        self.seek(0)
        return self.read()

    def close(self) -> None:
        self.file.close()


def pack_directories(
    directories: Mapping[str, Path], mount_points: Mapping[str, str], max_bytes: int
) -> bytes:
    """Each directory's tree under its part name (a key of ``PARTS``). Symlinks are stored as
    links, never followed; an absolute one into its own part's mount point (``mount_points``:
    where commands see each part) is stored relative (``relative_link``). Fails before writing
    anything when the regular files alone pass ``max_bytes``, and while writing when the
    archive does."""
    for part in directories:
        _check_part(part)
    _check_total_size(directories, max_bytes)
    output = CappedFile(max_bytes, "the workspace archive")
    try:
        with tarfile.open(fileobj=output, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for part, directory in directories.items():
                content = _content_of(part, directory, mount_points[part])
                archive.add(str(directory), arcname=part, filter=content)
        return output.contents()
    finally:
        output.close()


def merge_archives(
    parts: Mapping[str, IO[bytes]], mount_points: Mapping[str, str], max_bytes: int
) -> bytes:
    """One archive holding each of ``parts`` (files holding archives of a directory's contents,
    members named ``.`` and ``./...`` as ``tar -C DIR -cf - .`` writes them) under its part
    name; fifos and devices are left out and absolute links into a part's own mount point made
    relative, as ``pack_directories`` does."""
    output = CappedFile(max_bytes, "the workspace archive")
    try:
        with tarfile.open(fileobj=output, mode="w", format=tarfile.PAX_FORMAT) as merged:
            for part, data in parts.items():
                _check_part(part)
                data.seek(0)
                with tarfile.open(fileobj=data, mode="r:") as source:
                    for member in source:
                        if member.ischr() or member.isblk() or member.isfifo():
                            continue
                        content = source.extractfile(member) if member.isfile() else None
                        member.name = _under(part, member.name)
                        if member.islnk():
                            member.linkname = _under(part, member.linkname)
                        if member.issym():
                            member.linkname = relative_link(
                                member.name, member.linkname, mount_points[part]
                            )
                        merged.addfile(member, content)
        return output.contents()
    except tarfile.TarError as error:
        raise SandboxError(f"workspace archive: {error}") from error
    finally:
        output.close()


def extract_parts(archive: bytes, destination: Path) -> None:
    """Unpack ``archive``, once ``archive_check`` passed it, into ``destination`` (whose part
    directories must not exist); set-user/group-ID bits are dropped."""
    check_archive(archive)
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as source:
            source.extractall(destination, numeric_owner=True, filter=_checked_member)
    except tarfile.TarError as error:
        raise SandboxError(f"workspace archive: {error}") from error


def _check_total_size(directories: Mapping[str, Path], max_bytes: int) -> None:
    total, largest, largest_size = 0, "", -1
    for part, directory in directories.items():
        for root, _dirs, files in os.walk(directory):
            for name in files:
                path = os.path.join(root, name)
                info = os.lstat(path)
                if stat.S_ISREG(info.st_mode):
                    total += info.st_size
                    if info.st_size > largest_size:
                        largest = os.path.join(part, os.path.relpath(path, directory))
                        largest_size = info.st_size
    if total > max_bytes:
        raise SnapshotTooLargeError(
            f"the workspace's files hold {total} bytes, over the snapshot cap of {max_bytes} "
            f"(sparse files count at their full length); the largest is {largest} "
            f"({largest_size} bytes)"
        )


def relative_link(name: str, target: str, mount_point: str) -> str:
    """The target of the archived link ``name`` (``part/...``) as a relative path when it is
    absolute and lies under ``mount_point``, where commands see the link's part; any other
    target unchanged. Tools write such links in the course of ordinary work (pytest's
    ``/tmp/pytest-of-USER/pytest-current``); made relative they restore in either backend,
    while an absolute link anywhere else is refused at restore (``archive_check``)."""
    if not target.startswith("/"):
        return target
    resolved = PurePosixPath(os.path.normpath(target))
    mount = PurePosixPath(mount_point)
    if not resolved.is_relative_to(mount):
        return target
    inside = PurePosixPath(*PurePosixPath(name).parts[:1], resolved.relative_to(mount))
    return os.path.relpath(inside, PurePosixPath(name).parent)


def _content_of(part: str, directory: Path, mount_point: str):  # type: ignore[no-untyped-def]
    """A ``TarFile.add`` filter: a hard link becomes a copy of the file it names, special files
    are left out, absolute links into the part's mount point become relative, everything is
    root's (a container restores it as its root, which may not chown; a local sandbox gives it
    to its own user)."""

    def content(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        if info.issym():
            info.linkname = relative_link(info.name, info.linkname, mount_point)
        if info.islnk():
            relative = PurePosixPath(info.name).relative_to(part)
            info.type, info.linkname = tarfile.REGTYPE, ""
            info.size = os.lstat(directory / relative).st_size
        if not (info.isdir() or info.isreg() or info.issym()):
            return None
        return info

    return content


def _checked_member(member: tarfile.TarInfo, destination: str) -> tarfile.TarInfo:
    checked = tarfile.tar_filter(member, destination)  # refuses paths leaving destination
    mode = None if member.mode is None else member.mode & ~(stat.S_ISUID | stat.S_ISGID)
    return checked.replace(mode=mode, deep=False)  # keep the group/other bits tar_filter drops


def _under(part: str, name: str) -> str:
    relative = PurePosixPath(name)
    return str(PurePosixPath(part, *[p for p in relative.parts if p not in (".", "/")]))


def _check_part(part: str) -> None:
    if part not in PARTS:
        raise ValueError(f"archive part {part!r} is not one of {PARTS}")
