"""Problem statements written as a user's bug report, derived from a failing test.

A report describes one failing test per bug (with several bugs, the first is the report and
the others follow-ups). The reproduction snippet is the failing test turned into a script:
its fixtures and helpers inlined, its imports reduced to the names it uses, ``assert a == b``
turned into ``print(a)  # expected b``. The observed behaviour comes from the failure pytest printed
when the catalogue was built. A report that would name the bug's file, module or function
is refused (``None``), and the caller picks another failing test.
"""

from __future__ import annotations

import ast
import random
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from ac_env.tasks.synthetic.distractors import module_name

TITLES = (
    "{topic}: wrong result",
    "Unexpected behaviour in {topic}",
    "{topic} gives the wrong answer",
    "Regression? {topic} is off",
    "Bug: {topic}",
)
RAISE_TITLES = (
    "{topic} raises {exception}",
    "{exception} from {topic}",
    "Crash ({exception}) in {topic}",
)
OPENINGS = (
    "{role}, and after upgrading to {version} something is off with {topic}.",
    "{role}. I think I found a bug around {topic}.",
    "Hi! {role}. The following used to work, but now {topic} misbehaves.",
    "{role}. While checking our numbers I noticed a problem with {topic}.",
)
REPRO = (
    "Steps to reproduce:",
    "Minimal reproduction:",
    "Here is a small script that shows it:",
    "To reproduce:",
)
CLOSINGS = (
    "",
    "Let me know if you need more details.",
    "This breaks our nightly job, so a fix would be much appreciated.",
    "I could not find where this goes wrong myself.",
    "Happy to test a fix.",
)
# How test modules reach the repository root; a user's script runs from the root instead.
REPO_ROOT_FROM_TESTS = "Path(__file__).resolve().parent.parent"
FOLLOW_UPS = (
    "While putting this together I ran into a second problem ({topic}):",
    "Possibly related: {topic} is wrong as well.",
    "Not sure if it is the same bug, but {topic} also misbehaves:",
)
BUILTIN_FIXTURES = {
    "tmp_path": (
        "import tempfile",
        "from pathlib import Path",
        "tmp_path = Path(tempfile.mkdtemp())",
    ),
}


@dataclass(frozen=True)
class BugLocation:
    """What a report must never mention."""

    files: list[str]
    functions: list[str]  # qualified names inside their modules (``Ledger.record``)

    def leaks(self, text: str) -> bool:
        for path in self.files:
            dotted = module_name(path)
            if path in text or dotted in text or path.rsplit("/", 1)[1] in text:
                return True
            if ".".join(dotted.split(".")[-2:]) in text:
                return True
        for function in self.functions:
            for name in {function, function.rsplit(".", 1)[-1]}:
                if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text):
                    return True
        return False


class _Unsupported(Exception):
    """The test cannot be turned into a standalone snippet."""


def _segment(lines: list[str], node: ast.AST) -> str:
    start = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])  # type: ignore[attr-defined]
    return textwrap.dedent("".join(lines[start - 1 : node.end_lineno]))  # type: ignore[attr-defined]


def _names(nodes: Sequence[ast.AST]) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}


class _Module:
    """Top-level imports, helpers, constants and fixtures of one test module."""

    def __init__(self, source: str) -> None:
        self.tree = ast.parse(source)
        self.lines = source.splitlines(keepends=True)
        self.imports: dict[str, str] = {}
        self.definitions: dict[str, ast.stmt] = {}
        self.fixtures: dict[str, ast.FunctionDef] = {}
        for node in self.tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    self.imports[bound] = self._import_line(node, alias)
            elif isinstance(node, ast.FunctionDef):
                if any("fixture" in ast.unparse(d) for d in node.decorator_list):
                    self.fixtures[node.name] = node
                else:
                    self.definitions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.definitions[node.name] = node
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.definitions[target.id] = node

    @staticmethod
    def _import_line(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> str:
        rename = f" as {alias.asname}" if alias.asname else ""
        if isinstance(node, ast.Import):
            return f"import {alias.name}{rename}"
        return f"from {node.module} import {alias.name}{rename}"


class SnippetBuilder:
    """Turns one test function into a standalone script."""

    def __init__(self, test_source: str, conftest_source: str) -> None:
        self.test = _Module(test_source)
        self.conftest = _Module(conftest_source)
        self.imports: list[str] = []
        self.setup: list[str] = []
        self.defined: set[str] = set()

    def build(self, test_name: str) -> tuple[str, str | None]:
        """(snippet, expected exception name or None)."""
        function = self.test.definitions.get(test_name)
        if not isinstance(function, ast.FunctionDef):
            raise _Unsupported(test_name)
        for argument in function.args.args:
            self.fixture(argument.arg)
        body, expected_exception = self.body(function.body)
        self.require(_names(function.body), self.test)
        imports = sorted(set(self.imports), key=lambda line: (line.startswith("from"), line))
        parts = ["\n".join(imports), *self.setup, body]
        return "\n\n".join(part.strip("\n") for part in parts if part.strip()), expected_exception

    def require(self, names: set[str], module: _Module) -> None:
        """Bring in the imports and definitions that ``names`` refer to."""
        for name in sorted(names - self.defined):
            if name in module.imports:
                self.imports.append(module.imports[name])
                self.defined.add(name)
            elif name in module.definitions:
                self.defined.add(name)
                node = module.definitions[name]
                text = _segment(module.lines, node)
                if "__file__" in text:
                    text = text.replace(REPO_ROOT_FROM_TESTS, 'Path(".")')
                    if "__file__" in text:
                        raise _Unsupported(name)
                self.require(_names([node]), module)
                self.setup.append(text)

    def fixture(self, name: str) -> None:
        if name in self.defined:
            return
        if name in BUILTIN_FIXTURES:
            *imports, line = BUILTIN_FIXTURES[name]
            self.imports.extend(imports)
            self.setup.append(line)
            self.defined.add(name)
            return
        module = self.test if name in self.test.fixtures else self.conftest
        node = module.fixtures.get(name)
        if node is None:
            raise _Unsupported(name)
        for argument in node.args.args:
            self.fixture(argument.arg)
        statements = [
            s
            for s in node.body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        ]
        if not statements or not isinstance(statements[-1], ast.Return):
            raise _Unsupported(name)
        self.require(_names(statements), module)
        lines = [_segment(module.lines, s) for s in statements[:-1]]
        returned = statements[-1].value
        if returned is not None and not (isinstance(returned, ast.Name) and returned.id == name):
            lines.append(f"{name} = {ast.unparse(returned)}")
        self.setup.append("".join(line if line.endswith("\n") else line + "\n" for line in lines))
        self.defined.add(name)

    def body(self, statements: list[ast.stmt]) -> tuple[str, str | None]:
        out: list[str] = []
        expected_exception = None
        for statement in statements:
            if isinstance(statement, ast.Assert):
                out.append(_print_assert(statement.test))
            elif isinstance(statement, ast.With) and "raises" in ast.unparse(statement.items[0]):
                call = statement.items[0].context_expr
                if isinstance(call, ast.Call) and call.args:
                    expected_exception = ast.unparse(call.args[0])
                inner, _ = self.body(statement.body)
                out.append(inner)
            else:
                out.append(_segment(self.test.lines, statement).rstrip("\n"))
        return "\n".join(out), expected_exception


def _print_assert(test: ast.expr) -> str:
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq | ast.Is)
    ):
        return f"print({ast.unparse(test.left)})  # expected: {ast.unparse(test.comparators[0])}"
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return f"print({ast.unparse(test.operand)})  # expected: False"
    return f"print({ast.unparse(test)})  # expected: True"


def observed_behaviour(
    statement: str, message: str, expected_exception: str | None
) -> tuple[str, str | None]:
    """(sentence about what happened, exception name when one was raised).

    ``statement`` is the test line that failed, ``message`` pytest's ``E`` lines.
    """
    first = message.splitlines()[0] if message else ""
    if first.startswith("Failed: DID NOT RAISE"):
        return f"No `{expected_exception}` is raised at all; the call just returns.", None
    if re.match(r"^[A-Z]\w*(Error|Exception|Warning)\b", first) and not first.startswith(
        "AssertionError"
    ):
        exception = first.split(":", 1)[0]
        if expected_exception is not None and "does not match" in message:
            return f"It raises, but with a different message:\n\n```\n{first}\n```", None
        return f"It fails with:\n\n```\n{first}\n```", exception
    printed = _printed_value(first.removeprefix("AssertionError: "))
    line = _print_line(statement)
    if printed is not None and line is not None:
        return f"`{_printed_expression(line)}` gives `{printed}`.", None
    if line is not None:
        return f"`{_printed_expression(line)}` is not what the comment says.", None
    return f"It fails with:\n\n```\n{first}\n```", None


def _printed_value(assertion: str) -> str | None:
    """The left-hand value of pytest's ``assert left == right`` report, or the bare value
    of ``assert False`` / ``assert not True``."""
    if not assertion.startswith("assert "):
        return None
    try:
        tree = ast.parse(assertion[len("assert ") :], mode="eval").body
    except SyntaxError:
        return None
    if isinstance(tree, ast.Compare) and isinstance(tree.ops[0], ast.Eq | ast.Is):
        return ast.unparse(tree.left)
    if isinstance(tree, ast.Constant) and isinstance(tree.value, bool):
        return str(tree.value)
    if isinstance(tree, ast.UnaryOp) and isinstance(tree.op, ast.Not):
        return ast.unparse(tree.operand)
    return None


def _printed_expression(line: str) -> str:
    """``print(x)  # expected: y`` -> ``x``."""
    return line.split("  # expected:")[0].removeprefix("print(").removesuffix(")")


def _print_line(statement: str) -> str | None:
    """The snippet line a failing ``assert`` statement became."""
    try:
        tree = ast.parse(statement.strip())
    except SyntaxError:
        return None
    if tree.body and isinstance(tree.body[0], ast.Assert):
        return _print_assert(tree.body[0].test)
    return None


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


def _topic(test_name: str) -> str:
    return test_name.removeprefix("test_").replace("_", " ")


@dataclass(frozen=True)
class Symptom:
    """One failing behaviour, ready to be written into a report."""

    topic: str
    snippet: str
    expectation: str
    observed: str
    raised: str | None


def describe_failure(
    test_id: str,
    test_source: str,
    conftest_source: str,
    failing_statement: str,
    failure_message: str,
) -> Symptom | None:
    """The symptom a failing test shows, or None when the test cannot become a script."""
    test_name = test_id.rsplit("::", 1)[1]
    try:
        snippet, expected_exception = SnippetBuilder(test_source, conftest_source).build(test_name)
    except _Unsupported:
        return None
    observed, raised = observed_behaviour(failing_statement, failure_message, expected_exception)
    if expected_exception:
        expectation = f"I expected `{expected_exception}` to be raised for this input."
    else:
        expectation = "I expected the values in the `# expected:` comments."
    return Symptom(_topic(test_name), snippet, expectation, observed, raised)


def render_report(
    rng: random.Random,
    symptoms: Sequence[Symptom],
    package: str,
    version: str,
    roles: tuple[str, ...],
    location: BugLocation,
) -> str | None:
    """A user's bug report about the first symptom, with any further ones as follow-ups;
    None when it would name the bug's location."""
    main, *others = symptoms
    if main.raised:
        title = rng.choice(RAISE_TITLES).format(topic=main.topic, exception=main.raised)
    else:
        title = rng.choice(TITLES).format(topic=main.topic)
    opening = rng.choice(OPENINGS).format(
        role=_capitalized(rng.choice(roles)), version=f"{package} {version}", topic=main.topic
    )
    parts = [f"### {_capitalized(title)}", _capitalized(opening), rng.choice(REPRO)]
    parts += _symptom_parts(main)
    for other in others:
        parts.append(rng.choice(FOLLOW_UPS).format(topic=other.topic))
        parts += _symptom_parts(other)
    parts.append(rng.choice(CLOSINGS))
    statement = "\n\n".join(part for part in parts if part) + "\n"
    return None if location.leaks(statement) else statement


def _symptom_parts(symptom: Symptom) -> list[str]:
    return [
        f"```python\n{symptom.snippet}\n```",
        f"**Expected:** {symptom.expectation}",
        f"**Actual:** {symptom.observed}",
    ]
