"""Mutation operators: candidate bugs found by AST, applied as exact text edits.

Every mutation replaces one span of the original text (line/column positions from the AST)
and leaves the rest of the file byte for byte as it was, so the gold patch is a minimal diff.

Operators (the family the task suite documents):

- ``comparison_flip``: boundary flips ``<`` <-> ``<=``, ``>`` <-> ``>=``.
- ``inverted_condition``: ``==`` <-> ``!=``, ``in`` <-> ``not in``, ``is`` <-> ``is not``,
  ``and`` <-> ``or``, and ``if c:`` <-> ``if not c:`` for a plain name, attribute or call.
- ``arithmetic_swap``: ``+`` <-> ``-``, ``*`` <-> ``/``, ``//`` -> ``/``, ``+=`` <-> ``-=``.
- ``swapped_arguments``: the first two positional arguments of a call change places.
- ``dropped_branch``: an ``if`` statement without ``else`` (a guard, an early return) is
  deleted.
- ``removed_call``: a call used as a statement is deleted.
- ``wrong_default``: a numeric or boolean parameter default changes.
- ``off_by_one``: a slice bound, a ``range`` stop or a constant index moves by one.
- ``wrong_constant``: a numeric constant in a function body changes.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterator
from typing import TypeGuard

from pydantic import BaseModel, ConfigDict

OPERATORS = (
    "comparison_flip",
    "inverted_condition",
    "arithmetic_swap",
    "swapped_arguments",
    "dropped_branch",
    "removed_call",
    "wrong_default",
    "off_by_one",
    "wrong_constant",
)

BOUNDARY_FLIPS = {
    ast.Lt: ("<", "<="),
    ast.LtE: ("<=", "<"),
    ast.Gt: (">", ">="),
    ast.GtE: (">=", ">"),
}
NEGATIONS = {
    ast.Eq: ("==", "!="),
    ast.NotEq: ("!=", "=="),
    ast.In: ("in", "not in"),
    ast.NotIn: ("not in", "in"),
    ast.Is: ("is", "is not"),
    ast.IsNot: ("is not", "is"),
}
ARITHMETIC = {
    ast.Add: ("+", "-"),
    ast.Sub: ("-", "+"),
    ast.Mult: ("*", "/"),
    ast.Div: ("/", "*"),
    ast.FloorDiv: ("//", "/"),
}
AUGMENTED = {ast.Add: ("+=", "-="), ast.Sub: ("-=", "+=")}
BOOLEAN = {ast.And: ("and", "or"), ast.Or: ("or", "and")}
# Expressions that need no parentheses when `` + 1`` or `` - 1`` is appended to them.
TIGHT = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.BinOp, ast.UnaryOp)


class StaleMutationError(RuntimeError):
    """The text at a mutation's position is not what the mutation expects."""


class Mutation(BaseModel):
    """Replace ``original`` at (line, col)-(end_line, end_col) with ``replacement``.

    Lines are 1-based, columns 0-based characters; ``function`` is the qualified name of the
    function holding the span inside its module (``Ledger.record``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str
    function: str
    operator: str
    line: int
    col: int
    end_line: int
    end_col: int
    original: str
    replacement: str

    def key(self) -> str:
        """A short stable id of this mutation."""
        text = (
            f"{self.file}:{self.line}:{self.col}:{self.end_line}:{self.end_col}:{self.replacement}"
        )
        return hashlib.sha1(text.encode()).hexdigest()[:10]


def _offsets(source: str) -> list[int]:
    """Character offset of the start of each line (index 0 is line 1)."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def apply_mutations(source: str, mutations: list[Mutation]) -> str:
    """``source`` with every mutation applied (spans must not overlap)."""
    starts = _offsets(source)
    spans = []
    for mutation in mutations:
        start = starts[mutation.line - 1] + mutation.col
        end = starts[mutation.end_line - 1] + mutation.end_col
        if source[start:end] != mutation.original:
            raise StaleMutationError(
                f"{mutation.file}:{mutation.line}: expected {mutation.original!r}, "
                f"found {source[start:end]!r}; rebuild the catalogue"
            )
        spans.append((start, end, mutation.replacement))
    for start, end, replacement in sorted(spans, reverse=True):
        source = source[:start] + replacement + source[end:]
    return source


class _Finder:
    """Collects candidate mutations of one module."""

    def __init__(self, path: str, source: str) -> None:
        self.path = path
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.line_starts = _offsets(source)
        self.found: list[Mutation] = []
        self.function = ""

    # --- positions -------------------------------------------------------------------
    def _char_col(self, line: int, byte_col: int) -> int:
        return len(self.lines[line - 1].encode()[:byte_col].decode())

    def start(self, node: ast.AST) -> tuple[int, int]:
        return node.lineno, self._char_col(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> tuple[int, int]:
        line = node.end_lineno  # type: ignore[attr-defined]
        return line, self._char_col(line, node.end_col_offset)  # type: ignore[attr-defined]

    def text(self, start: tuple[int, int], end: tuple[int, int]) -> str:
        starts = self.line_starts
        return self.source[starts[start[0] - 1] + start[1] : starts[end[0] - 1] + end[1]]

    def add(
        self, operator: str, start: tuple[int, int], end: tuple[int, int], replacement: str
    ) -> None:
        original = self.text(start, end)
        if original == replacement:
            return
        self.found.append(
            Mutation(
                file=self.path,
                function=self.function,
                operator=operator,
                line=start[0],
                col=start[1],
                end_line=end[0],
                end_col=end[1],
                original=original,
                replacement=replacement,
            )
        )

    def add_operator_in_gap(
        self, operator: str, left: ast.AST, right: ast.AST, old: str, new: str
    ) -> None:
        """Replace the operator token ``old`` that sits between two nodes."""
        gap_start, gap_end = self.end(left), self.start(right)
        gap = self.text(gap_start, gap_end)
        if gap.strip("() \t\n\\") != old or gap_start[0] != gap_end[0]:
            return
        column = gap_start[1] + gap.index(old)
        self.add(operator, (gap_start[0], column), (gap_start[0], column + len(old)), new)

    def add_line_deletion(self, operator: str, statement: ast.stmt) -> None:
        line, col = self.start(statement)
        if self.lines[line - 1][:col].strip():
            return
        end_line, end_col = self.end(statement)
        if self.lines[end_line - 1][end_col:].strip():
            return
        self.add(operator, (line, 0), (end_line + 1, 0), "")

    def add_plus_minus_one(self, operator: str, node: ast.expr, sign: str) -> None:
        """``x + 1`` and ``x - 1`` lose their one; anything else gains ``sign 1``."""
        text = self.text(self.start(node), self.end(node))
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Add | ast.Sub)
            and isinstance(node.right, ast.Constant)
            and node.right.value == 1
        ):
            replacement = self.text(self.start(node.left), self.end(node.left))
        elif isinstance(node, TIGHT):
            replacement = f"{text} {sign} 1"
        else:
            replacement = f"({text}) {sign} 1"
        self.add(operator, self.start(node), self.end(node), replacement)

    # --- walking -----------------------------------------------------------------------
    def module(self, tree: ast.Module) -> list[Mutation]:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                self.function_def(node, node.name)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        self.function_def(item, f"{node.name}.{item.name}")
        return self.found

    def function_def(self, node: ast.FunctionDef, qualname: str) -> None:
        self.function = qualname
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                self.default(default)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        for statement in body:
            for child in _walk_code(statement):
                self.visit(child)
        self.blocks(node)

    def default(self, node: ast.expr) -> None:
        if not isinstance(node, ast.Constant):
            return
        if isinstance(node.value, bool):
            self.add("wrong_default", self.start(node), self.end(node), str(not node.value))
        elif isinstance(node.value, int | float):
            self.add("wrong_default", self.start(node), self.end(node), _bumped(node.value))

    def blocks(self, function: ast.FunctionDef) -> None:
        """Statement deletions: guards without ``else`` and calls used as statements."""
        for node in ast.walk(function):
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if not isinstance(block, list) or len(block) < 2:
                    continue
                for statement in block:
                    if isinstance(statement, ast.If) and not statement.orelse:
                        self.add_line_deletion("dropped_branch", statement)
                    elif (
                        isinstance(statement, ast.Expr)
                        and isinstance(statement.value, ast.Call)
                        and not _is_logging(statement.value)
                    ):
                        self.add_line_deletion("removed_call", statement)

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            op = type(node.ops[0])
            if op in BOUNDARY_FLIPS:
                old, new = BOUNDARY_FLIPS[op]
                self.add_operator_in_gap(
                    "comparison_flip", node.left, node.comparators[0], old, new
                )
            elif op in NEGATIONS:
                old, new = NEGATIONS[op]
                self.add_operator_in_gap(
                    "inverted_condition", node.left, node.comparators[0], old, new
                )
        elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
            old, new = BOOLEAN[type(node.op)]
            self.add_operator_in_gap("inverted_condition", node.values[0], node.values[1], old, new)
        elif isinstance(node, ast.If | ast.While | ast.IfExp):
            self.negate(node.test)
        elif isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:
            if not any(_is_text(operand) for operand in (node.left, node.right)):
                old, new = ARITHMETIC[type(node.op)]
                self.add_operator_in_gap("arithmetic_swap", node.left, node.right, old, new)
        elif isinstance(node, ast.AugAssign) and type(node.op) in AUGMENTED:
            old, new = AUGMENTED[type(node.op)]
            self.add_operator_in_gap("arithmetic_swap", node.target, node.value, old, new)
        elif isinstance(node, ast.Call):
            self.call(node)
        elif isinstance(node, ast.Subscript):
            self.subscript(node)
        elif isinstance(node, ast.Constant) and _is_number(node.value):
            self.add("wrong_constant", self.start(node), self.end(node), _bumped(node.value))

    def negate(self, test: ast.expr) -> None:
        text = self.text(self.start(test), self.end(test))
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            replacement = self.text(self.start(test.operand), self.end(test.operand))
        elif isinstance(test, ast.Name | ast.Attribute | ast.Call | ast.Subscript):
            replacement = f"not {text}"
        else:
            return
        self.add("inverted_condition", self.start(test), self.end(test), replacement)

    def call(self, node: ast.Call) -> None:
        if _is_logging(node):
            return
        positional = node.args
        if isinstance(node.func, ast.Name) and node.func.id == "range" and positional:
            stop = positional[1] if len(positional) > 1 else positional[0]
            self.add_plus_minus_one("off_by_one", stop, "-")
        if len(positional) >= 2 and not any(isinstance(a, ast.Starred) for a in positional[:2]):
            first, second = positional[0], positional[1]
            first_text = self.text(self.start(first), self.end(first))
            second_text = self.text(self.start(second), self.end(second))
            between = self.text(self.end(first), self.start(second))
            self.add(
                "swapped_arguments",
                self.start(first),
                self.end(second),
                second_text + between + first_text,
            )

    def subscript(self, node: ast.Subscript) -> None:
        index = node.slice
        if isinstance(index, ast.Slice):
            if index.lower is not None:
                self.add_plus_minus_one("off_by_one", index.lower, "+")
            if index.upper is not None:
                self.add_plus_minus_one("off_by_one", index.upper, "-")
        elif isinstance(index, ast.Constant) and type(index.value) is int:
            self.add("off_by_one", self.start(index), self.end(index), str(index.value + 1))
        elif (
            isinstance(index, ast.UnaryOp)
            and isinstance(index.op, ast.USub)
            and isinstance(index.operand, ast.Constant)
            and type(index.operand.value) is int
        ):
            self.add(
                "off_by_one", self.start(index), self.end(index), str(-index.operand.value - 1)
            )


def _bumped(value: int | float) -> str:
    if isinstance(value, int):
        return str(value + 1)
    return repr(value * 2 if value else 1.0)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def _is_logging(node: ast.Call) -> bool:
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id in ("logger", "logging", "warnings")
    )


def _walk_code(node: ast.AST) -> Iterator[ast.AST]:
    """Nodes under ``node`` that mutations may touch: not inside f-strings, logging calls,
    raise statements (their messages), subscript slices (handled as a whole) or defaults."""
    yield node
    if isinstance(node, ast.JoinedStr | ast.Raise) or (
        isinstance(node, ast.Call) and _is_logging(node)
    ):
        return
    for child in ast.iter_child_nodes(node):
        if isinstance(node, ast.Subscript) and child is node.slice:
            continue
        if isinstance(child, ast.arguments):
            continue
        yield from _walk_code(child)


def find_mutations(path: str, source: str) -> list[Mutation]:
    """Every candidate mutation in the functions and methods of one module."""
    return _Finder(path, source).module(ast.parse(source))
