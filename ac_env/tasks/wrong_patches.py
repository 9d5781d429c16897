"""Plausible wrong patches for a task, made from its gold patch: what a weak verifier accepts.

Three families, each a diff against the task's buggy base commit, like an agent's:

- ``near_miss``: the fixed code with another mutation at the bug site (a line the gold patch
  adds or changes): the ``ac_env.tasks.synthetic.mutations`` operators (comparison flipped,
  ``==``/``in``/``is`` negated, ``and``/``or`` swapped, operator swapped, constant or bound
  moved by one, arguments swapped, a guard or call dropped) plus a condition forced to
  ``True`` or ``False`` and an integer constant moved by one either way;
- ``partial_fix``: the gold patch less one of its hunks (a multi-bug task fixed in every
  place but one; one bug's fix reverted in one place out of several).

A wrong patch that leaves the file as the bug had it (the empty patch) or as the gold patch
makes it is not generated. ``equivalent`` is True only when the patched modules parse to the
same AST as the gold-patched ones (formatting, comments and parentheses aside): provably the
same program. Every other wrong patch is, as far as this module can tell, a different program;
``ac_env.mining.wider_suite`` decides it further with the library's whole test suite.
"""

from __future__ import annotations

import ast
import hashlib
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ac_env.host_git import HostGitError, git_text
from ac_env.tasks.model import Task
from ac_env.tasks.synthetic.mutations import Mutation, apply_mutations, find_mutations
from ac_env.tasks.synthetic.project import unified_diff

Family = Literal["near_miss", "partial_fix", "silenced_symptom", "special_case"]
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
# Near misses kept per task, in this order of operators (deterministic; the first kinds are
# those public audits found accepted most often).
MAX_NEAR_MISSES = 6
_PRIORITY = (
    "forced_condition",
    "inverted_condition",
    "comparison_flip",
    "constant_moved",
    "wrong_constant",
    "off_by_one",
    "arithmetic_swap",
    "dropped_branch",
    "removed_call",
    "swapped_arguments",
    "wrong_default",
)


@dataclass(frozen=True)
class WrongPatch:
    """One generated wrong patch: a diff against the task's base commit."""

    family: Family
    operator: str
    description: str
    patch: str
    equivalent: bool
    files: dict[str, str]
    """The files the gold patch changes, as this wrong patch leaves them."""

    @property
    def key(self) -> str:
        """A stable name within its task."""
        return hashlib.sha1(self.patch.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class _FileDiff:
    path: str
    header: str
    hunks: tuple[str, ...]


def split_hunks(patch: str) -> list[_FileDiff]:
    """The file sections of a unified git diff, each cut into its header and hunks."""
    files: list[_FileDiff] = []
    for section in re.split(r"(?m)^(?=diff --git )", patch):
        if not section.startswith("diff --git "):
            continue
        parts = re.split(r"(?m)^(?=@@ )", section)
        path = section.split("\n", 1)[0].split(" b/", 1)[1]
        files.append(_FileDiff(path=path, header=parts[0], hunks=tuple(parts[1:])))
    return files


def changed_lines(patch: str) -> dict[str, set[int]]:
    """Per file, the new-side line numbers the patch adds (or, for a pure deletion, the line
    after the deleted ones)."""
    changed: dict[str, set[int]] = {}
    for diff in split_hunks(patch):
        lines = changed.setdefault(diff.path, set())
        for hunk in diff.hunks:
            match = _HUNK.match(hunk)
            if match is None:
                continue
            number = int(match.group(1))
            for line in hunk.splitlines()[1:]:
                if line.startswith("+"):
                    lines.add(number)
                    number += 1
                elif line.startswith("-"):
                    lines.add(number)
                elif not line.startswith("\\"):
                    number += 1
    return changed


def _apply(patch: str, files: dict[str, str]) -> dict[str, str]:
    """``files`` (path -> text) with ``patch`` applied, by ``git apply`` in a scratch tree."""
    with tempfile.TemporaryDirectory(prefix="wrong-patches-") as scratch:
        tree = Path(scratch) / "tree"
        for path, text in files.items():
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            (tree / path).write_text(text)
        try:
            git_text(
                ["apply", "--whitespace=nowarn", "-"], cwd=tree, stdin=patch, ceiling=Path(scratch)
            )
        except HostGitError as error:
            raise ValueError(f"patch does not apply: {error}") from None
        return {path: (tree / path).read_text() for path in files}


def _same_program(left: str, right: str) -> bool:
    try:
        return ast.dump(ast.parse(left)) == ast.dump(ast.parse(right))
    except SyntaxError:
        return False


class _BugSite(ast.NodeVisitor):
    """Forced conditions and constants moved either way, on the changed lines."""

    def __init__(self, path: str, source: str, lines: set[int]) -> None:
        self.path = path
        self.source_lines = source.splitlines(keepends=True)
        self.lines = lines
        self.found: list[Mutation] = []
        self.function = ""

    def _touches(self, node: ast.AST) -> bool:
        start = getattr(node, "lineno", 0)
        end = getattr(node, "end_lineno", start) or start
        return any(start <= line <= end for line in self.lines)

    def _col(self, line: int, byte_col: int) -> int:
        return len(self.source_lines[line - 1].encode()[:byte_col].decode())

    def _replace(self, operator: str, node: ast.expr, replacement: str) -> None:
        line, end_line = node.lineno, node.end_lineno or node.lineno
        col = self._col(line, node.col_offset)
        end_col = self._col(end_line, node.end_col_offset or 0)
        text = "".join(self.source_lines[line - 1 : end_line])
        start = col
        stop = len(text) - len(self.source_lines[end_line - 1]) + end_col
        original = text[start:stop]
        if original != replacement:
            self.found.append(
                Mutation(
                    file=self.path,
                    function=self.function,
                    operator=operator,
                    line=line,
                    col=col,
                    end_line=end_line,
                    end_col=end_col,
                    original=original,
                    replacement=replacement,
                )
            )

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        outer, self.function = self.function, node.name
        self.generic_visit(node)
        self.function = outer

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_If(self, node: ast.If) -> None:
        if self._touches(node.test):
            for value in ("True", "False"):
                self._replace("forced_condition", node.test, value)
        self.generic_visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        if self._touches(node.test):
            for value in ("True", "False"):
                self._replace("forced_condition", node.test, value)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if type(value) is int and self._touches(node):
            for moved in (value - 1, value + 1):
                self._replace("constant_moved", node, str(moved))


def _near_misses(path: str, fixed: str, lines: set[int]) -> list[Mutation]:
    try:
        tree = ast.parse(fixed)
    except SyntaxError:
        return []
    site = _BugSite(path, fixed, lines)
    site.visit(tree)
    found = [
        mutation
        for mutation in find_mutations(path, fixed)
        if any(mutation.line <= line <= mutation.end_line for line in lines)
    ]
    return site.found + found


def fixed_files(task: Task) -> dict[str, str]:
    """The files the gold patch changes, as it leaves them."""
    if task.snapshot_dir is None:
        raise ValueError(f"{task.instance_id}: no snapshot_dir to read the buggy files from")
    paths = changed_lines(task.patch)
    return _apply(task.patch, {path: (task.snapshot_dir / path).read_text() for path in paths})


def wrong_patches(task: Task, limit: int = MAX_NEAR_MISSES) -> list[WrongPatch]:
    """The wrong patches of ``task`` (its ``snapshot_dir`` must exist): up to ``limit`` near
    misses and one partial fix per hunk of a multi-hunk gold patch, each distinct."""
    if task.snapshot_dir is None:
        raise ValueError(f"{task.instance_id}: no snapshot_dir to read the buggy files from")
    buggy = {path: (task.snapshot_dir / path).read_text() for path in changed_lines(task.patch)}
    return wrong_patches_of(task.patch, buggy, limit)


def wrong_patches_of(
    gold_patch: str, buggy: dict[str, str], limit: int = MAX_NEAR_MISSES
) -> list[WrongPatch]:
    """The wrong patches of a gold patch, given the files it changes as the bug leaves them
    (path -> text): what ``wrong_patches`` makes of a task, without a snapshot."""
    changed = changed_lines(gold_patch)
    fixed = _apply(gold_patch, buggy)
    seen = {_signature(buggy), _signature(fixed)}
    results: list[WrongPatch] = []

    def add(family: Family, operator: str, description: str, files: dict[str, str]) -> None:
        signature = _signature(files)
        if signature in seen:
            return
        seen.add(signature)
        patch = "".join(
            unified_diff(path, buggy[path], files[path])
            for path in sorted(files)
            if files[path] != buggy[path]
        )
        equivalent = all(_same_program(files[path], fixed[path]) for path in files)
        results.append(WrongPatch(family, operator, description, patch, equivalent, files))

    mutations = [
        mutation
        for path in sorted(changed)
        if path.endswith(".py")
        for mutation in _near_misses(path, fixed[path], changed[path])
    ]
    rank = {operator: position for position, operator in enumerate(_PRIORITY)}
    mutations.sort(key=lambda m: (rank.get(m.operator, len(rank)), m.file, m.line, m.col))
    for mutation in mutations:
        if sum(r.family == "near_miss" for r in results) >= limit:
            break
        text = apply_mutations(fixed[mutation.file], [mutation])
        where = f"{mutation.file}:{mutation.line}"
        add(
            "near_miss",
            mutation.operator,
            f"{where}: {mutation.original!r} -> {mutation.replacement!r}",
            {**fixed, mutation.file: text},
        )
    for left_out, files in _partial_fixes(gold_patch, buggy):
        add("partial_fix", "gold_minus_hunk", f"the gold patch without {left_out}", files)
    return results


def _partial_fixes(patch: str, buggy: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
    diffs = split_hunks(patch)
    hunks = [(d, i) for d in diffs for i in range(len(d.hunks))]
    if len(hunks) < 2:
        return []
    partial = []
    for skipped, index in hunks:
        text = "".join(
            d.header + "".join(h for i, h in enumerate(d.hunks) if (d, i) != (skipped, index))
            for d in diffs
            if len(d.hunks) > (1 if d is skipped else 0)
        )
        first = _HUNK.match(skipped.hunks[index])
        where = f"{skipped.path} hunk at line {first.group(1) if first else '?'}"
        partial.append((where, _apply(text, buggy)))
    return partial


def _signature(files: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(files.items()))
