"""One ``docker exec`` with a deadline, read from the daemon's socket a frame at a time.

The daemon multiplexes an exec's stdout and stderr into frames (an 8-byte header: stream
number, three zero bytes, big-endian payload length). ``stream_exec`` reads them with
``select`` so that a deadline holds however the command behaves, and hands every payload to a
sink: nothing accumulates beyond what the sink keeps.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ac_env.sandbox.base import SandboxError

STDOUT = 1
STDERR = 2
_HEADER = struct.Struct(">BxxxL")
_READ_CHUNK = 1 << 16
_EXIT_POLL_S = 0.01
_EXIT_WAIT_S = 5.0

Sink = Callable[[int, bytes], None]
"""Receives (stream number, payload) for every frame, in order."""


@dataclass(frozen=True)
class ExecOutcome:
    """How an exec ended: its exit code (None when the deadline came first) and duration."""

    exit_code: int | None
    timed_out: bool
    duration_s: float


class _FrameReader:
    """Splits the multiplexed byte stream into frames."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while len(self._buffer) >= _HEADER.size:
            stream, size = _HEADER.unpack_from(self._buffer)
            end = _HEADER.size + size
            if len(self._buffer) < end:
                return
            self._sink(stream, bytes(self._buffer[_HEADER.size : end]))
            del self._buffer[:end]


def stream_exec(
    api: Any,
    container_id: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    workdir: str,
    timeout_s: float,
    sink: Sink,
) -> ExecOutcome:
    """Run ``argv`` in the container, passing its output to ``sink`` until it ends or
    ``timeout_s`` passes. On timeout the socket is closed and the exec left running: the caller
    kills it (with every other process of the container).

    Raises ``SandboxError`` when the daemon refuses or fails the exec.
    """
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    import docker.errors

    started = time.monotonic()
    try:
        exec_id = api.exec_create(
            container_id, list(argv), environment=dict(env), workdir=workdir, user="0"
        )["Id"]
        raw = _raw_socket(api.exec_start(exec_id, socket=True))
    except docker.errors.DockerException as error:
        raise SandboxError(f"docker exec failed: {error}") from error
    reader = _FrameReader(sink)
    try:
        finished = _pump(raw, reader, deadline=started + timeout_s)
    finally:
        raw.close()
    if not finished:
        return ExecOutcome(exit_code=None, timed_out=True, duration_s=time.monotonic() - started)
    exit_code = _exit_code(api, exec_id)
    return ExecOutcome(exit_code=exit_code, timed_out=False, duration_s=time.monotonic() - started)


def _raw_socket(connection: Any) -> socket.socket:
    """The plain socket behind what ``exec_start(socket=True)`` returns."""
    raw = getattr(connection, "_sock", connection)
    if not isinstance(raw, socket.socket):
        raise SandboxError(f"docker exec gave no socket to read ({type(connection).__name__})")
    return raw


def _pump(raw: socket.socket, reader: _FrameReader, deadline: float) -> bool:
    """Read until the stream ends (True) or the deadline passes (False)."""
    with selectors.DefaultSelector() as selector:
        selector.register(raw, selectors.EVENT_READ)
        while (remaining := deadline - time.monotonic()) > 0:
            if not selector.select(remaining):
                continue
            try:
                data = raw.recv(_READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                continue
            if not data:
                return True
            reader.feed(data)
    return False


def _exit_code(api: Any, exec_id: str) -> int:
    """The exec's exit code, once the daemon has recorded it (just after the stream ends)."""
    deadline = time.monotonic() + _EXIT_WAIT_S
    while True:
        state = api.exec_inspect(exec_id)
        if not state.get("Running") and state.get("ExitCode") is not None:
            return int(state["ExitCode"])
        if time.monotonic() > deadline:
            raise SandboxError(f"docker exec {exec_id[:12]} ended its output but not its process")
        with contextlib.suppress(InterruptedError):
            time.sleep(_EXIT_POLL_S)
