"""Sandboxes: where an episode's commands run. ``make_sandbox_factory`` maps the env's
``sandbox`` keyword to a zero-argument factory."""

from __future__ import annotations

from collections.abc import Callable

from ac_env.sandbox.base import ExecResult, Sandbox, SandboxError

SANDBOX_NAMES = ("local", "unisolated", "docker")


def make_sandbox_factory(spec: str | Callable[[], Sandbox]) -> Callable[[], Sandbox]:
    """``"local"``: bubblewrap isolation (refuses to run without bubblewrap);
    ``"unisolated"``: plain subprocesses, an explicit opt-out; ``"docker"``: a container per
    episode (refuses to run without a daemon; see ``scripts/docker_daemon.sh``); or a factory,
    used as is (e.g. ``lambda: DockerSandbox(warm=True)``)."""
    if callable(spec):
        return spec
    if spec == "docker":
        from ac_env.sandbox.docker import DockerSandbox
        from ac_env.sandbox.docker_session import docker_client

        docker_client()
        return DockerSandbox
    from ac_env.sandbox.local import LocalSandbox

    if spec == "local":
        LocalSandbox.check_available("bwrap")
        return lambda: LocalSandbox(isolation="bwrap")
    if spec == "unisolated":
        return lambda: LocalSandbox(isolation="none")
    raise ValueError(f"sandbox: unknown sandbox {spec!r}; valid: {list(SANDBOX_NAMES)}")


__all__ = ["ExecResult", "Sandbox", "SandboxError", "make_sandbox_factory"]
