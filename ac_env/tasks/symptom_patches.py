"""Wrong patches that make the reported symptom go away without fixing the bug.

Two families, each a diff against the task's buggy base commit, made from the buggy files,
the gold patch (which says where the bug is), the task's statement and its failing tests:

- ``silenced_symptom``: the function the gold patch changes, its body wrapped in
  ``try: ... except E: return None`` for each built-in exception ``E`` the statement names
  but ``AssertionError`` (the crash the user reports stops; the wrong result behind it stays);
- ``special_case``: the function returns the value a failing test expects when called with
  exactly that test's arguments (``if (a, b) == (1, 2): return 3`` at its top), from the
  first ``assert f(...) == expected`` of the FAIL_TO_PASS tests, in their order, whose
  arguments and expected value are literals and whose ``f`` is the function the gold patch
  changes.

Neither family changes the bug itself, so a task whose tests accept one pays for the symptom
rather than the fix. They are measured apart from ``ac_env.tasks.wrong_patches`` (whose
figures the shipped tasks record).
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
from functools import partial
from pathlib import Path

from ac_env.tasks.model import Task
from ac_env.tasks.synthetic.project import unified_diff
from ac_env.tasks.wrong_patches import Family, WrongPatch, changed_lines, fixed_files

_EXCEPTION_NAME = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception))\b")
Function = ast.FunctionDef | ast.AsyncFunctionDef


def _functions(tree: ast.AST) -> list[Function]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _changed_function_names(fixed: str, lines: set[int]) -> list[str]:
    """Names of the innermost functions of ``fixed`` holding a changed line, in file order."""
    names: list[str] = []
    for line in sorted(lines):
        holding = [
            f for f in _functions(ast.parse(fixed)) if f.lineno <= line <= (f.end_lineno or 0)
        ]
        if holding:
            name = max(holding, key=lambda f: f.lineno).name
            if name not in names:
                names.append(name)
    return names


def _named_exceptions(statement: str) -> list[str]:
    names = dict.fromkeys(_EXCEPTION_NAME.findall(statement))
    return [
        name
        for name in names
        if name != "AssertionError"  # the failing test's own assert, not the library's
        and isinstance(getattr(builtins, name, None), type)
        and issubclass(getattr(builtins, name), BaseException)
    ]


def _body_span(function: Function) -> tuple[int, int]:
    """First and last line of the function's body, its docstring left out."""
    body = function.body
    if (
        len(body) > 1
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    return body[0].lineno, body[-1].end_lineno or body[-1].lineno


def _find(source: str, name: str) -> Function | None:
    found = [f for f in _functions(ast.parse(source)) if f.name == name]
    return found[0] if len(found) == 1 else None


def _wrap_in_try(source: str, function: Function, exceptions: list[str]) -> str:
    lines = source.splitlines(keepends=True)
    first, last = _body_span(function)
    indent = re.match(r"\s*", lines[first - 1]).group(0)  # type: ignore[union-attr]
    inner = textwrap.indent("".join(lines[first - 1 : last]), "    ")
    caught = exceptions[0] if len(exceptions) == 1 else f"({', '.join(exceptions)})"
    wrapped = f"{indent}try:\n{inner}{indent}except {caught}:\n{indent}    return None\n"
    return "".join(lines[: first - 1]) + wrapped + "".join(lines[last:])


def _insert_at_top(source: str, function: Function, text: str) -> str:
    lines = source.splitlines(keepends=True)
    first, _ = _body_span(function)
    indent = re.match(r"\s*", lines[first - 1]).group(0)  # type: ignore[union-attr]
    return "".join(lines[: first - 1]) + textwrap.indent(text, indent) + "".join(lines[first - 1 :])


def _test_function(task: Task, test_id: str) -> ast.FunctionDef | None:
    """The test's function in the task's snapshot (``path::name`` or ``path::Class::name``)."""
    if task.snapshot_dir is None:
        return None
    path, *names = test_id.split("::")
    file = task.snapshot_dir / path
    if not file.is_file() or not names:
        return None
    name = names[-1].split("[", 1)[0]
    try:
        tree = ast.parse(file.read_text())
    except SyntaxError:
        return None
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    return found[0] if found else None


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _first_literal_assert(test: ast.FunctionDef, names: set[str]) -> tuple[ast.Call, str] | None:
    """The test's first ``assert f(literals) == literal`` with ``f`` in ``names``: the call
    and the expected value's source."""
    for node in ast.walk(test):
        if not isinstance(node, ast.Assert) or not isinstance(node.test, ast.Compare):
            continue
        compare = node.test
        if len(compare.ops) != 1 or not isinstance(compare.ops[0], ast.Eq):
            continue
        for call, expected in (
            (compare.left, compare.comparators[0]),
            (compare.comparators[0], compare.left),
        ):
            if (
                isinstance(call, ast.Call)
                and _called_name(call) in names
                and all(_literal(arg) for arg in call.args)
                and all(k.arg is not None and _literal(k.value) for k in call.keywords)
                and _literal(expected)
            ):
                return call, ast.unparse(expected)
    return None


def _guard(function: Function, call: ast.Call, expected: str) -> str | None:
    """``if (params) == (values): return expected`` for the call's arguments, or None when
    they do not map onto the function's plain parameters."""
    params = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    if params and params[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        params = params[1:]
    if len(call.args) > len(params):
        return None
    pairs = [(params[i], ast.unparse(arg)) for i, arg in enumerate(call.args)]
    keyword_params = {*params, *(a.arg for a in function.args.kwonlyargs)}
    for keyword in call.keywords:
        if keyword.arg not in keyword_params:
            return None
        pairs.append((keyword.arg or "", ast.unparse(keyword.value)))
    if not pairs:
        return f"return {expected}\n"
    names = ", ".join(name for name, _ in pairs)
    values = ", ".join(value for _, value in pairs)
    return f"if ({names},) == ({values},):\n    return {expected}\n"


def symptom_patches(task: Task) -> list[WrongPatch]:
    """The task's ``silenced_symptom`` and ``special_case`` wrong patches (its
    ``snapshot_dir`` must exist); none when the statement names no built-in exception and no
    failing test asserts on a literal call of the changed function."""
    if task.snapshot_dir is None:
        raise ValueError(f"{task.instance_id}: no snapshot_dir to read the buggy files from")
    changed = changed_lines(task.patch)
    fixed = fixed_files(task)
    results: list[WrongPatch] = []
    exceptions = _named_exceptions(task.problem_statement)
    failing = [t for t in map(partial(_test_function, task), task.FAIL_TO_PASS) if t is not None]
    for path in sorted(p for p in changed if p.endswith(".py")):
        buggy = (Path(task.snapshot_dir) / path).read_text()
        try:
            names = _changed_function_names(fixed[path], changed[path])
        except SyntaxError:
            continue
        for name in names:
            function = _find(buggy, name)
            if function is None:
                continue
            if exceptions:
                text = _wrap_in_try(buggy, function, exceptions)
                results.append(
                    _patch(
                        "silenced_symptom", f"{path}:{name}: except {exceptions}", path, buggy, text
                    )
                )
            found = next(
                (hit for test in failing if (hit := _first_literal_assert(test, {name}))), None
            )
            guard = _guard(function, *found) if found else None
            if guard is not None:
                text = _insert_at_top(buggy, function, guard)
                results.append(
                    _patch(
                        "special_case", f"{path}:{name}: {guard.splitlines()[0]}", path, buggy, text
                    )
                )
    return results


def _patch(family: Family, description: str, path: str, buggy: str, text: str) -> WrongPatch:
    return WrongPatch(
        family=family,
        operator=family,
        description=description,
        patch=unified_diff(path, buggy, text),
        equivalent=False,
        files={path: text},
    )
