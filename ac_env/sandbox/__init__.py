"""Sandboxes: where an episode's commands run.

``SANDBOXES`` maps each name the env's ``sandbox`` keyword takes to its backend: what the name
means (the config's and the CLIs' help text read it), the function that makes its sandboxes
(``"module:function"``, imported only when the name is used), whether the command cache can
wrap it, and an optional check of a run's tasks (Docker: every image on the daemon). A new
backend is one module (a class following ``Sandbox``, usually a ``SandboxLifecycle``) and one
entry here; ``docs/extending.md`` walks through it. ``make_sandbox_factory`` turns a name into a
zero-argument factory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ac_env.lazy_import import import_target
from ac_env.sandbox.base import ExecResult, Sandbox, SandboxError, SandboxLifecycle
from ac_env.sandbox.quota import DEFAULT_DISK_QUOTA_MB
from ac_env.tasks.model import Task

SandboxFactory = Callable[[], Sandbox]


@dataclass(frozen=True)
class SandboxBackend:
    """One named sandbox.

    ``factory``: ``"module:function"``; the function takes ``disk_quota_mb``, raises
    ``SandboxError`` saying what is missing when the backend cannot run here, and returns a
    ``SandboxFactory``. ``caches_commands``: its sandboxes are ``LocalSandbox``es, which the
    command cache can wrap. ``check_tasks``: ``"module:function"`` taking the run's tasks and
    returning a problem to report before the first episode, or None."""

    description: str
    factory: str
    caches_commands: bool = False
    check_tasks: str | None = None

    def make(self, disk_quota_mb: int | None) -> SandboxFactory:
        factory: SandboxFactory = import_target(self.factory)(disk_quota_mb)
        return factory

    def problem_with(self, tasks: Sequence[Task]) -> str | None:
        if self.check_tasks is None or not tasks:
            return None
        problem: str | None = import_target(self.check_tasks)(tasks)
        return problem


SANDBOXES: dict[str, SandboxBackend] = {
    "local": SandboxBackend(
        "bubblewrap: no network, only the workspace writable",
        "ac_env.sandbox.local:bubblewrap_sandboxes",
        caches_commands=True,
    ),
    "unisolated": SandboxBackend(
        "plain subprocesses: an explicit opt-out of isolation",
        "ac_env.sandbox.local:unisolated_sandboxes",
        caches_commands=True,
    ),
    "docker": SandboxBackend(
        "a container per episode: the task's image_name, or the base image with the task's "
        "repository copied in; needs a daemon, see scripts/docker_daemon.sh",
        "ac_env.sandbox.docker:docker_sandboxes",
        check_tasks="ac_env.sandbox.docker:missing_task_images",
    ),
}
"""Sandbox name -> its backend."""


def sandbox_backend(name: str) -> SandboxBackend:
    """The backend ``name`` names; a ValueError lists the known names."""
    if name not in SANDBOXES:
        raise ValueError(f"sandbox: unknown sandbox {name!r}; valid: {list(SANDBOXES)}")
    return SANDBOXES[name]


def sandbox_help() -> str:
    """Each name with what it means, for help texts."""
    return ", ".join(f"'{name}' ({backend.description})" for name, backend in SANDBOXES.items())


def make_sandbox_factory(
    spec: str | SandboxFactory,
    disk_quota_mb: int | None = DEFAULT_DISK_QUOTA_MB,
    command_cache: str | None = None,
) -> SandboxFactory:
    """The factory a name of ``SANDBOXES`` makes (checking that it can run here), or a
    factory used as is (e.g. ``lambda: DockerSandbox(warm=True)``). ``disk_quota_mb``: the named
    sandboxes' disk quota (``ac_env.sandbox.quota``); a factory sets its own.
    ``command_cache``: a directory replaying read-only commands' stored outputs
    (``ac_env.sandbox.command_cache``; backends with ``caches_commands`` only)."""
    if callable(spec):
        if command_cache is not None:
            raise ValueError(f"command_cache: needs a named sandbox, one of {caching_sandboxes()}")
        return spec
    backend = sandbox_backend(spec)
    if command_cache is not None and not backend.caches_commands:
        raise ValueError(
            f"command_cache: sandbox {spec!r} does not cache commands; those that do: "
            f"{caching_sandboxes()}"
        )
    factory = backend.make(disk_quota_mb)
    if command_cache is None:
        return factory
    from ac_env.sandbox.command_cache import CachingSandbox

    directory = command_cache
    return lambda: CachingSandbox(factory(), directory)  # type: ignore[arg-type]


def caching_sandboxes() -> list[str]:
    """The names whose sandboxes the command cache can wrap."""
    return [name for name, backend in SANDBOXES.items() if backend.caches_commands]


__all__ = [
    "SANDBOXES",
    "ExecResult",
    "Sandbox",
    "SandboxBackend",
    "SandboxError",
    "SandboxFactory",
    "SandboxLifecycle",
    "caching_sandboxes",
    "make_sandbox_factory",
    "sandbox_backend",
    "sandbox_help",
]
