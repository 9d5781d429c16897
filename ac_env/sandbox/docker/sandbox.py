"""DockerSandbox: one container per episode, commands by ``docker exec``, through the docker SDK.

A container runs the task's image (``task.image_name``) or, for a task given as a snapshot
directory, the project's base image (Debian's python3, pytest and git; built by
``scripts/docker_daemon.sh``) into which the snapshot is copied at start. Every container:

- has no network (``network_mode="none"``), no capability (commands run as the container's
  root, which can then neither mount, nor chown, nor override file permissions),
  ``no-new-privileges``, and limits: memory (cgroup, no swap, and RLIMIT_DATA per process),
  processes (cgroup PID limit), CPUs, file size (RLIMIT_FSIZE), and a disk quota: the
  workspace is a tmpfs volume and ``/tmp`` a tmpfs, each of ``disk_quota_mb`` (both count
  against the container's memory; see ``quota``). Overlay2's own size limit
  (``storage_opt``) needs xfs with project quotas, which the daemons here lack; what the
  container's root writes elsewhere in its writable layer is bounded per file only;
- runs a bash loop as PID 1 that reaps orphans and survives ``kill -KILL -1``; every command
  ends with that kill, and a command past its deadline gets it from a second exec (or, if even
  that cannot start, the container is restarted): nothing a command starts survives it;
- holds its repo as a one-commit history (``scripts.PREPARE``), and the base commit's
  objects in a read-only directory the commands cannot change, against which ``diff`` runs;
- carries this process's session labels (``session``): a crashed run's containers are
  removed at the next start, this process's at exit.

Files and patches travel as tar archives (``put_archive``/``get_archive``), never on a command
line. Output is read frame by frame into the capped capture: gigabytes of output never sit in
memory. With ``warm=True``, ``close`` parks the container and the next ``start`` of the same
task resets it with git (``scripts.RESET``) instead of creating a new one; a container
whose file system changed outside the workspace is never reused.
"""

from __future__ import annotations

import os
import posixpath
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ac_env.sandbox.archive_check import check_archive
from ac_env.sandbox.base import ExecResult, SandboxError, SandboxLifecycle, WorkspaceError
from ac_env.sandbox.commands import command_env, command_rejection
from ac_env.sandbox.docker.archive import directory_tar, file_tar, reowned_tar, single_file
from ac_env.sandbox.docker.exec_stream import STDERR, STDOUT, stream_exec
from ac_env.sandbox.docker.scripts import (
    ARCHIVE,
    BASE_GIT,
    BASE_PARENT,
    COMMAND,
    DIFF,
    INIT,
    KILL_ALL,
    PREPARE,
    RESET,
    RESOLVE,
    RESTORE,
    STAGE,
)
from ac_env.sandbox.docker.session import (
    ParkedContainer,
    acquire_slot,
    docker_client,
    park,
    release_slot,
    remove_container,
    session_labels,
    take_parked,
)
from ac_env.sandbox.output import OutputCapture
from ac_env.sandbox.process import KILLED_EXIT_CODE
from ac_env.sandbox.quota import DEFAULT_DISK_QUOTA_MB, quota_note, reached
from ac_env.sandbox.workspace_archive import CappedFile, SnapshotTooLargeError, merge_archives
from ac_env.tasks.model import Task

BASE_IMAGE = os.environ.get("AUTOCOMPACT_BASE_IMAGE", "autocompact/base:latest")
NOBODY = 65534
MAX_DIFF_BYTES = 64 * 1024 * 1024
MAX_FILE_BYTES = 256 * 1024 * 1024
_SETUP_TIMEOUT_S = 300.0
_HELPER_TIMEOUT_S = 30.0
_ERROR_LIMIT = 16 * 1024
_RESERVED_WORKDIRS = ("/", "/proc", "/dev", "/sys", "/tmp", "/etc", "/opt/autocompact", "/usr")
_BASE_IMAGE_HINT = "build it with `bash scripts/docker_daemon.sh start`"
_TASK_IMAGE_HINT = (
    "load it (`docker load`) or build it (`scripts/swebench_image.py` builds one from a "
    "task's snapshot_dir)"
)


@dataclass
class _Container:
    container: Any
    key: str
    workdir: str
    base_commit: str
    full_tree: str
    baseline: frozenset[str]
    """Paths changed against the image right after start (the workspace, the base objects)."""
    finalizer: weakref.finalize


class DockerSandbox(SandboxLifecycle):
    """The ``Sandbox`` protocol in Docker containers (see the module docstring).

    Args:
        base_image: the image for tasks that name none (built-in tasks with a snapshot_dir).
        memory_limit_mb: memory of the whole container (no swap), also each process's
            RLIMIT_DATA.
        max_processes: processes and threads the container may hold at once (PID cgroup).
        max_file_size_mb: RLIMIT_FSIZE: the largest file a command may write.
        cpus: CPUs the container may use.
        disk_quota_mb: the size of the workspace's tmpfs volume and of the tmpfs ``/tmp``
            (each; both count against the container's memory). None: the workspace stays in
            the container's writable layer and ``/tmp`` is bounded by memory only.
        warm: park the container at ``close`` and reset it with git for the next episode of
            the same task.
        max_snapshot_mb: the largest archive ``snapshot`` returns (sparse files count at
            their full length).

    Raises ``SandboxError`` (at ``start``) when no daemon answers or the image is missing.
    """

    def __init__(
        self,
        base_image: str = BASE_IMAGE,
        memory_limit_mb: int = 2048,
        max_processes: int = 256,
        max_file_size_mb: int = 1024,
        cpus: float = 2.0,
        disk_quota_mb: int | None = DEFAULT_DISK_QUOTA_MB,
        warm: bool = False,
        max_snapshot_mb: int = 1024,
    ) -> None:
        for name, value in (
            ("memory_limit_mb", memory_limit_mb),
            ("max_processes", max_processes),
            ("max_file_size_mb", max_file_size_mb),
            ("cpus", cpus),
            ("max_snapshot_mb", max_snapshot_mb),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        if disk_quota_mb is not None and disk_quota_mb <= 0:
            raise ValueError(f"disk_quota_mb must be > 0 or None, got {disk_quota_mb}")
        self.base_image = base_image
        self.warm = warm
        self._memory_limit_mb = memory_limit_mb
        self._max_processes = max_processes
        self._max_file_size_mb = max_file_size_mb
        self._cpus = cpus
        self._disk_quota_mb = disk_quota_mb
        self._max_snapshot_bytes = max_snapshot_mb * 1024 * 1024
        self._state: _Container | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, task: Task) -> None:
        """Start a container holding the task's repo at ``task.workdir`` (or reset a parked one)."""
        if self._state is not None:
            raise SandboxError("sandbox already started; call reset(task) or close() first")
        workdir = _checked_workdir(task)
        if task.image_name is None and task.snapshot_dir is None:
            raise SandboxError(f"task {task.instance_id} has neither image_name nor snapshot_dir")
        key = _pool_key(task, self.base_image)
        client = docker_client()
        if self.warm and (parked := take_parked(key)) is not None:
            self._state = self._reuse(parked, key, workdir)
            if self._state is not None:
                return
        acquire_slot()
        try:
            self._state = self._create(client, task, key, workdir)
        except BaseException:
            release_slot()
            raise

    def close(self) -> None:
        """Remove the container, or with ``warm`` park it for the next episode of its task.
        Safe to call twice; no process outlives it."""
        state, self._state = self._state, None
        if state is None:
            return
        if self.warm and self._kill_all(state):
            state.finalizer.detach()
            park(state.key, ParkedContainer(state.container, state))
        else:
            state.finalizer()

    @property
    def workdir(self) -> str:
        return self._started().workdir

    @property
    def container_id(self) -> str:
        return str(self._started().container.id)

    # -- commands ----------------------------------------------------------------------------

    def exec(self, command: str, timeout_s: float, output_limit: int) -> ExecResult:
        """Run ``bash -c command`` in the repo; see ``ExecResult``. A command no shell could
        receive is not run (exit code 126, the reason as output), as in ``LocalSandbox``."""
        state = self._started()
        rejection = command_rejection(command)
        if rejection is not None:
            return ExecResult(f"sandbox: {rejection}\n", 126, False, False, 0.0)
        capture, free_space = OutputCapture(output_limit), bytearray()

        def sink(stream: int, data: bytes) -> None:
            if stream == STDERR:
                free_space.extend(data[:_ERROR_LIMIT])
            else:
                capture.add(data)

        outcome = stream_exec(
            state.container.client.api,
            state.container.id,
            ["bash", "-c", COMMAND, "bash", command],
            env=command_env("/tmp"),
            workdir=state.workdir,
            timeout_s=timeout_s,
            sink=sink,
        )
        if outcome.timed_out:
            self._kill_all(state, restart_if_needed=True)
        output = capture.text()
        quota_mb = self._disk_quota_mb
        if quota_mb is not None and reached(output, _least_free_bytes(bytes(free_space))):
            output += quota_note(quota_mb)
        return ExecResult(
            output=output,
            exit_code=KILLED_EXIT_CODE if outcome.exit_code is None else outcome.exit_code,
            timed_out=outcome.timed_out,
            truncated=capture.truncated,
            duration_s=outcome.duration_s,
        )

    def diff(self) -> str:
        """The workspace against the base commit, untracked files included (those
        ``.gitignore`` ignores excepted), as ``LocalSandbox.diff`` gives it: a binary patch
        that ``git apply`` accepts at the base, non-UTF-8 bytes as surrogate escapes."""
        state = self._started()
        patch = self._helper(
            state,
            DIFF,
            {"BASE": state.base_commit},
            MAX_DIFF_BYTES,
            "git diff",
            error=WorkspaceError,
        )
        return patch.decode("utf-8", errors="surrogateescape")

    # -- files -------------------------------------------------------------------------------

    def read_file(self, path: str) -> bytes:
        """Bytes of a file in the repo (``path`` relative to it, or absolute under ``workdir``)."""
        state = self._started()
        target = self._resolve(state, path)
        stream, _stat = _docker_call(
            f"reading {path}", state.container.client.api.get_archive, state.container.id, target
        )
        return single_file(stream, path, MAX_FILE_BYTES)

    def write_file(self, path: str, data: bytes) -> None:
        """Write a file in the repo, creating its directories."""
        state = self._started()
        target = PurePosixPath(self._resolve(state, path)).relative_to(state.workdir)
        archive = file_tar(target, data)
        _docker_call(f"writing {path}", state.container.put_archive, state.workdir, archive)

    def _resolve(self, state: _Container, path: str) -> str:
        """``path`` inside the container, symlinks resolved; ValueError if it leaves the repo."""
        joined = posixpath.normpath(posixpath.join(state.workdir, path))
        if not _is_within(joined, state.workdir) or joined == state.workdir:
            raise ValueError(f"path {path!r} leads outside the workspace {state.workdir}")
        resolved = self._helper(state, RESOLVE, {}, 64 * 1024, "realpath", args=[joined])
        real = resolved.decode("utf-8", errors="surrogateescape").rstrip("\n")
        if not _is_within(real, state.workdir) or real == state.workdir:
            raise ValueError(f"path {path!r} leads outside the workspace {state.workdir}")
        return real

    # -- snapshots ---------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The workspace and /tmp as one archive (``workspace_archive``). Commands run as the
        container's root and could also change the image's own files (a system-wide
        ``pip install``): those are not captured. Each part streams to a temporary file;
        ``SnapshotTooLargeError`` past ``max_snapshot_mb``."""
        state = self._started()
        parts: dict[str, CappedFile] = {}
        try:
            for part, path in (("repo", state.workdir), ("tmp", "/tmp")):
                parts[part] = CappedFile(self._max_snapshot_bytes, f"the archive of {path}")
                what = f"archiving {path}"
                self._helper(
                    state, ARCHIVE, {}, 0, what, _SETUP_TIMEOUT_S, [path], into=parts[part]
                )
            return merge_archives(
                {part: out.file for part, out in parts.items()},
                {"repo": state.workdir, "tmp": "/tmp"},
                self._max_snapshot_bytes,
            )
        finally:
            for out in parts.values():
                out.close()

    def restore(self, archive: bytes) -> None:
        """Replace the workspace and /tmp by those ``snapshot`` archived (in this sandbox or in
        another one started on the same task, of either backend). An archive that fails
        ``archive_check`` is refused (``UnsafeArchiveError``) before anything changes: the
        daemon unpacks as the host's root, within the container but outside the workspace."""
        state = self._started()
        check_archive(archive)
        env = {"STAGE": STAGE}
        self._helper(state, 'rm -rf "$STAGE" && mkdir "$STAGE"', env, 1024, "staging")
        _docker_call("copying the snapshot", state.container.put_archive, STAGE, archive)
        self._helper(state, RESTORE, env, 1024, "restoring the workspace", _SETUP_TIMEOUT_S)

    # -- containers --------------------------------------------------------------------------

    def _create(self, client: Any, task: Task, key: str, workdir: str) -> _Container:
        import docker.types

        image = task.image_name or self.base_image
        if missing_images(client, [image]):
            hint = _BASE_IMAGE_HINT if image == self.base_image else _TASK_IMAGE_HINT
            raise SandboxError(
                f"task {task.instance_id}: docker image {image!r} is not present on the daemon "
                f"and nothing is pulled from a registry; {hint}"
            )
        mb, quota = 1024 * 1024, self._disk_quota_mb
        container = _docker_call(
            f"creating a container from {image}",
            client.containers.run,
            image,
            ["bash", "-c", INIT],
            detach=True,
            labels=session_labels(),
            network_mode="none",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=self._memory_limit_mb * mb,
            memswap_limit=self._memory_limit_mb * mb,
            pids_limit=self._max_processes,
            nano_cpus=int(self._cpus * 1e9),
            ulimits=[
                docker.types.Ulimit(
                    name="fsize", soft=self._max_file_size_mb * mb, hard=self._max_file_size_mb * mb
                ),
                docker.types.Ulimit(
                    name="data", soft=self._memory_limit_mb * mb, hard=self._memory_limit_mb * mb
                ),
            ],
            tmpfs={"/tmp": "mode=1777" + (f",size={quota}m" if quota else "")},
            mounts=[_quota_volume(workdir, quota)] if quota else [],
            hostname="sandbox",
            working_dir=workdir,
            entrypoint=[],
        )
        finalizer = weakref.finalize(self, _discard, container)
        try:
            if task.image_name is None:
                assert task.snapshot_dir is not None
                snapshot = directory_tar(task.snapshot_dir)
                _docker_call("copying the snapshot", container.put_archive, workdir, snapshot)
            elif quota:  # the quota's volume hides the image's repo: copy it in
                _copy_image_directory(client, image, workdir, container)
            return self._prepare(container, key, workdir, finalizer)
        except BaseException:
            finalizer.detach()
            remove_container(container)
            raise

    def _prepare(
        self, container: Any, key: str, workdir: str, finalizer: weakref.finalize
    ) -> _Container:
        state = _Container(container, key, workdir, "", "", frozenset(), finalizer)
        env = {"WARM": "1" if self.warm else "0", "STAGE": STAGE}
        printed = self._helper(state, PREPARE, env, 1024, "preparing the repo", _SETUP_TIMEOUT_S)
        base_commit, full_tree = printed.decode().split()
        stream, _stat = _docker_call(
            "reading the base objects",
            container.client.api.get_archive,
            container.id,
            f"{STAGE}/base.git",
        )
        archive = reowned_tar(stream, BASE_PARENT.lstrip("/"), NOBODY, NOBODY)
        _docker_call("installing the base objects", container.put_archive, "/", archive)
        self._helper(state, 'rm -rf "$STAGE"', {"STAGE": STAGE}, 1024, "cleaning up")
        state.base_commit, state.full_tree = base_commit, full_tree
        if self.warm:
            state.baseline = _changed_paths(container)
        return state

    def _reuse(self, parked: ParkedContainer, key: str, workdir: str) -> _Container | None:
        """The parked container reset for a new episode, or None (removed) if it cannot be."""
        state: _Container = parked.payload
        state.finalizer = weakref.finalize(self, _discard, state.container)
        changed = _changed_paths(state.container) - state.baseline
        outside = [p for p in changed if not _is_within(p, workdir)]
        try:
            if outside:
                raise SandboxError(f"changed outside the workspace: {sorted(outside)[:3]}")
            env = {"BASE": state.base_commit, "FULL": state.full_tree, "STAGE": STAGE}
            self._helper(state, RESET, env, 1024, "warm reset", _SETUP_TIMEOUT_S)
        except SandboxError:
            state.finalizer()
            return None
        return state

    def _kill_all(self, state: _Container, restart_if_needed: bool = False) -> bool:
        """Kill every process of the container but PID 1; restart it if even that fails."""
        try:
            self._helper(state, KILL_ALL, {}, 1024, "killing processes")
            return True
        except SandboxError:
            if not restart_if_needed:
                return False
        _docker_call("restarting the container", state.container.restart, timeout=0)
        return True

    def _helper(
        self,
        state: _Container,
        script: str,
        env: dict[str, str],
        stdout_limit: int,
        what: str,
        timeout_s: float = _HELPER_TIMEOUT_S,
        args: list[str] | None = None,
        error: type[SandboxError] = SandboxError,
        into: CappedFile | None = None,
    ) -> bytes:
        """Run one of the sandbox's own scripts; its stdout (written ``into`` a capped file
        instead, when given), or ``error`` with stderr when the script fails, overflows or
        times out (a daemon that fails the exec: SandboxError)."""
        stdout, stderr = bytearray(), OutputCapture(_ERROR_LIMIT)
        overflow = False
        too_large: SnapshotTooLargeError | None = None

        def sink(stream: int, data: bytes) -> None:
            nonlocal overflow, too_large
            if stream != STDOUT:
                stderr.add(data)
            elif into is not None:
                if too_large is None:  # past the cap, the rest is read and dropped
                    try:
                        into.write(data)
                    except SnapshotTooLargeError as exceeded:
                        too_large = exceeded
            elif len(stdout) + len(data) > stdout_limit:
                overflow = True
            else:
                stdout.extend(data)

        outcome = stream_exec(
            state.container.client.api,
            state.container.id,
            ["bash", "-c", script, "bash", *(args or [])],
            env={**command_env("/tmp"), "WORKDIR": state.workdir, "BASE_GIT": BASE_GIT, **env},
            workdir="/",
            timeout_s=timeout_s,
            sink=sink,
        )
        if too_large is not None:
            raise too_large
        if outcome.timed_out or outcome.exit_code != 0 or overflow:
            reason = (
                "timed out"
                if outcome.timed_out
                else f"printed over {stdout_limit} bytes"
                if overflow
                else f"exit code {outcome.exit_code}"
            )
            raise error(f"{what} failed in the container ({reason}): {stderr.text()}")
        return bytes(stdout)

    def _started(self) -> _Container:
        if self._state is None:
            raise SandboxError("sandbox not started; call start(task) first")
        return self._state


def missing_images(client: Any, images: Iterable[str]) -> list[str]:
    """Those of ``images`` the daemon does not hold, in order, once each. The sandbox never
    pulls one (the docker SDK's ``containers.run`` would, were it asked for a missing one)."""
    import docker.errors

    missing = []
    for image in dict.fromkeys(images):
        try:
            _docker_call(f"looking up image {image}", client.images.get, image)
        except SandboxError as error:
            if not isinstance(error.__cause__, docker.errors.ImageNotFound):
                raise
            missing.append(image)
    return missing


def _quota_volume(target: str, size_mb: int) -> Any:
    """An anonymous tmpfs volume of ``size_mb`` at ``target`` (removed with its container).
    A volume, not a plain ``tmpfs`` mount: the daemon's archive API sees into volumes."""
    import docker.types

    options = {"type": "tmpfs", "device": "tmpfs", "o": f"size={size_mb}m"}
    driver = docker.types.DriverConfig("local", options)
    return docker.types.Mount(target, None, type="volume", driver_config=driver)


def _copy_image_directory(client: Any, image: str, directory: str, target: Any) -> None:
    """Copy ``directory`` of ``image`` to the same path in the container ``target``, streamed
    as a tar archive from a container of the image that is created and never started."""
    source = _docker_call(
        f"creating a container from {image}", client.containers.create, image, ["true"]
    )
    try:
        stream, _stat = _docker_call(f"reading {directory}", source.get_archive, directory)
        parent = posixpath.dirname(directory)
        _docker_call("copying the image's repo", target.put_archive, parent, stream)
    finally:
        remove_container(source)


def _least_free_bytes(report: bytes) -> int:
    """The smallest free space in ``COMMAND``'s report (lines of free blocks and block size);
    a report that is missing or unreadable counts as plenty."""
    free = [
        int(fields[0]) * int(fields[1])
        for line in report.decode("ascii", errors="replace").splitlines()
        if len(fields := line.split()) == 2 and all(f.isdigit() for f in fields)
    ]
    return min(free, default=1 << 62)


def _checked_workdir(task: Task) -> str:
    workdir = posixpath.normpath(task.workdir)
    reserved = [
        r for r in _RESERVED_WORKDIRS if workdir == r or (r != "/" and _is_within(workdir, r))
    ]
    if not workdir.startswith("/") or reserved:
        raise SandboxError(
            f"task {task.instance_id}: workdir {task.workdir!r} must be an absolute path "
            f"outside {', '.join(_RESERVED_WORKDIRS)}"
        )
    return workdir


def _pool_key(task: Task, base_image: str) -> str:
    source = task.image_name or f"{base_image}|{task.snapshot_dir}"
    return f"{source}|{task.instance_id}|{task.workdir}"


def _is_within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _changed_paths(container: Any) -> frozenset[str]:
    changes = _docker_call("listing container changes", container.diff) or []
    return frozenset(str(change["Path"]) for change in changes)


def _discard(container: Any) -> None:
    try:
        remove_container(container)
    finally:
        release_slot()


def _docker_call(what: str, function: Any, *args: Any, **kwargs: Any) -> Any:
    import docker.errors

    try:
        return function(*args, **kwargs)
    except docker.errors.DockerException as error:
        raise SandboxError(f"docker failed {what}: {error}") from error
