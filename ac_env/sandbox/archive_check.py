"""The rules every workspace archive passes before any sandbox unpacks it, whichever backend
made it: a snapshot may come from a compromised container (whose ``tar`` is the agent's) or be
crafted by hand, so nothing in it is trusted.

An archive passes when unpacking it into an empty directory can only create, inside its part
directories (``repo/``, ``tmp/``), directories, regular files and symbolic links that stay in
their part. Refused, with ``UnsafeArchiveError`` naming the first bad member:

- names that are absolute, hold a ``..`` component, or lie outside the parts;
- a part itself as anything but a directory, or a name given twice (a second member would
  replace the first, and a directory replaced by a link redirects what follows);
- names below an earlier symbolic link or regular file (they would be written through it);
- hard links (snapshots store each file's content: ``tar --hard-dereference``), device files,
  fifos and any other member type;
- symbolic links to an absolute path, or whose target, followed through the archive's other
  links, leaves the link's part (or loops).
"""

from __future__ import annotations

import io
import tarfile
from pathlib import PurePosixPath

from ac_env.sandbox.base import SandboxError

PARTS = ("repo", "tmp")
_MAX_LINK_HOPS = 40  # as Linux's own limit on links followed in one lookup

Name = tuple[str, ...]


class UnsafeArchiveError(SandboxError):
    """A workspace archive holds a member no sandbox may unpack."""

    def __init__(self, member: str, reason: str) -> None:
        super().__init__(f"workspace archive: member {member!r} refused: {reason}")
        self.member = member
        self.reason = reason


def check_archive(archive: bytes) -> None:
    """Raise ``UnsafeArchiveError`` unless ``archive`` passes every rule of this module (or
    ``SandboxError`` when it is no tar archive at all)."""
    kinds: dict[Name, str] = {}
    symlinks: dict[Name, str] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as source:
            for member in source:
                name = _checked_name(member.name, kinds)
                kinds[name] = _checked_kind(member, name)
                if member.issym():
                    symlinks[name] = member.linkname
    except tarfile.TarError as error:
        raise SandboxError(f"workspace archive: {error}") from error
    for name, target in symlinks.items():
        if _resolve(name[:-1], target, symlinks, [0]) is None:
            raise UnsafeArchiveError(
                "/".join(name), f"symbolic link to {target!r} leaves {name[0]}/ (or loops)"
            )


def _checked_name(raw: str, kinds: dict[Name, str]) -> Name:
    if raw.startswith("/"):
        raise UnsafeArchiveError(raw, "absolute name")
    name = PurePosixPath(raw).parts
    if ".." in name:
        raise UnsafeArchiveError(raw, "'..' in the name")
    if not name or name[0] not in PARTS:
        raise UnsafeArchiveError(raw, f"outside the parts {', '.join(PARTS)}")
    if name in kinds:
        raise UnsafeArchiveError(raw, "the name appears twice")
    for depth in range(1, len(name)):
        kind = kinds.get(name[:depth], "directory")
        if kind != "directory":
            raise UnsafeArchiveError(raw, f"lies below the {kind} {'/'.join(name[:depth])!r}")
    return name


def _checked_kind(member: tarfile.TarInfo, name: Name) -> str:
    if member.isdir():
        return "directory"
    if len(name) == 1:
        raise UnsafeArchiveError(member.name, f"the part {name[0]}/ must be a directory")
    if member.isreg():
        return "regular file"
    if member.issym():
        if member.linkname.startswith("/"):
            reason = f"symbolic link to the absolute {member.linkname!r}"
            raise UnsafeArchiveError(member.name, reason)
        return "symbolic link"
    if member.islnk():
        raise UnsafeArchiveError(member.name, f"hard link to {member.linkname!r}")
    if member.ischr() or member.isblk() or member.isfifo():
        raise UnsafeArchiveError(member.name, "device file or fifo")
    raise UnsafeArchiveError(member.name, f"unsupported member type {member.type!r}")


def _resolve(
    directory: Name, target: str, symlinks: dict[Name, str], hops: list[int]
) -> Name | None:
    """Where ``target``, read in ``directory``, leads once every archived link on the way is
    followed; None when it leaves the part (``directory[0]``) or follows too many links."""
    path = list(directory)
    for component in target.split("/"):
        if component in ("", "."):
            continue
        if component == "..":
            if len(path) == 1:
                return None
            path.pop()
            continue
        path.append(component)
        link = symlinks.get(tuple(path))
        if link is not None:
            hops[0] += 1
            if hops[0] > _MAX_LINK_HOPS:
                return None
            resolved = _resolve(tuple(path[:-1]), link, symlinks, hops)
            if resolved is None:
                return None
            path = list(resolved)
    return tuple(path)
