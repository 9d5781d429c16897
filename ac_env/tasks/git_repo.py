"""Write a task repository as a one-commit git repo, atomically, under the cache directory.

The cache is ``$AUTOCOMPACT_CACHE`` (or ``~/.cache/autocompact``); the built-in suite's task
repositories (a task's ``snapshot_dir``) live in ``tasks/<suite-version>/<instance_id>/``,
the real-code suite's in ``real/<suite-version>/``. A repository is built in a temporary
sibling directory and renamed into place, so an interrupted run never leaves half a
repository. Commits have a fixed identity and date, so the same files give the same hash.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ac_env.host_git import git_text

Result = TypeVar("Result")


def cache_root() -> Path:
    """Where generated tasks are cached."""
    configured = os.environ.get("AUTOCOMPACT_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "autocompact"


def _git(repo: Path, *args: str) -> str:
    return git_text(args, cwd=repo, identity=True).strip()


def write_atomically(target: Path, populate: Callable[[Path], Result]) -> Result:
    """Create the directory ``target`` from what ``populate`` writes into an empty sibling,
    renamed into place, so an interruption never leaves half of it; return what ``populate``
    returned. An existing ``target`` is left as it is (another process finished it first)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        result = populate(staging)
        try:
            staging.rename(target)
        except OSError:
            if not target.exists():
                raise
            shutil.rmtree(staging)
        return result
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def write_repo(target: Path, message: str, populate: Callable[[Path], None]) -> str:
    """Create ``target`` as a git repo holding, in one commit, what ``populate`` writes into
    the (empty) directory it is given (every file, whatever a ``.gitignore`` says); return
    the commit's hash. Atomic, as ``write_atomically``.
    """

    def commit(staging: Path) -> str:
        populate(staging)
        _git(staging, "init", "-q", "-b", "main")
        _git(staging, "add", "-A", "--force")
        _git(staging, "commit", "-q", "-m", message)
        return _git(staging, "rev-parse", "HEAD")

    return write_atomically(target, commit)
