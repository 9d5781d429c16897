"""The Docker backend (``sandbox: "docker"``): ``DockerSandbox`` (``sandbox``), its daemon
session and container pool (``session``), the in-container scripts (``scripts``), exec streams
(``exec_stream``) and tar archives (``archive``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ac_env.sandbox.base import Sandbox
from ac_env.sandbox.docker.sandbox import BASE_IMAGE, DockerSandbox, missing_images
from ac_env.sandbox.docker.session import docker_client
from ac_env.tasks.model import Task


def docker_sandboxes(disk_quota_mb: int | None) -> Callable[[], Sandbox]:
    """``"docker"``: refuses to run without a daemon answering."""
    docker_client()
    return lambda: DockerSandbox(disk_quota_mb=disk_quota_mb)


def missing_task_images(tasks: Sequence[Task]) -> str | None:
    """The images ``tasks`` run in that the daemon does not hold (nothing is pulled)."""
    images = [task.image_name or BASE_IMAGE for task in tasks]
    missing = missing_images(docker_client(), images)
    if not missing:
        return None
    return (
        f"docker image(s) not present on the daemon, and nothing is pulled from a "
        f"registry: {', '.join(missing)}; load them (`docker load`) or build them "
        "(`scripts/docker_daemon.sh start` builds the base image, "
        "`scripts/swebench_image.py` a task's from its snapshot_dir)"
    )


__all__ = [
    "BASE_IMAGE",
    "DockerSandbox",
    "docker_sandboxes",
    "missing_images",
    "missing_task_images",
]
