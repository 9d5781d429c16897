"""What a git index file says about the tree, without its stat data, read in Python from its
bytes: the host never runs git on a workspace (whose ``.git`` the agent controls: a config key
such as ``core.fsmonitor`` would run a program of the agent's, on the host).

``index_digest`` hashes the index's version, each entry's mode, object id, flags and path (what
``git ls-files --stage`` shows), and every extension but the two that hold stat data (the
untracked cache ``UNTR`` and the fsmonitor token ``FSMN``). Stat data (times, device, inode,
owner, size) is left out: git re-reads a file whose stat data differ, so it changes no output.
An index this parser does not understand (another version, a corrupt file, a SHA-256
repository) is hashed whole, which is always sound (two such indexes match only when equal).
"""

from __future__ import annotations

import hashlib
import struct

_HEADER = struct.Struct(">4sII")
_STAT = 40  # ctime, mtime (8 each), dev, ino, mode, uid, gid, size (4 each)
_OID = 20
_EXTENDED = 0x4000
_STAT_EXTENSIONS = (b"UNTR", b"FSMN")


class _Unreadable(ValueError):
    pass


def index_digest(data: bytes) -> str:
    """The SHA-256 of what ``data`` (an index file's bytes) says about the tree."""
    try:
        return "entries:" + _entries_digest(data)
    except (_Unreadable, struct.error, IndexError):
        return "whole:" + hashlib.sha256(data).hexdigest()


def _entries_digest(data: bytes) -> str:
    signature, version, count = _HEADER.unpack_from(data, 0)
    if signature != b"DIRC" or version not in (2, 3, 4):
        raise _Unreadable("not an index of version 2, 3 or 4")
    digest = hashlib.sha256(struct.pack(">II", version, count))
    offset, previous = _HEADER.size, b""
    end = len(data) - _OID  # the trailing checksum
    for _ in range(count):
        start = offset
        (mode,) = struct.unpack_from(">I", data, offset + 24)
        oid = data[offset + _STAT : offset + _STAT + _OID]
        (flags,) = struct.unpack_from(">H", data, offset + _STAT + _OID)
        offset += _STAT + _OID + 2
        extended = 0
        if flags & _EXTENDED:
            if version < 3:
                raise _Unreadable("extended flags in a version 2 index")
            (extended,) = struct.unpack_from(">H", data, offset)
            offset += 2
        if version == 4:
            strip, offset = _varint(data, offset)
            if strip > len(previous):
                raise _Unreadable("a path prefix longer than the previous path")
            nul = data.index(b"\0", offset)
            path = previous[: len(previous) - strip] + data[offset:nul]
            offset = nul + 1
        else:
            nul = data.index(b"\0", offset)
            path = data[offset:nul]
            offset = start + ((nul - start) // 8 + 1) * 8  # 1 to 8 NULs pad to 8 bytes
        if offset > end:
            raise _Unreadable("entries run past the end")
        digest.update(struct.pack(">IHHI", mode, flags, extended, len(path)) + oid + path)
        previous = path
    while offset < end:
        name = data[offset : offset + 4]
        (size,) = struct.unpack_from(">I", data, offset + 4)
        body = data[offset + 8 : offset + 8 + size]
        if len(body) != size:
            raise _Unreadable("an extension runs past the end")
        if name not in _STAT_EXTENSIONS:
            digest.update(name + struct.pack(">I", size) + body)
        offset += 8 + size
    if offset != end:
        raise _Unreadable("extensions do not end at the checksum")
    return digest.hexdigest()


def _varint(data: bytes, offset: int) -> tuple[int, int]:
    """git's offset varint (each continuation adds one before shifting)."""
    byte = data[offset]
    offset += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[offset]
        offset += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, offset
