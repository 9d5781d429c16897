"""A library ready to mine: its sdist unpacked into a one-commit git repo, and its layout.

Everything lives under the library's build directory (``<out>/<name>-<version>/``)::

    sdist/      the downloaded archive (kept, so a resumed build does not fetch it again)
    repo/       the unpacked sdist as a one-commit git repo (the unmutated base)
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ac_env.mining.layout import Layout, inspect_layout
from ac_env.mining.sdist import Source, SourceError, commit_tree, fetch_sdist, git, unpack


@dataclass(frozen=True)
class Library:
    source: Source
    directory: Path
    repo: Path
    layout: Layout

    @property
    def commit_message(self) -> str:
        return f"Import {self.source.name} {self.source.version}"


def _has_commit(repo: Path) -> bool:
    try:
        return bool(git(repo, "rev-parse", "--verify", "-q", "HEAD").strip())
    except SourceError:
        return False


def prepare_library(source: Source, directory: Path) -> Library:
    """Fetch, unpack and commit the library (reusing what an earlier run left), then check
    that its sdist ships tests and code to mutate (``SourceError`` saying why not)."""
    repo = directory / "repo"
    if not (repo / ".git").is_dir() or not _has_commit(repo):
        shutil.rmtree(repo, ignore_errors=True)
        archive = fetch_sdist(source, directory / "sdist")
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".repo-", dir=directory) as scratch:
            staging = Path(scratch) / "repo"
            unpack(archive, staging)
            commit_tree(staging, f"Import {source.name} {source.version}")
            staging.rename(repo)
    layout = inspect_layout(repo)
    if not any(path.endswith(".py") for path in layout.test_files):
        raise SourceError(f"the sdist of {source.name} {source.version} ships no tests")
    if not layout.source_modules:
        raise SourceError(f"the sdist of {source.name} {source.version} has no public module")
    return Library(source, directory, repo, layout)
