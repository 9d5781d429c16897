"""What all Docker sandboxes of one Python process share: the daemon connection, the labels
that mark this process's containers, the cap on how many exist at once, and the warm pool.

Every container carries ``autocompact.sandbox=<session>`` (``<host>:<pid>:<random>``) and
``autocompact.pid``/``autocompact.host``. The first connection removes the containers that a
process of this host left behind when it died (its pid is gone); at interpreter exit this
process removes its own. Containers, active or parked warm, hold one of
``AUTOCOMPACT_DOCKER_MAX_CONTAINERS`` slots (default 16); when none is free, a parked one is
removed to make room, else ``start`` waits (up to ``SLOT_WAIT_S``) for a sandbox to close.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ac_env.sandbox.base import SandboxError
from ac_env.sandbox.process import process_alive

SESSION_LABEL = "autocompact.sandbox"
PID_LABEL = "autocompact.pid"
HOST_LABEL = "autocompact.host"
MAX_CONTAINERS = int(os.environ.get("AUTOCOMPACT_DOCKER_MAX_CONTAINERS", "16"))
SLOT_WAIT_S = 600.0
PROJECT_SOCKET = os.path.join(
    os.environ.get("AUTOCOMPACT_DOCKER_DIR", "/var/lib/autocompact-docker"), "docker.sock"
)
"""The socket of the daemon ``scripts/docker_daemon.sh`` starts; used when DOCKER_HOST is unset
and no system daemon listens at /var/run/docker.sock."""
SESSION = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
_DAEMON_HINT = (
    'start one with `eval "$(bash scripts/docker_daemon.sh start)"` (it prints the '
    "DOCKER_HOST to use), or point DOCKER_HOST at a running daemon"
)

_lock = threading.Lock()
_client: Any = None
_slots = threading.BoundedSemaphore(MAX_CONTAINERS)


@dataclass(frozen=True)
class ParkedContainer:
    """A warm container, its processes killed, waiting for another episode of its task;
    ``payload`` is what its sandbox needs to take it up again."""

    container: Any
    payload: Any


_parked: OrderedDict[str, list[ParkedContainer]] = OrderedDict()


def docker_client() -> Any:
    """The process's docker client (``DOCKER_HOST`` or the default socket), checked to answer.

    Raises ``SandboxError`` (saying how to start a daemon) when none answers.
    """
    global _client
    with _lock:
        if _client is None:
            _client = _connect()
            _remove_leftovers(_client)
            atexit.register(remove_own_containers)
        return _client


def session_labels() -> dict[str, str]:
    return {SESSION_LABEL: SESSION, PID_LABEL: str(os.getpid()), HOST_LABEL: socket.gethostname()}


def acquire_slot() -> None:
    """Take one container slot, evicting a parked container if that frees one."""
    while not _slots.acquire(blocking=False):
        evicted = _evict_oldest()
        if evicted is None:
            if not _slots.acquire(timeout=SLOT_WAIT_S):
                raise SandboxError(
                    f"no docker sandbox slot freed within {SLOT_WAIT_S:g} s "
                    f"({MAX_CONTAINERS} containers at most; AUTOCOMPACT_DOCKER_MAX_CONTAINERS)"
                )
            return
        remove_container(evicted.container)
        _slots.release()


def release_slot() -> None:
    _slots.release()


def park(key: str, parked: ParkedContainer) -> None:
    """Keep a warm container (it keeps its slot) for the next ``take_parked(key)``."""
    with _lock:
        _parked.setdefault(key, []).append(parked)
        _parked.move_to_end(key)


def take_parked(key: str) -> ParkedContainer | None:
    with _lock:
        waiting = _parked.get(key)
        if not waiting:
            return None
        parked = waiting.pop()
        if not waiting:
            del _parked[key]
        return parked


def remove_container(container: Any) -> None:
    """Remove a container and its anonymous volumes; one already gone is fine."""
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound):
        container.remove(force=True, v=True)


def remove_own_containers() -> None:
    """Remove every container of this session (parked ones included)."""
    import docker.errors

    with _lock:
        _parked.clear()
        client = _client
    if client is None:
        return
    with contextlib.suppress(docker.errors.DockerException, OSError):
        for container in client.containers.list(
            all=True, filters={"label": f"{SESSION_LABEL}={SESSION}"}
        ):
            remove_container(container)


def _evict_oldest() -> ParkedContainer | None:
    with _lock:
        if not _parked:
            return None
        key, waiting = next(iter(_parked.items()))
        evicted = waiting.pop(0)
        if not waiting:
            del _parked[key]
        return evicted


def _connect() -> Any:
    import docker
    import docker.errors

    try:
        if "DOCKER_HOST" not in os.environ and not os.path.exists("/var/run/docker.sock"):
            client = docker.DockerClient(base_url=f"unix://{PROJECT_SOCKET}", version="auto")
        else:
            client = docker.from_env(version="auto")
        client.ping()
    except docker.errors.DockerException as error:
        where = os.environ.get("DOCKER_HOST", "the default socket")
        raise SandboxError(
            f"no Docker daemon answers at {where}: {error}; {_DAEMON_HINT}"
        ) from error
    return client


def _remove_leftovers(client: Any) -> None:
    """Remove containers left by dead processes of this host (a crashed run)."""
    host = socket.gethostname()
    for container in client.containers.list(all=True, filters={"label": SESSION_LABEL}):
        labels = container.labels
        if labels.get(HOST_LABEL) != host:
            continue
        pid = labels.get(PID_LABEL, "")
        if not (pid.isdigit() and process_alive(int(pid))):
            remove_container(container)
