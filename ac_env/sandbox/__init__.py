"""Sandboxes: where an episode's commands run. ``make_sandbox_factory`` maps the env's
``sandbox`` keyword to a zero-argument factory."""

from __future__ import annotations

from collections.abc import Callable

from ac_env.sandbox.base import ExecResult, Sandbox, SandboxError
from ac_env.sandbox.quota import DEFAULT_DISK_QUOTA_MB

SANDBOX_NAMES = ("local", "unisolated", "docker")


def make_sandbox_factory(
    spec: str | Callable[[], Sandbox],
    disk_quota_mb: int | None = DEFAULT_DISK_QUOTA_MB,
    command_cache: str | None = None,
) -> Callable[[], Sandbox]:
    """``"local"``: bubblewrap isolation (refuses to run without bubblewrap);
    ``"unisolated"``: plain subprocesses, an explicit opt-out; ``"docker"``: a container per
    episode (refuses to run without a daemon; see ``scripts/docker_daemon.sh``); or a factory,
    used as is (e.g. ``lambda: DockerSandbox(warm=True)``). ``disk_quota_mb``: the named
    sandboxes' disk quota (``ac_env.sandbox.quota``); a factory sets its own.
    ``command_cache``: a directory replaying read-only commands' stored outputs
    (``ac_env.sandbox.command_cache``; the local sandboxes only)."""
    if command_cache is not None:
        if spec not in ("local", "unisolated"):
            raise ValueError(f"command_cache: needs sandbox 'local' or 'unisolated', got {spec!r}")
        from ac_env.sandbox.command_cache import CachingSandbox
        from ac_env.sandbox.local import Isolation, LocalSandbox

        isolation: Isolation = "bwrap" if spec == "local" else "none"
        if isolation == "bwrap":
            LocalSandbox.check_available("bwrap")
        directory = command_cache
        return lambda: CachingSandbox(
            LocalSandbox(isolation=isolation, disk_quota_mb=disk_quota_mb), directory
        )
    if callable(spec):
        return spec
    if spec == "docker":
        from ac_env.sandbox.docker import DockerSandbox
        from ac_env.sandbox.docker_session import docker_client

        docker_client()
        return lambda: DockerSandbox(disk_quota_mb=disk_quota_mb)
    from ac_env.sandbox.local import LocalSandbox

    if spec == "local":
        LocalSandbox.check_available("bwrap")
        return lambda: LocalSandbox(isolation="bwrap", disk_quota_mb=disk_quota_mb)
    if spec == "unisolated":
        return lambda: LocalSandbox(isolation="none", disk_quota_mb=disk_quota_mb)
    raise ValueError(f"sandbox: unknown sandbox {spec!r}; valid: {list(SANDBOX_NAMES)}")


__all__ = ["ExecResult", "Sandbox", "SandboxError", "make_sandbox_factory"]
