"""The per-episode disk quota: how much the workspace and ``/tmp`` may hold, and how a command
learns that it reached it.

Both backends put the workspace and ``/tmp`` on size-limited tmpfs file systems (the local
sandbox mounts one on the host, which needs root; Docker mounts a tmpfs volume and a tmpfs
``/tmp``). A write past the quota fails inside with ENOSPC, the host's disks are untouched, and
the command's observation ends with ``quota_note``; the episode goes on. A tmpfs lives in
memory: what an episode writes counts against the host's RAM (or the container's memory).
"""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

from ac_env.sandbox.process import process_alive

DEFAULT_DISK_QUOTA_MB = 1024
ENOSPC_TEXT = "No space left on device"
FULL_BELOW_BYTES = 1 << 20
"""A quota file system with less free space than this after a command counts as full."""

_MS_NOSUID = 2
_MS_NODEV = 4
_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def quota_note(quota_mb: int) -> str:
    """The line appended to a command's output when it reached the quota."""
    return f"\n[disk quota of {quota_mb} MB reached: {ENOSPC_TEXT}]\n"


def reached(output: str, free_bytes: int) -> bool:
    """Whether a command reached the quota: its output reports ENOSPC, or the quota file
    system is (nearly) full after it (a command may have hidden its errors)."""
    return ENOSPC_TEXT in output or free_bytes < FULL_BELOW_BYTES


def free_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def mount_tmpfs(path: Path, size_mb: int) -> None:
    """Mount a tmpfs of ``size_mb`` MB (no setuid, no devices) on the directory ``path``.
    Raises ``OSError`` when the process may not mount (not root, no CAP_SYS_ADMIN)."""
    options = f"size={size_mb}m,mode=0755".encode()
    flags = _MS_NOSUID | _MS_NODEV
    if _libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", flags, options) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mounting a tmpfs on {path}: {os.strerror(error)}")


def leftover_mounts(mounts: str = "/proc/self/mounts") -> list[Path]:
    """The quota file systems (``.../autocompact-sandbox-<pid>-*/work``) still mounted for a
    process that is gone: a run killed before it closed its sandboxes. A tmpfs holds memory
    until it is unmounted."""
    leftovers = []
    for line in Path(mounts).read_text().splitlines():
        fields = line.split()
        if len(fields) < 3 or fields[2] != "tmpfs":
            continue
        match = _SANDBOX_MOUNT.search(fields[1])
        if match and not process_alive(int(match.group(1))):
            leftovers.append(Path(fields[1]))
    return leftovers


def sandbox_prefix() -> str:
    """The name prefix of this process's sandbox directories (``leftover_mounts`` reads the
    pid from it)."""
    return f"autocompact-sandbox-{os.getpid()}-"


_SANDBOX_MOUNT = re.compile(r"/autocompact-sandbox-(\d+)-[^/]+/work$")


def unmount(path: Path) -> None:
    """Detach the file system mounted on ``path`` (its memory is freed once unused)."""
    if _libc.umount2(os.fsencode(path), _MNT_DETACH) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"unmounting {path}: {os.strerror(error)}")
