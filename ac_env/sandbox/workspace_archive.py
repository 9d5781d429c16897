"""A sandbox's state as one tar archive, what ``Sandbox.snapshot`` returns and ``restore`` takes:
``repo/`` (the repository with its .git: uncommitted edits, untracked and ignored files) and
``tmp/`` (the sandbox's /tmp, which is also its $HOME). Modes, symlinks, hard links and
modification times are kept; ownership is the restoring sandbox's business."""

from __future__ import annotations

import io
import stat
import tarfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from ac_env.sandbox.base import SandboxError

PARTS = ("repo", "tmp")


def pack_directories(directories: Mapping[str, Path]) -> bytes:
    """Each directory's tree under its part name (a key of ``PARTS``). Symlinks are stored as
    links, never followed; sockets are left out."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for part, directory in directories.items():
            _check_part(part)
            archive.add(str(directory), arcname=part)
    return buffer.getvalue()


def merge_archives(parts: Mapping[str, bytes]) -> bytes:
    """One archive holding each of ``parts`` (archives of a directory's contents, members
    named ``.`` and ``./...`` as ``tar -C DIR -cf - .`` writes them) under its part name."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as merged:
        for part, data in parts.items():
            _check_part(part)
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as source:
                for member in source:
                    content = source.extractfile(member) if member.isfile() else None
                    member.name = _under(part, member.name)
                    if member.islnk():
                        member.linkname = _under(part, member.linkname)
                    merged.addfile(member, content)
    return buffer.getvalue()


def extract_parts(archive: bytes, destination: Path) -> None:
    """Unpack ``archive`` into ``destination`` (whose part directories must not exist).
    Members outside the parts, paths leaving ``destination`` (through ``..`` or a symlink
    unpacked before them) and hard links to anything outside the parts are refused with
    ``SandboxError``; set-user/group-ID bits are dropped."""
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as source:
            source.extractall(destination, numeric_owner=True, filter=_checked_member)
    except tarfile.TarError as error:
        raise SandboxError(f"workspace archive: {error}") from error


def _checked_member(member: tarfile.TarInfo, destination: str) -> tarfile.TarInfo:
    names = [member.name, member.linkname] if member.islnk() else [member.name]
    for name in names:
        parts = PurePosixPath(name).parts
        if not parts or parts[0] not in PARTS or ".." in parts:
            raise SandboxError(f"workspace archive: member {name!r} is outside {PARTS}")
    checked = tarfile.tar_filter(member, destination)  # refuses paths leaving destination
    mode = None if member.mode is None else member.mode & ~(stat.S_ISUID | stat.S_ISGID)
    return checked.replace(mode=mode, deep=False)  # keep the group/other bits tar_filter drops


def _under(part: str, name: str) -> str:
    relative = PurePosixPath(name)
    return str(PurePosixPath(part, *[p for p in relative.parts if p not in (".", "/")]))


def _check_part(part: str) -> None:
    if part not in PARTS:
        raise ValueError(f"archive part {part!r} is not one of {PARTS}")
