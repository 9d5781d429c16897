"""Run one process with a deadline and a bounded output capture, then kill its whole group.

The process gets a session (and process group) of its own; when it ends or its time is up,
the group is sent SIGKILL, so a command that ignores SIGTERM or leaves ``nohup`` children
behind does not outlive its turn. (Under bubblewrap the PID namespace does the rest: when the
sandbox's init dies, the kernel kills everything in it, ``setsid`` escapees included.)
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from ac_env.host_git import SYSTEM_PATH
from ac_env.sandbox.base import ExecResult
from ac_env.sandbox.output import OutputCapture

KILLED_EXIT_CODE = 128 + signal.SIGKILL
"""``exit_code`` of a command killed at its deadline (what a shell reports for SIGKILL)."""

_READ_CHUNK = 1 << 16
_EXIT_POLL_S = 0.05
_DRAIN_GRACE_S = 0.5


@dataclass(frozen=True)
class RunAs:
    """Host user and group a command runs as."""

    uid: int
    gid: int


def run_bounded(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    timeout_s: float,
    output_limit: int,
    run_as: RunAs | None,
    pass_fds: Sequence[int] = (),
) -> ExecResult:
    """Run ``argv`` with stdout and stderr interleaved into one capped capture.

    Raises ``OSError`` when the program cannot be started.
    """
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    capture = OutputCapture(output_limit)
    started = time.monotonic()
    process = subprocess.Popen(
        [*_as_user(run_as), *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
        close_fds=True,
        pass_fds=tuple(pass_fds),
    )
    stream = process.stdout
    assert stream is not None
    try:
        timed_out = _pump(process.pid, stream, capture, deadline=started + timeout_s)
    finally:
        _kill_group(process.pid)
        process.wait()
        _drain(stream, capture)
        stream.close()
    duration_s = time.monotonic() - started
    if timed_out:
        exit_code = KILLED_EXIT_CODE
    elif process.returncode < 0:
        exit_code = 128 - process.returncode
    else:
        exit_code = process.returncode
    return ExecResult(
        output=capture.text(),
        exit_code=exit_code,
        timed_out=timed_out,
        truncated=capture.truncated,
        duration_s=duration_s,
    )


def _as_user(run_as: RunAs | None) -> list[str]:
    """The prefix that runs a program as ``run_as``: ``setpriv`` (util-linux) sets the real,
    effective and saved ids and clears the supplementary groups, as ``Popen(user=, group=,
    extra_groups=[])`` would. ``Popen`` given those ids cannot use ``vfork`` and copies the
    whole parent instead: about 7 ms a command from a small process and over 160 ms from one
    holding 2 GB (a trainer with a model loaded), against about 2 ms through ``setpriv``
    (``benchmarks/sandbox_roundtrip.py``)."""
    if run_as is None:
        return []
    setpriv = shutil.which("setpriv", path=SYSTEM_PATH)
    if setpriv is None:
        raise OSError(
            "setpriv not found: running commands as an unprivileged user needs util-linux's "
            "setpriv (apt-get install util-linux)"
        )
    return [setpriv, f"--reuid={run_as.uid}", f"--regid={run_as.gid}", "--clear-groups"]


def _pump(pid: int, stream: IO[bytes], capture: OutputCapture, deadline: float) -> bool:
    """Read until end of output or until the process exits; True if the deadline came first."""
    fd = stream.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            if selector.select(min(remaining, _EXIT_POLL_S)):
                chunk = os.read(fd, _READ_CHUNK)
                if not chunk:
                    return False
                capture.add(chunk)
            if _has_exited(pid):
                return False


def _has_exited(pid: int) -> bool:
    """Whether ``pid`` has exited, without reaping it (its group id stays reserved)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _drain(stream: IO[bytes], capture: OutputCapture) -> None:
    """Read what is left in the pipe; stop at end of output or after a short grace, since a
    process that escaped the group (only possible without a PID namespace) may hold it open."""
    fd = stream.fileno()
    deadline = time.monotonic() + _DRAIN_GRACE_S
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while (remaining := deadline - time.monotonic()) > 0:
            if not selector.select(remaining):
                return
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                return
            capture.add(chunk)


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (in this PID namespace), whoever owns it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
