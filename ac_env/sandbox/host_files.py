"""Reading and writing files an agent may have shaped, from the host, without trusting them.

A path under a workspace may name anything a command left there: a symbolic link to elsewhere,
a fifo whose ``open`` blocks forever, a device, a socket, a file far larger than expected.
These helpers open without following a final symlink and without blocking, act only on
regular files, and bound what they read; anything else raises ``UnsafeFileError`` (an
``OSError``), never hangs.
"""

from __future__ import annotations

import os
import stat

MAX_FILE_BYTES = 256 * 1024 * 1024
"""The most a sandbox's ``read_file`` returns."""
_CHUNK = 1 << 20


class UnsafeFileError(OSError):
    """The path is not a regular file, or is larger than the caller allows."""


def read_regular(path: str | os.PathLike[str], max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file at ``path`` (a final symlink is refused, not followed),
    at most ``max_bytes`` of them, else ``UnsafeFileError``."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFileError(f"{os.fspath(path)} is not a regular file")
        if info.st_size > max_bytes:
            raise UnsafeFileError(
                f"{os.fspath(path)} holds {info.st_size} bytes, over the limit of {max_bytes}"
            )
        chunks, total = [], 0
        while chunk := os.read(fd, min(_CHUNK, max_bytes + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise UnsafeFileError(f"{os.fspath(path)} grew past the limit of {max_bytes}")
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_regular(path: str | os.PathLike[str], data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path``, creating it or truncating the regular file there; a final
    symlink, a fifo or any other special file is refused (``UnsafeFileError``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, mode)
    except OSError as error:  # ELOOP: a symlink; ENXIO: a fifo without a reader
        raise UnsafeFileError(f"cannot write {os.fspath(path)}: {error.strerror}") from error
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeFileError(f"{os.fspath(path)} is not a regular file")
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
