"""Which parts of the agent's diff reach the grader: product source, nothing else.

The diff is split per file and each file is judged by its path (against the base commit's file
list) and by what the diff does to it. Kept: text changes to tracked files inside the
project's source directories (a directory holding tracked non-test ``.py`` files; the
repository root counts only for its own tracked ``.py`` modules), new ``.py`` files in such a
directory or in a new directory below one, and any file the gold patch changes. Dropped
without blame (``ignored``): test files (``task.test_files``, ``test_patch``'s files, the
modules the graded ids name, and test-looking paths), scratch files outside the source
directories, non-``.py`` new files and binary changes. Dropped as tampering (``tampered``):
what can only be aimed at the grader: pytest configuration files and ``conftest.py``, Python
start-up hooks (``sitecustomize.py``, ``usercustomize.py``, ``.pth``), bytecode, symbolic
links, and new top-level modules named like pytest's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ac_env.tasks.model import Task

PYTEST_CONFIGS = frozenset({"pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"})
"""Files pytest reads its configuration from, in any directory it may look in."""
STARTUP_HOOKS = frozenset({"sitecustomize.py", "usercustomize.py"})
PYTEST_MODULES = frozenset({"pytest", "_pytest", "pluggy", "py", "iniconfig"})
"""Top-level module names whose shadowing would replace the test runner itself (a new one is
tampering; the project's own, for pytest's repository, is product source)."""
TEST_DIRS = frozenset({"tests", "test", "testing"})
BYTECODE_SUFFIXES = (".pyc", ".pyo")
SYMLINK_MODE = "120000"
_MODE = re.compile(r"^(?:new file|deleted file|old|new) mode (\d+)$")
_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


@dataclass(frozen=True)
class FileChange:
    """One file's section of a unified git diff."""

    path: str
    text: str
    modes: tuple[str, ...]
    binary: bool
    deleted: bool
    created: bool


@dataclass
class FilteredPatch:
    """The patch to grade and what was left out of it (path -> reason)."""

    patch: str = ""
    kept: list[str] = field(default_factory=list)
    ignored: dict[str, str] = field(default_factory=dict)
    tampered: dict[str, str] = field(default_factory=dict)


def split_diff(patch: str) -> list[FileChange]:
    """The per-file sections of a ``git diff`` (``--no-renames``, binary or not)."""
    sections: list[list[str]] = []
    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git "):
            sections.append([line])
        elif sections:
            sections[-1].append(line)
    return [_change(lines) for lines in sections]


def _change(lines: list[str]) -> FileChange:
    path = _header_path(lines[0].rstrip("\n").removeprefix("diff --git "))
    modes: list[str] = []
    binary = deleted = created = False
    for line in lines[1:]:
        if line.startswith(("@@", "GIT binary patch")):
            binary = binary or line.startswith("GIT binary patch")
            break
        stripped = line.rstrip("\n")
        if stripped.startswith("Binary files "):
            binary = True
        if (mode := _MODE.match(stripped)) is not None:
            modes.append(mode.group(1))
        deleted = deleted or stripped.startswith("deleted file mode")
        created = created or stripped.startswith("new file mode")
    return FileChange(path, "".join(lines), tuple(modes), binary, deleted, created)


def _header_path(names: str) -> str:
    """The path of ``a/PATH b/PATH`` (the same path twice: diffs here have no renames)."""
    if names.startswith('"'):
        end = re.match(r'"(?:[^"\\]|\\.)*"', names)
        if end is None:
            raise ValueError(f"unreadable diff header: {names!r}")
        return _unquote(end.group(0)).removeprefix("a/")
    half = (len(names) - 5) // 2
    if names.startswith("a/") and names[2 + half : 5 + half] == " b/":
        return names[2 : 2 + half]
    raise ValueError(f"unreadable diff header: {names!r}")


def _unquote(name: str) -> str:
    """A path as git writes it: C-quoted (octal bytes, UTF-8) when it holds special characters."""
    if not (name.startswith('"') and name.endswith('"')):
        return name
    raw, body, i = bytearray(), name[1:-1], 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            raw += char.encode("utf-8", "surrogateescape")
            i += 1
        elif body[i + 1 : i + 4].isdigit():
            raw.append(int(body[i + 1 : i + 4], 8))
            i += 4
        else:
            raw.append(_C_ESCAPES.get(body[i + 1], ord(body[i + 1])))
            i += 2
    return raw.decode("utf-8", "surrogateescape")


def patch_paths(patch: str) -> set[str]:
    return {change.path for change in split_diff(patch)}


def graded_test_files(task: Task) -> set[str]:
    """Files that judge the patch: the task's test files, ``test_patch``'s, the graded modules."""
    ids = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    return {
        *task.test_files,
        *patch_paths(task.test_patch),
        *(test_id.split("::", 1)[0] for test_id in ids),
    }


def filter_patch(patch: str, task: Task, base_files: list[str]) -> FilteredPatch:
    """Keep the product-source part of ``patch`` (see the module docstring)."""
    result = FilteredPatch()
    gold = patch_paths(task.patch)
    tests = graded_test_files(task)
    source_dirs = _source_dirs(base_files, tests)
    tracked = set(base_files)
    tops = {PurePosixPath(path).parts[0] for path in base_files}
    kept_text: list[str] = []
    for change in split_diff(patch):
        tampering = _tampering(change, gold, tops)
        if tampering is not None:
            result.tampered[change.path] = tampering
            continue
        reason = _ignored(change, gold, tests, tracked, source_dirs)
        if reason is not None:
            result.ignored[change.path] = reason
            continue
        result.kept.append(change.path)
        kept_text.append(change.text)
    result.patch = "".join(kept_text)
    return result


def _tampering(change: FileChange, gold: set[str], tops: set[str]) -> str | None:
    parts = PurePosixPath(change.path).parts
    name = parts[-1]
    if SYMLINK_MODE in change.modes:
        return "a symbolic link"
    if "__pycache__" in parts or name.endswith(BYTECODE_SUFFIXES):
        return "Python bytecode"
    if name in STARTUP_HOOKS or name.endswith(".pth"):
        return "a Python start-up hook"
    if name == "conftest.py":
        return "a pytest conftest.py"
    if name in PYTEST_CONFIGS and change.path not in gold:
        return "a pytest configuration file"
    top = parts[0]
    if change.created and top not in tops and PurePosixPath(top).stem in PYTEST_MODULES:
        return "a module named like the test runner's own"
    return None


def _ignored(
    change: FileChange, gold: set[str], tests: set[str], tracked: set[str], source_dirs: set[str]
) -> str | None:
    if change.path in gold:
        return "a binary change" if change.binary else None
    if change.path in tests or looks_like_test(change.path):
        return "a test file (tests are graded as the task ships them)"
    if change.binary:
        return "a binary change"
    parent = str(PurePosixPath(change.path).parent)
    if change.path in tracked:
        in_source = parent in source_dirs or (parent == "." and change.path.endswith(".py"))
        return None if in_source else "not product source"
    if not change.path.endswith(".py"):
        return "a new file that is not a Python module"
    if parent != "." and any(d in source_dirs for d in _self_and_parents(parent)):
        return None
    return "a new module outside the project's source directories"


def _source_dirs(base_files: list[str], tests: set[str]) -> set[str]:
    """Directories (not the root) holding tracked non-test ``.py`` files."""
    return {
        str(PurePosixPath(path).parent)
        for path in base_files
        if path.endswith(".py") and path not in tests and not looks_like_test(path)
    } - {"."}


def looks_like_test(path: str) -> bool:
    parts = PurePosixPath(path).parts
    name = parts[-1]
    return (
        any(part in TEST_DIRS for part in parts[:-1])
        or (name.startswith("test_") and name.endswith(".py"))
        or name.endswith("_test.py")
    )


def _self_and_parents(directory: str) -> list[str]:
    path = PurePosixPath(directory)
    return [str(p) for p in (path, *path.parents) if str(p) != "."]


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def added_lines(patch: str) -> dict[str, list[int]]:
    """For each file of ``patch``, the line numbers (in the patched file) of the lines it adds:
    the code the agent wrote, which the grader's guard and detectors watch."""
    added: dict[str, list[int]] = {}
    for change in split_diff(patch):
        if change.binary or change.deleted:
            continue
        lines: list[int] = []
        number = 0
        for line in change.text.splitlines():
            hunk = _HUNK.match(line)
            if hunk is not None:
                number = int(hunk.group(1))
            elif number and line.startswith("+"):
                lines.append(number)
                number += 1
            elif number and line.startswith(" "):
                number += 1
        if lines:
            added[change.path] = lines
    return added
