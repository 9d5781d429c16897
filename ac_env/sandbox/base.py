"""The Sandbox protocol: where an episode's commands run and its workspace lives."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from ac_env.tasks.model import Task

TRUNCATION_MARKER = "\n[... output truncated: {omitted} bytes omitted ...]\n"


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one command. ``output`` is stdout and stderr interleaved, decoded with
    replacement characters, and capped (the cap's marker says how much was dropped)."""

    output: str
    exit_code: int
    timed_out: bool
    truncated: bool
    duration_s: float


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the command): an infrastructure error."""


class WorkspaceError(SandboxError):
    """The workspace cannot be read back as a patch because of what commands did to it (a
    patch over the size limit, files or directories git cannot read, a diff past its time
    limit): the agent's failure, which grades 0, never an infrastructure error."""


@runtime_checkable
class Sandbox(Protocol):
    """A workspace holding one task's repo, and a way to run commands in it.

    ``start`` materializes a fresh copy of the task's repo (a one-commit git repo);
    ``exec`` runs one shell command with the repo as working directory; ``diff`` is the
    workspace's change against the base commit (new files included), which is what gets graded.
    ``snapshot`` archives everything commands may have changed (the repo, uncommitted and
    untracked files included, and /tmp; ``workspace_archive``, capped); ``restore`` puts such
    an archive back, into this sandbox or another one started on the same task, once
    ``archive_check`` passed it (whichever backend made it). ``reset`` is ``close`` then
    ``start``: a fresh workspace for the next episode (a backend may make it cheaper).
    """

    def start(self, task: Task) -> None: ...

    def reset(self, task: Task) -> None: ...

    def exec(self, command: str, timeout_s: float, output_limit: int) -> ExecResult: ...

    def read_file(self, path: str) -> bytes: ...

    def write_file(self, path: str, data: bytes) -> None: ...

    def diff(self) -> str: ...

    def snapshot(self) -> bytes: ...

    def restore(self, archive: bytes) -> None: ...

    def close(self) -> None: ...


class SandboxLifecycle(ABC):
    """What every backend's lifecycle shares: ``reset`` as ``close`` then ``start``, and use as
    a context manager that closes on exit. A backend subclasses it, defines ``start`` and
    ``close``, and the rest of ``Sandbox``."""

    @abstractmethod
    def start(self, task: Task) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    def reset(self, task: Task) -> None:
        self.close()
        self.start(task)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
