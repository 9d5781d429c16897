"""Bounded capture of a command's output: keep the head and the tail, count what is dropped."""

from __future__ import annotations

from ac_env.sandbox.base import TRUNCATION_MARKER


class OutputCapture:
    """Accumulates a byte stream and keeps at most ``limit`` bytes of it: the first half and the
    last half, with ``TRUNCATION_MARKER`` between them saying how many bytes were dropped.

    Memory stays within about twice the limit however long the stream is, so a command that
    prints gigabytes never sits in the host's memory.
    """

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"output limit must be >= 0 bytes, got {limit}")
        self._head_limit = limit - limit // 2
        self._tail_limit = limit // 2
        self._head = bytearray()
        self._tail = bytearray()
        self.total_bytes = 0

    def add(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self._tail_limit:
            self._tail += chunk
            if len(self._tail) > 2 * self._tail_limit:
                del self._tail[: len(self._tail) - self._tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total_bytes > self._head_limit + self._tail_limit

    def text(self) -> str:
        """The kept output decoded as UTF-8 (undecodable bytes become U+FFFD)."""
        if not self.truncated:
            return (bytes(self._head) + bytes(self._tail)).decode("utf-8", errors="replace")
        tail = bytes(self._tail[len(self._tail) - self._tail_limit :]) if self._tail_limit else b""
        omitted = self.total_bytes - len(self._head) - len(tail)
        return (
            bytes(self._head).decode("utf-8", errors="replace")
            + TRUNCATION_MARKER.format(omitted=omitted)
            + tail.decode("utf-8", errors="replace")
        )


def cap_text(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes (head and tail kept), marker included."""
    capture = OutputCapture(limit)
    capture.add(text.encode("utf-8", errors="surrogateescape"))
    return capture.text()
