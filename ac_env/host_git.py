"""The one way the host runs git: on the project's own data (task snapshots, mined sources, the
real-code suite's trees), never with anybody's configuration.

Every call runs with no system, global or repository-supplied behaviour that could run code or
change what git reads: no system or global config files (``GIT_CONFIG_NOSYSTEM``,
``GIT_CONFIG_GLOBAL=/dev/null``), no hooks (``core.hooksPath=/dev/null``), no filesystem
monitor (``core.fsmonitor=false``), no attributes file (``core.attributesFile=/dev/null``,
``GIT_ATTR_NOSYSTEM``), no pager or prompt, and ``safe.directory=*`` (the data may belong to
another user). ``ceiling`` stops git from finding a repository above a tree that has none.
Commits made with ``identity=True`` carry a fixed author, committer and date, so the same files
give the same hash. A workspace the agent wrote is never passed here: git runs on it inside the
sandbox only (``ac_env.sandbox.workspace_diff``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""Where the system's programs are (git's ``PATH`` when the host has none; the sandboxes')."""
COMMIT_DATE = "2024-01-15T12:00:00+00:00"
ISOLATION = (
    "-c",
    "safe.directory=*",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.attributesFile=/dev/null",
)
IDENTITY = (
    "-c",
    "user.name=AutoCompact",
    "-c",
    "user.email=tasks@autocompact.invalid",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "core.autocrlf=false",
)


class HostGitError(RuntimeError):
    """git failed; the message holds the subcommand, where, and git's own error."""


def run_git(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    git_dir: Path | None = None,
    stdin: bytes | None = None,
    identity: bool = False,
    ceiling: Path | None = None,
) -> bytes:
    """``git args`` (in ``cwd``, or on the repository ``git_dir``) isolated as the module
    docstring says; its standard output. Raises ``HostGitError`` when git fails or cannot
    start."""
    env = {
        "PATH": os.environ.get("PATH", SYSTEM_PATH),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "LC_ALL": "C",
    }
    if git_dir is not None:
        env["GIT_DIR"] = str(git_dir)
    if ceiling is not None:
        env["GIT_CEILING_DIRECTORIES"] = str(ceiling)
    if identity:
        env |= {"GIT_AUTHOR_DATE": COMMIT_DATE, "GIT_COMMITTER_DATE": COMMIT_DATE}
    command = ["git", *ISOLATION, *(IDENTITY if identity else ()), *args]
    where = git_dir or cwd or Path.cwd()
    try:
        result = subprocess.run(
            command, cwd=cwd, env=env, input=stdin, capture_output=True, check=False
        )
    except OSError as error:
        raise HostGitError(f"git {args[0]} on {where}: cannot run git: {error}") from error
    if result.returncode != 0:
        stderr = result.stderr.decode("utf-8", "replace").strip()
        raise HostGitError(f"git {args[0]} failed on {where}: {stderr}")
    return result.stdout


def git_text(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    stdin: str | None = None,
    identity: bool = False,
    ceiling: Path | None = None,
) -> str:
    """``run_git`` on text: ``stdin`` encoded, the output decoded (UTF-8, bytes that are not
    kept as surrogate escapes)."""
    data = None if stdin is None else stdin.encode("utf-8", "surrogateescape")
    output = run_git(args, cwd=cwd, stdin=data, identity=identity, ceiling=ceiling)
    return output.decode("utf-8", "surrogateescape")


__all__ = ["COMMIT_DATE", "SYSTEM_PATH", "HostGitError", "git_text", "run_git"]
