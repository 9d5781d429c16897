"""Tasks derived from other tasks by editing their test files: the shared machinery.

``ac_env.tasks.impossible`` (a test made to contradict the statement) and
``ac_env.tasks.hidden_tests`` (the FAIL_TO_PASS tests taken out of the workspace) both find a
test's function by its pytest id, read a test file as grading sees it (the committed file with
the task's ``test_patch`` applied) and write the derived task's repository: a copy of the
task's snapshot with some files replaced, committed once under
``<cache>/<kind>/<digest of the task and the derivation>/<instance_id>/``.
"""

from __future__ import annotations

import ast
import hashlib
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ac_env.host_git import git_text
from ac_env.paths import safe_child
from ac_env.tasks.git_repo import cache_root, write_repo
from ac_env.tasks.model import Task


def find_test_function(tree: ast.Module, test_id: str) -> ast.FunctionDef | None:
    """The function a pytest id (``path::Class::name[param]``) names in its module (a method
    a class inherits from a base class of the same module included)."""
    names = test_id.split("::")[1:]
    if not names:
        return None
    names[-1] = names[-1].split("[", 1)[0]
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    if len(names) == 1:
        return functions.get(names[0])
    scope = classes.get(names[0])
    for name in names[1:-1]:
        nested = [n for n in scope.body if isinstance(n, ast.ClassDef)] if scope else []
        scope = next((n for n in nested if n.name == name), None)
    return _method(scope, names[-1], classes, set()) if scope else None


def _method(
    scope: ast.ClassDef, name: str, classes: dict[str, ast.ClassDef], seen: set[str]
) -> ast.FunctionDef | None:
    for node in scope.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    seen.add(scope.name)
    for base in scope.bases:
        if isinstance(base, ast.Name) and base.id in classes and base.id not in seen:
            found = _method(classes[base.id], name, classes, seen)
            if found is not None:
                return found
    return None


def patch_sections(patch: str) -> dict[str, str]:
    """A git diff's per-file sections by the path they change."""
    sections = re.split(r"(?m)^(?=diff --git )", patch)
    return {
        section.split("\n", 1)[0].split(" b/", 1)[1]: section
        for section in sections
        if section.startswith("diff --git ")
    }


def graded_source(task: Task, path: str, snapshot: Path) -> tuple[str, str]:
    """(the file as committed, the file as graded: with its ``test_patch`` section applied)."""
    committed = (snapshot / path).read_text()
    section = patch_sections(task.test_patch).get(path)
    if section is None:
        return committed, committed
    with tempfile.TemporaryDirectory(prefix="derived-task-") as scratch:
        tree = Path(scratch) / "tree"
        (tree / path).parent.mkdir(parents=True)
        (tree / path).write_text(committed)
        git_text(
            ["apply", "--whitespace=nowarn", "-"], cwd=tree, stdin=section, ceiling=Path(scratch)
        )
        return committed, (tree / path).read_text()


def derived_repo(task: Task, kind: str, version: str, files: Mapping[str, str]) -> tuple[Path, str]:
    """The repository of a task derived from ``task``: its snapshot with ``files`` (path ->
    new text) replaced, committed once; (its directory, its commit).
    ``version`` names the derivation (bump it when the derivation changes)."""
    source = task.snapshot_dir
    if source is None:
        raise ValueError(f"{task.instance_id}: no snapshot_dir to derive a task from")
    digest = hashlib.sha256(
        f"{version}\0{task.model_dump_json()}\0{sorted(files.items(), key=str)}".encode()
    ).hexdigest()[:12]
    snapshot = safe_child(cache_root() / kind / digest, task.instance_id)

    def populate(staging: Path) -> None:
        shutil.copytree(source, staging, symlinks=True, dirs_exist_ok=True, ignore=_no_git)
        for path, text in files.items():
            (staging / path).write_text(text)

    if (snapshot / ".git").is_dir():
        return snapshot, _head(snapshot)
    return snapshot, write_repo(snapshot, f"{task.repo}: {kind} variant", populate)


def _no_git(directory: str, names: list[str]) -> set[str]:
    return {".git"} if ".git" in names else set()


def _head(repo: Path) -> str:
    return git_text(["rev-parse", "HEAD"], cwd=repo).strip()
