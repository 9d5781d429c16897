"""Tar archives in and out of containers (``put_archive`` / ``get_archive``): how files and
patches travel, never on a command line."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from ac_env.sandbox.base import SandboxError


def directory_tar(source: Path, skip_git_hooks: bool = True) -> bytes:
    """``source``'s contents (its children at the archive's top level), owned by root."""

    def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = PurePosixPath(info.name).parts
        if skip_git_hooks and parts[:2] == (".", ".git") and len(parts) > 2 and parts[2] == "hooks":
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        archive.add(str(source), arcname=".", filter=owned_by_root)
    return buffer.getvalue()


def file_tar(path: PurePosixPath, data: bytes, mode: int = 0o644) -> bytes:
    """One file at relative ``path``, its missing parent directories included (0755)."""
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f"archive path {str(path)!r} must be relative and stay below its root")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for parent in reversed(path.parents[:-1]):
            directory = tarfile.TarInfo(str(parent))
            directory.type, directory.mode = tarfile.DIRTYPE, 0o755
            archive.addfile(directory)
        info = tarfile.TarInfo(str(path))
        info.size, info.mode = len(data), mode
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def reowned_tar(chunks: Iterable[bytes], prefix: str, uid: int, gid: int) -> bytes:
    """The archive ``get_archive`` streamed as ``chunks``, moved into the directory ``prefix``
    (a relative path, itself included) and made read-only for everyone (directories 0555,
    files 0444) and owned by ``uid``:``gid``."""
    buffer = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(b"".join(chunks)), mode="r:") as source,
        tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive,
    ):
        top = tarfile.TarInfo(prefix)
        top.type, top.mode, top.uid, top.gid = tarfile.DIRTYPE, 0o555, uid, gid
        archive.addfile(top)
        for info in source:
            if not (info.isdir() or info.isfile()):
                continue
            info.name = f"{prefix}/{info.name}"
            info.uid, info.gid, info.uname, info.gname = uid, gid, "", ""
            info.mode = 0o555 if info.isdir() else 0o444
            archive.addfile(info, source.extractfile(info) if info.isfile() else None)
    return buffer.getvalue()


def single_file(chunks: Iterable[bytes], name: str, max_bytes: int) -> bytes:
    """The bytes of the one regular file ``get_archive`` streamed for ``name``."""
    received = io.BytesIO(_bounded(chunks, max_bytes, name))
    with tarfile.open(fileobj=received, mode="r:") as source:
        member = source.next()
        if member is None or not member.isfile():
            raise SandboxError(f"{name} is not a regular file")
        extracted = source.extractfile(member)
        assert extracted is not None
        return extracted.read()


def _bounded(chunks: Iterable[bytes], max_bytes: int, name: str) -> bytes:
    received = bytearray()
    for chunk in chunks:
        received += chunk
        if len(received) > max_bytes + 64 * 1024:
            raise SandboxError(f"{name} is larger than {max_bytes} bytes")
    return bytes(received)
