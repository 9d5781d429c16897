"""Which files of an unpacked library are its tests and which are code to put bugs in.

Test files: everything under a directory named ``tests``/``test``/``testing``, and any
``test_*.py``, ``*_test.py`` or ``conftest.py``; grading restores all of them. Mutation
targets: the other ``.py`` files inside a package (a directory with ``__init__.py``, under
``src/`` or the root), except private modules (a path part starting with ``_``, other than
``__init__.py``) and build or documentation scripts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ac_env.grading.patch_filter import looks_like_test

SKIPPED_DIRS = frozenset({".git", "docs", "doc", "examples", "benchmarks", "scripts", "tools"})
SKIPPED_FILES = frozenset({"setup.py", "conftest.py", "noxfile.py", "fabfile.py"})


@dataclass(frozen=True)
class Layout:
    test_files: list[str]
    source_modules: list[str]
    python_path: str | None  # "src" for a src layout, else None (the root is on sys.path)

    def module_name(self, path: str) -> str:
        """``toolz/itertoolz.py`` -> ``toolz.itertoolz``."""
        parts = list(PurePosixPath(path).with_suffix("").parts)
        if self.python_path and parts[0] == self.python_path:
            parts = parts[1:]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        return ".".join(parts)


def is_test_file(path: str) -> bool:
    return looks_like_test(path) or PurePosixPath(path).name == "conftest.py"


def _is_target(repo: Path, path: str) -> bool:
    parts = PurePosixPath(path).parts
    if not path.endswith(".py") or parts[-1] in SKIPPED_FILES or is_test_file(path):
        return False
    if any(part in SKIPPED_DIRS or part.endswith(".egg-info") for part in parts[:-1]):
        return False
    if any(part.startswith("_") for part in parts[:-1]):
        return False
    if parts[-1].startswith("_") and parts[-1] != "__init__.py":
        return False
    return (repo / path).parent.joinpath("__init__.py").is_file() and len(parts) > 1


def inspect_layout(repo: Path) -> Layout:
    files = sorted(
        p.relative_to(repo).as_posix()
        for p in repo.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    )
    tests = [path for path in files if is_test_file(path)]
    sources = [path for path in files if _is_target(repo, path)]
    src_layout = any(PurePosixPath(p).parts[0] == "src" for p in sources)
    return Layout(tests, sources, "src" if src_layout else None)
