"""LocalSandbox: a task's repo in a temporary directory, commands run under bubblewrap.

Layout of one started sandbox (a fresh temporary directory, removed by ``close``)::

    work/        what commands can write: a tmpfs of ``disk_quota_mb`` (``quota``) holding
      repo/      the workspace: a copy of the task's snapshot, .git included; commands see it
                 at ``task.workdir`` (``/testbed`` by default) and may change it
      tmp/       the sandbox's /tmp and $HOME; kept across the commands of one episode
    base.git/    the snapshot's objects and HEAD; only ``diff`` mounts it, so whatever commands
                 do to repo/.git, the diff is against the base commit
    bin/         ``python`` and ``python3`` links to the interpreter tasks run with
    etc/         the sandbox's /etc (``bwrap.prepare_etc``)

Mounting the quota's tmpfs needs root (as the project's machines run); any other user gets a
``RuntimeWarning`` saying the quota is not enforced, and ``quota_enforced`` is False: only
``max_file_size_mb`` bounds what a command writes then. A sandbox directory is named after
its process (``autocompact-sandbox-<pid>-*``): the first quota'd ``start`` of a process
unmounts and removes what processes that died without closing theirs left mounted.

Each ``exec`` starts a new bubblewrap sandbox (a few milliseconds; see
``benchmarks/sandbox_roundtrip.py``) whose PID namespace dies with the command: nothing a
command starts survives it. Limits are rlimits set inside, by bash's ``ulimit``: data
segment (memory) and file size per process, and a process count. When the host process is root,
commands run as ``nobody`` (65534), because the kernel never applies RLIMIT_NPROC to root.

``isolation="none"`` runs the same commands as plain subprocesses (same limits, timeouts,
output caps and process-group kill) for machines without bubblewrap. Nothing is hidden then:
commands see the whole host file system and network, and a process that calls ``setsid``
escapes the kill.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import stat
import tempfile
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from ac_env.host_git import SYSTEM_PATH, HostGitError, run_git
from ac_env.sandbox.archive_check import PARTS, check_archive
from ac_env.sandbox.base import ExecResult, SandboxError, SandboxLifecycle, WorkspaceError
from ac_env.sandbox.commands import command_env, command_rejection
from ac_env.sandbox.host_files import UnsafeFileError, read_regular, write_regular
from ac_env.sandbox.local.bwrap import SYSTEM_DIRS, Bind, bwrap_argv, prepare_etc
from ac_env.sandbox.process import RunAs, run_bounded
from ac_env.sandbox.quota import (
    DEFAULT_DISK_QUOTA_MB,
    free_bytes,
    leftover_mounts,
    mount_tmpfs,
    quota_note,
    reached,
    sandbox_prefix,
    unmount,
)
from ac_env.sandbox.workspace_archive import extract_parts, pack_directories
from ac_env.sandbox.workspace_diff import DIFF_SCRIPT
from ac_env.tasks.model import Task

Isolation = Literal["bwrap", "none"]

SANDBOX_DIR = "/opt/sandbox"
"""Where the sandbox's own helpers (interpreter links, base objects) appear under bubblewrap."""
NOBODY = RunAs(uid=65534, gid=65534)
MAX_DIFF_BYTES = 64 * 1024 * 1024
_GIT_TIMEOUT_S = 120.0
_DIFF_FILE = "workspace.patch"
_DIFF_SCRATCH = "diff-scratch"
_GIT_OUTPUT_LIMIT = 64 * 1024
_RESERVED_WORKDIRS = ("/", "/proc", "/dev", "/tmp", "/etc", SANDBOX_DIR, *SYSTEM_DIRS)
_STARTED = "started"
_INSTALL_HINT = (
    "bubblewrap (bwrap) is not installed; install it with `apt-get install -y bubblewrap`, "
    'or pass isolation="none" to run commands without any isolation'
)


@dataclass(frozen=True)
class _Workspace:
    root: Path
    """``work/``: the repo and tmp, on the quota's file system when ``quota_mb`` is set."""
    private: Path
    """The sandbox's directory (``work/``, base.git, bin, etc)."""
    quota_mb: int | None
    repo: Path
    base_commit: str
    workdir: str
    etc_binds: list[Bind]
    remove: weakref.finalize


class LocalSandbox(SandboxLifecycle):
    """The ``Sandbox`` protocol on this machine (see the module docstring for the layout).

    Args:
        isolation: ``"bwrap"`` (default) or ``"none"`` to run commands as plain subprocesses.
        memory_limit_mb: RLIMIT_DATA of every process (heap and private mappings).
        max_processes: RLIMIT_NPROC: processes and threads one sandbox may hold at once.
        max_file_size_mb: RLIMIT_FSIZE: the largest file a command may write.
        python: the interpreter that ``python`` and ``python3`` run inside the sandbox.
        root_dir: where workspaces are created (default: the system's temporary directory).
            A tmpfs such as ``/dev/shm`` makes start and close several times faster (no disk
            metadata), with workspaces in memory (bounded per file by ``max_file_size_mb``).
        disk_quota_mb: the most the workspace and /tmp may hold together (a tmpfs, in
            memory; see the module docstring); None: no quota.
        max_snapshot_mb: the largest archive ``snapshot`` returns (sparse files count at
            their full length).

    Raises ``SandboxError`` when bubblewrap is missing.
    """

    def __init__(
        self,
        isolation: Isolation = "bwrap",
        memory_limit_mb: int = 2048,
        max_processes: int = 256,
        max_file_size_mb: int = 1024,
        python: str = "/usr/bin/python3",
        root_dir: str | None = None,
        disk_quota_mb: int | None = DEFAULT_DISK_QUOTA_MB,
        max_snapshot_mb: int = 1024,
    ) -> None:
        if isolation not in ("bwrap", "none"):
            raise ValueError(f'isolation must be "bwrap" or "none", got {isolation!r}')
        for name, value in (
            ("memory_limit_mb", memory_limit_mb),
            ("max_processes", max_processes),
            ("max_file_size_mb", max_file_size_mb),
            ("max_snapshot_mb", max_snapshot_mb),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        if disk_quota_mb is not None and disk_quota_mb <= 0:
            raise ValueError(f"disk_quota_mb must be > 0 or None, got {disk_quota_mb}")
        self.isolation: Isolation = isolation
        self._bwrap = _find_program("bwrap", _INSTALL_HINT) if isolation == "bwrap" else ""
        self._python = _check_python(python, isolation)
        self._memory_limit_mb = memory_limit_mb
        self._max_processes = max_processes
        self._max_file_size_mb = max_file_size_mb
        self._disk_quota_mb = disk_quota_mb
        self._max_snapshot_bytes = max_snapshot_mb * 1024 * 1024
        if root_dir is not None and not os.path.isdir(root_dir):
            raise ValueError(f"root_dir {root_dir!r} is not a directory")
        self._root_dir = root_dir
        self._run_as = NOBODY if os.geteuid() == 0 else None
        self._workspace: _Workspace | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, task: Task) -> None:
        """Copy ``task.snapshot_dir`` (a one-commit git repo) into a fresh workspace."""
        if self._workspace is not None:
            raise SandboxError("sandbox already started; call reset(task) or close() first")
        snapshot = _check_snapshot(task)
        base_commit = _single_commit(snapshot)
        workdir = self._workdir_for(task) if self.isolation == "bwrap" else None
        if self._disk_quota_mb is not None:
            _remove_leftover_mounts()
        private = Path(tempfile.mkdtemp(prefix=sandbox_prefix(), dir=self._root_dir))
        root, repo = private / "work", private / "work" / "repo"
        root.mkdir()
        quota_mb = self._mount_quota(root)
        try:
            shutil.copytree(snapshot, repo, symlinks=True, ignore=_skip_git_history)
            _make_base_git(snapshot, private / "base.git", base_commit)
            _make_workspace_git(repo / ".git", private / "base.git", base_commit)
            (root / "tmp").mkdir()
            etc_binds = prepare_etc(private / "etc") if self.isolation == "bwrap" else []
            _write_python_links(private / "bin", self._python)
            if self._run_as is not None:
                _chown_tree(private, self._run_as)
        except OSError as error:
            _remove_sandbox_dir(private, quota_mb is not None)
            raise SandboxError(f"could not copy snapshot_dir {snapshot}: {error}") from error
        except BaseException:
            _remove_sandbox_dir(private, quota_mb is not None)
            raise
        self._workspace = _Workspace(
            root=root,
            private=private,
            quota_mb=quota_mb,
            repo=repo,
            base_commit=base_commit,
            workdir=workdir or str(repo),
            etc_binds=etc_binds,
            remove=weakref.finalize(self, _remove_sandbox_dir, private, quota_mb is not None),
        )

    def _mount_quota(self, root: Path) -> int | None:
        """Mount the quota's tmpfs on ``root``; the quota in MB, or None when there is none
        (not asked for, or this process may not mount: then a warning says so)."""
        if self._disk_quota_mb is None:
            return None
        try:
            mount_tmpfs(root, self._disk_quota_mb)
        except OSError as error:
            warnings.warn(
                f"LocalSandbox: disk_quota_mb={self._disk_quota_mb} is not enforced: {error} "
                "(mounting the quota's tmpfs needs root); only max_file_size_mb bounds what "
                "commands write. Pass disk_quota_mb=None to run without a quota knowingly.",
                RuntimeWarning,
                stacklevel=3,
            )
            return None
        return self._disk_quota_mb

    def close(self) -> None:
        """Remove the workspace (also done when the sandbox is garbage collected or the
        interpreter exits). Safe to call twice; no process outlives its command."""
        if self._workspace is not None:
            self._workspace.remove()
            self._workspace = None

    @property
    def workdir(self) -> str:
        """The repo's path as commands see it (their working directory)."""
        return self._started().workdir

    @property
    def workspace(self) -> Path:
        """The repo on the host (for inspection; commands see it at ``workdir``)."""
        return self._started().repo

    @property
    def tmp_dir(self) -> Path:
        """The sandbox's /tmp (and $HOME) on the host."""
        return self._started().root / "tmp"

    @property
    def profile(self) -> str:
        """The settings that can change what a command does or prints (a command cache keys
        on them)."""
        return repr(
            (
                self.isolation,
                self._python,
                self._memory_limit_mb,
                self._max_processes,
                self._max_file_size_mb,
                self._disk_quota_mb,
            )
        )

    @property
    def quota_enforced(self) -> bool:
        """Whether the workspace and /tmp of the started sandbox sit on the quota's tmpfs."""
        return self._started().quota_mb is not None

    @staticmethod
    def check_available(isolation: Isolation = "bwrap") -> None:
        """Raise ``SandboxError`` (saying how to fix it) if ``isolation`` cannot run here."""
        if isolation == "bwrap":
            _find_program("bwrap", _INSTALL_HINT)

    # -- commands ----------------------------------------------------------------------------

    def exec(self, command: str, timeout_s: float, output_limit: int) -> ExecResult:
        """Run ``bash -c command`` in the repo; see ``ExecResult``.

        A command no shell could receive (a NUL character, or longer than Linux allows for one
        argument) is not run: the result says why, with exit code 126, as a shell would.
        """
        workspace = self._started()
        rejection = command_rejection(command)
        if rejection is not None:
            return ExecResult(
                output=f"sandbox: {rejection}\n",
                exit_code=126,
                timed_out=False,
                truncated=False,
                duration_s=0.0,
            )
        result = self._run(workspace, command, timeout_s, output_limit)
        quota_mb = workspace.quota_mb
        if quota_mb is not None and reached(result.output, free_bytes(workspace.root)):
            return dataclasses.replace(result, output=result.output + quota_note(quota_mb))
        return result

    def diff(self) -> str:
        """The workspace's change against the base commit, untracked files included (those
        ``.gitignore`` ignores excepted), as a binary-safe patch that ``git apply`` accepts at
        the base commit. Non-UTF-8 bytes survive as surrogate escapes: encode the patch with
        ``.encode("utf-8", "surrogateescape")`` to get its exact bytes back.

        git runs inside the sandbox (never on the host: the workspace is the agent's) against
        base.git, with no configuration and no attributes from the workspace
        (``workspace_diff``)."""
        workspace = self._started()
        host_git = workspace.private / "base.git"
        scratch, patch_file = host_git / _DIFF_SCRATCH, host_git / _DIFF_FILE
        if scratch.exists():
            _remove_tree(scratch)
        patch_file.unlink(missing_ok=True)
        scratch.mkdir()
        if self._run_as is not None:
            os.lchown(scratch, self._run_as.uid, self._run_as.gid)
        if self.isolation == "bwrap":
            base_git = f"{SANDBOX_DIR}/base.git"
            binds = [Bind(str(host_git), base_git, writable=True)]
        else:
            base_git, binds = str(host_git), []
        env = {
            "BASE": workspace.base_commit,
            "GIT_DIR": base_git,
            "SCRATCH": f"{base_git}/{_DIFF_SCRATCH}",
            "OUT": f"{base_git}/{_DIFF_FILE}",
        }
        result = self._run(
            workspace,
            DIFF_SCRIPT,
            _GIT_TIMEOUT_S,
            _GIT_OUTPUT_LIMIT,
            extra_binds=binds,
            extra_env=env,
        )
        if result.exit_code != 0 or result.timed_out:
            what = "timed out" if result.timed_out else "failed"
            raise WorkspaceError(f"git diff of the workspace {what}: {result.output.strip()}")
        try:
            patch = read_regular(patch_file, MAX_DIFF_BYTES)
        except UnsafeFileError as error:
            raise WorkspaceError(f"workspace diff: {error}") from None
        finally:
            if scratch.exists():
                _remove_tree(scratch)
            patch_file.unlink(missing_ok=True)
        return patch.decode("utf-8", errors="surrogateescape")

    def _run(
        self,
        workspace: _Workspace,
        command: str,
        timeout_s: float,
        output_limit: int,
        *,
        extra_binds: Sequence[Bind] = (),
        extra_env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        started_read, started_write = os.pipe()
        try:
            launcher = self._launcher(started_write, command, workspace.workdir)
            cwd = str(workspace.root)
            if self.isolation == "none":
                argv = launcher
                env = self._env(str(workspace.root / "tmp"), str(workspace.private / "bin"))
            else:
                binds = [*self._binds(workspace), *extra_binds]
                argv = [*bwrap_argv(self._bwrap, binds, "/"), *launcher]
                env = self._env("/tmp", f"{SANDBOX_DIR}/bin")
            result = run_bounded(
                argv,
                env={**env, **(extra_env or {})},
                cwd=cwd,
                timeout_s=timeout_s,
                output_limit=output_limit,
                run_as=self._run_as,
                pass_fds=(started_write,),
            )
            os.close(started_write)
            started_write = -1
            started = _read_available(started_read) == _STARTED.encode()
        finally:
            os.close(started_read)
            if started_write >= 0:
                os.close(started_write)
        if not started and not result.timed_out:
            raise SandboxError(f"the sandbox could not start the command: {result.output.strip()}")
        return result

    def _launcher(self, started_fd: int, command: str, workdir: str) -> list[str]:
        """bash that sets the limits, reports on ``started_fd`` that the sandbox is up, closes
        that fd, enters ``workdir`` and hands over to ``bash -c command``. The command never
        sees the fd, so no report means the sandbox itself failed (bubblewrap's setup, a
        limit), whatever it printed. Entering the workdir comes after the report: a workdir
        a command made unreadable (``chmod 000 .``) is that command's problem, shown to the
        next one as bash's ``cd`` error, never a sandbox failure. (Running the command by
        ``eval`` in this shell would save an exec, about 2 ms, but shows the launcher in
        syntax errors and $BASH_EXECUTION_STRING.)"""
        data_kib, file_kib = self._memory_limit_mb * 1024, self._max_file_size_mb * 1024
        script = (
            f"ulimit -HSu {self._max_processes} -HSd {data_kib} -HSf {file_kib}"
            f" && printf {_STARTED} >&{started_fd} && exec {started_fd}>&-"
            ' && { cd -- "$2"; exec -a bash /bin/bash -c "$1"; }'
        )
        return ["/bin/bash", "-c", script, "bash", command, workdir]

    def _binds(self, workspace: _Workspace) -> list[Bind]:
        return [
            *workspace.etc_binds,
            Bind(str(workspace.private / "bin"), f"{SANDBOX_DIR}/bin"),
            Bind(str(workspace.root / "tmp"), "/tmp", writable=True),
            Bind(str(workspace.repo), workspace.workdir, writable=True),
        ]

    def _env(self, tmp: str, python_bin: str) -> dict[str, str]:
        return {"PATH": f"{python_bin}:{SYSTEM_PATH}", **command_env(tmp)}

    # -- files -------------------------------------------------------------------------------

    def read_file(self, path: str) -> bytes:
        """Bytes of a regular file in the repo (``path`` relative to it, or absolute under
        ``workdir``), at most ``MAX_FILE_BYTES``; a fifo, device or socket is refused
        (``UnsafeFileError``), never opened for a blocking read."""
        return read_regular(self._host_path(path))

    def write_file(self, path: str, data: bytes) -> None:
        """Write a file in the repo, creating its directories; commands may change it later."""
        workspace = self._started()
        target = self._host_path(path)
        missing = [p for p in (target, *target.parents) if not p.exists()]
        target.parent.mkdir(parents=True, exist_ok=True)
        write_regular(target, data)
        if self._run_as is not None:
            for created in missing:
                if created == workspace.repo or workspace.repo in created.parents:
                    os.lchown(created, self._run_as.uid, self._run_as.gid)

    def _host_path(self, path: str) -> Path:
        workspace = self._started()
        relative = PurePosixPath(path)
        if relative.is_absolute():
            if not relative.is_relative_to(workspace.workdir):
                raise ValueError(f"path {path!r} is outside the workspace {workspace.workdir}")
            relative = relative.relative_to(workspace.workdir)
        resolved = (workspace.repo / relative).resolve()
        if resolved != workspace.repo and workspace.repo not in resolved.parents:
            raise ValueError(f"path {path!r} leads outside the workspace")
        return resolved

    # -- snapshots ---------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The workspace as a tar archive (``workspace_archive``): the repo as it is now
        (uncommitted edits, untracked and ignored files, its .git) and the sandbox's /tmp.
        Under bubblewrap commands can write nowhere else. Raises ``SnapshotTooLargeError``
        past ``max_snapshot_mb``."""
        workspace = self._started()
        parts = {"repo": workspace.repo, "tmp": workspace.root / "tmp"}
        mount_points = {"repo": workspace.workdir, "tmp": "/tmp"}
        try:
            return pack_directories(parts, mount_points, self._max_snapshot_bytes)
        except OSError as error:
            raise SandboxError(f"could not archive the workspace: {error}") from error

    def restore(self, archive: bytes) -> None:
        """Replace the repo and /tmp by those ``snapshot`` archived (in this sandbox or in
        another one started on the same task, of either backend). An archive that fails
        ``archive_check`` is refused (``UnsafeArchiveError``) before anything changes."""
        workspace = self._started()
        check_archive(archive)
        for part in PARTS:
            _remove_tree(workspace.root / part)
        try:
            extract_parts(archive, workspace.root)
            if self._run_as is not None:
                for part in PARTS:
                    _chown_tree(workspace.root / part, self._run_as)
        except OSError as error:
            raise SandboxError(f"could not restore the workspace: {error}") from error

    # -- helpers -----------------------------------------------------------------------------

    def _started(self) -> _Workspace:
        if self._workspace is None:
            raise SandboxError("sandbox not started; call start(task) first")
        return self._workspace

    def _workdir_for(self, task: Task) -> str:
        workdir = PurePosixPath(task.workdir)
        reserved = [
            r
            for r in _RESERVED_WORKDIRS
            if workdir == PurePosixPath(r) or (r != "/" and workdir.is_relative_to(r))
        ]
        if not workdir.is_absolute() or reserved:
            raise SandboxError(
                f"task {task.instance_id}: workdir {task.workdir!r} must be an absolute path "
                f"outside {', '.join(_RESERVED_WORKDIRS)}"
            )
        return str(workdir)


def _find_program(name: str, hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SandboxError(hint)
    return path


def _check_python(python: str, isolation: Isolation) -> str:
    if not os.access(python, os.X_OK):
        raise SandboxError(f"python interpreter {python!r} does not exist or is not executable")
    resolved = os.path.realpath(python)
    visible = any(resolved.startswith(f"{d}/") for d in SYSTEM_DIRS)
    if isolation == "bwrap" and not visible:
        raise SandboxError(
            f"python interpreter {python!r} ({resolved}) is not under {', '.join(SYSTEM_DIRS)}, "
            "the only system directories a bubblewrap sandbox sees"
        )
    return python


def _check_snapshot(task: Task) -> Path:
    if task.snapshot_dir is None:
        raise SandboxError(
            f"task {task.instance_id} has no snapshot_dir; the local sandbox needs one "
            "(tasks that live in a Docker image need the docker sandbox)"
        )
    snapshot = Path(task.snapshot_dir)
    if not (snapshot / ".git").is_dir():
        raise SandboxError(
            f"task {task.instance_id}: snapshot_dir {snapshot} is missing or not a git repository"
        )
    return snapshot


def _single_commit(snapshot: Path) -> str:
    """The snapshot's only commit (snapshots hide history, so a fix cannot be looked up)."""
    try:
        commits = _host_git(snapshot, "rev-list", "--max-count=2", "HEAD").decode().split()
    except SandboxError as error:
        raise SandboxError(
            f"snapshot_dir {snapshot} must be a git repository with exactly one commit ({error})"
        ) from None
    if len(commits) != 1:
        raise SandboxError(
            f"snapshot_dir {snapshot} must be a git repository with exactly one commit "
            f"({len(commits)}+ commits)"
        )
    return commits[0]


_GIT_HISTORY = {"hooks", "objects", "refs", "logs", "packed-refs", "ORIG_HEAD", "FETCH_HEAD"}
"""What of the snapshot's .git is not copied: hooks, and everything that could hold or point at
objects besides the base commit's (a fix left in a dangling blob, a reflog, another branch)."""


def _skip_git_history(directory: str, names: list[str]) -> set[str]:
    return _GIT_HISTORY & set(names) if os.path.basename(directory) == ".git" else set()


def _make_base_git(snapshot: Path, base_git: Path, base_commit: str) -> None:
    """A bare minimum git directory holding the base commit's objects (those reachable from it,
    packed; nothing else of the snapshot's) and nothing a command can touch: HEAD at the base
    commit, no config, the snapshot's info/exclude."""
    pack_dir = base_git / "objects" / "pack"
    pack_dir.mkdir(parents=True)
    pack, index = _base_pack(str(snapshot), base_commit)
    (pack_dir / "pack-base.pack").write_bytes(pack)
    (pack_dir / "pack-base.idx").write_bytes(index)
    (base_git / "refs").mkdir()
    (base_git / "HEAD").write_text(f"{base_commit}\n")
    exclude = snapshot / ".git" / "info" / "exclude"
    if exclude.is_file():
        (base_git / "info").mkdir()
        shutil.copyfile(exclude, base_git / "info" / "exclude")


@functools.lru_cache(maxsize=64)
def _base_pack(snapshot: str, base_commit: str) -> tuple[bytes, bytes]:
    """The pack of the objects reachable from ``base_commit`` and its index. Objects are
    content-addressed, so a (snapshot, commit) pair always packs the same: each episode on
    the same task reuses it instead of running three git processes."""
    objects = _host_git(Path(snapshot), "rev-list", "--objects", base_commit)
    pack = _host_git(Path(snapshot), "pack-objects", "--stdout", "-q", stdin=objects)
    with tempfile.TemporaryDirectory(prefix="autocompact-pack-") as scratch:
        pack_path = Path(scratch) / "base.pack"
        pack_path.write_bytes(pack)
        _host_git(Path(scratch) / "x.git", "index-pack", str(pack_path))
        return pack, pack_path.with_suffix(".idx").read_bytes()


def _make_workspace_git(repo_git: Path, base_git: Path, base_commit: str) -> None:
    """The workspace's history: the base commit's objects only, HEAD's branch at it."""
    head = (repo_git / "HEAD").read_text().strip()
    branch = head.removeprefix("ref: ") if head.startswith("ref: refs/heads/") else None
    shutil.copytree(base_git / "objects", repo_git / "objects")
    (repo_git / "refs" / "heads").mkdir(parents=True)
    (repo_git / "refs" / "tags").mkdir()
    if branch is None:
        (repo_git / "HEAD").write_text(f"{base_commit}\n")
    else:
        ref = repo_git / branch
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(f"{base_commit}\n")


def _host_git(repo: Path, *args: str, stdin: bytes = b"") -> bytes:
    """Run git on the host on the task's own data (never on a workspace)."""
    git_dir = repo if repo.name.endswith(".git") else repo / ".git"
    try:
        return run_git(args, git_dir=git_dir, stdin=stdin)
    except HostGitError as error:
        raise SandboxError(str(error)) from None


def _write_python_links(bin_dir: Path, python: str) -> None:
    bin_dir.mkdir()
    for name in ("python", "python3"):
        (bin_dir / name).symlink_to(python)


def _chown_tree(root: Path, owner: RunAs) -> None:
    os.lchown(root, owner.uid, owner.gid)
    for directory, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            os.lchown(os.path.join(directory, name), owner.uid, owner.gid)


@functools.cache
def _remove_leftover_mounts() -> None:
    """Once per process: unmount and remove the quota file systems of dead processes."""
    for mountpoint in leftover_mounts():
        try:
            _remove_sandbox_dir(mountpoint.parent, mounted=True)
        except OSError:  # another process's cleanup got there first, or not ours to touch
            continue


def _remove_sandbox_dir(private: Path, mounted: bool) -> None:
    if mounted:
        unmount(private / "work")
    _remove_tree(private)


def _remove_tree(root: Path) -> None:
    """Remove ``root`` even where a command took away its own permissions."""

    def make_writable_and_retry(
        function: Callable[[str], object], path: str, _excinfo: object
    ) -> None:
        parent = os.path.dirname(path)
        os.chmod(parent, os.stat(parent).st_mode | stat.S_IRWXU)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, os.stat(path).st_mode | stat.S_IRWXU)
        function(path)

    shutil.rmtree(root, onerror=make_writable_and_retry)


def _read_available(fd: int) -> bytes:
    """What a pipe holds once every writer has closed it."""
    chunks = []
    os.set_blocking(fd, False)
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)
