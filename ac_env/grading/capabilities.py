"""Which of the interpreter's own capabilities a Python source uses, read from its syntax tree
(nothing is imported or executed): the input of the capability gate (``capability_gate``).

A capability is named by what it resolves to, not by its spelling. Names are resolved through
the file's imports and aliases (``import inspect as i``, ``from sys import _getframe as g``,
``s = sys``), builtins through Python's own scoping (a local ``def compile`` shadows the builtin;
one bound only under an ``if``, or deleted, does not), and identifiers as Python normalises
them (``ast.parse`` applies NFKC and the file's coding declaration, as an import would).
Attribute names that only the interpreter's machinery has (``f_back``, ``__globals__``,
``get_referrers``, ...) count whatever object they are read from, and so do the same names in
string literals (``getattr(f, "__code__")``, ``"{0.__globals__}"``, ``"sys._getframe"``);
reaching an attribute by a name computed at run time is itself a capability.

The capabilities (``CAPABILITIES``) are coarse on purpose: the gate allows one in a file that
already used it before the patch, and a repository that reads frames for its warnings should
not be refused a fix that reads one more.
"""

from __future__ import annotations

import ast
import builtins
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, field

FRAMES = "frames"
CODE = "code-internals"
GC = "gc"
HOOKS = "hooks"
DYNAMIC = "dynamic-code"
COMPUTED = "computed-attribute"
CTYPES = "ctypes"
PROCESS = "process"
DESERIALISE = "deserialise"
THREADS = "threads-signals-atexit"
UNPARSEABLE = "unparseable"
CAPABILITIES = (
    FRAMES, CODE, GC, HOOKS, DYNAMIC, COMPUTED, CTYPES, PROCESS, DESERIALISE, THREADS, UNPARSEABLE,
)  # fmt: skip

_OS_PROCESS = (
    "system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "kill", "killpg",
    "startfile", "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp",
    "execvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp",
    "spawnvpe",
)  # fmt: skip
_QUALIFIED: dict[str, str | None] = {
    **dict.fromkeys(
        [
            "sys._getframe", "sys._current_frames", "sys._current_exceptions",
            "sys._getframemodulename", "inspect.currentframe", "inspect.stack", "inspect.trace",
            "inspect.getouterframes", "inspect.getinnerframes", "inspect.getframeinfo",
            "inspect.getgeneratorlocals", "inspect.getcoroutinelocals",
            "inspect.getasyncgenlocals", "traceback.walk_stack", "traceback.walk_tb",
            "traceback.extract_stack", "traceback.format_stack", "traceback.print_stack",
            "traceback.StackSummary", "logging.currentframe",
        ],
        FRAMES,
    ),
    **dict.fromkeys(
        [
            "types.FunctionType", "types.LambdaType", "types.CodeType", "types.CellType",
            "inspect.getclosurevars",
        ],
        CODE,
    ),
    **dict.fromkeys(
        ["gc.get_objects", "gc.get_referrers", "gc.get_referents", "gc.garbage", "gc.callbacks"],
        GC,
    ),
    **dict.fromkeys(
        [
            "sys.settrace", "sys.setprofile", "sys.gettrace", "sys.getprofile",
            "sys.addaudithook", "sys.audit", "sys.monitoring", "sys.call_tracing",
            "sys.set_asyncgen_hooks", "threading.settrace", "threading.setprofile",
            "threading.settrace_all_threads", "threading.setprofile_all_threads",
            "threading.gettrace", "threading.getprofile", "builtins.breakpoint",
            "os.register_at_fork", "pdb", "bdb", "trace", "cProfile", "profile", "_lsprof",
        ],
        HOOKS,
    ),
    **dict.fromkeys(
        [
            "builtins.exec", "builtins.eval", "builtins.compile", "builtins.__import__",
            "importlib.import_module", "importlib.reload", "importlib.__import__",
            "importlib.util", "importlib.machinery", "importlib.abc", "importlib._bootstrap",
            "importlib._bootstrap_external", "sys.modules", "sys.meta_path", "sys.path_hooks",
            "sys.path_importer_cache", "sys.remote_exec", "runpy", "pkgutil.resolve_name",
            "pkgutil.walk_packages", "pkgutil.get_loader", "pkgutil.find_loader",
            "pkgutil.get_importer", "pkgutil.iter_importers", "pkgutil.ImpImporter",
            "pkgutil.ImpLoader", "pkgutil.read_code", "zipimport", "imp", "_imp", "code",
            "codeop", "doctest", "timeit", "_interpreters", "_xxsubinterpreters",
            "concurrent.interpreters", "concurrent.futures.InterpreterPoolExecutor",
            "pydoc.locate", "unittest.mock.patch", "mock.patch",
        ],
        DYNAMIC,
    ),
    **dict.fromkeys(
        [
            "builtins.globals", "builtins.locals", "builtins.vars", "inspect.getmembers",
            "inspect.getmembers_static", "inspect.getattr_static",
        ],
        COMPUTED,
    ),
    **dict.fromkeys(
        ["ctypes", "_ctypes", "cffi", "_cffi_backend", "_testcapi", "_testinternalcapi"], CTYPES
    ),
    **dict.fromkeys(
        [
            "subprocess", "_posixsubprocess", "pty", "multiprocessing",
            "concurrent.futures.ProcessPoolExecutor", "asyncio.create_subprocess_exec",
            "asyncio.create_subprocess_shell", "asyncio.subprocess",
            *(f"os.{name}" for name in _OS_PROCESS),
        ],
        PROCESS,
    ),
    **dict.fromkeys(
        ["pickle", "_pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle", "copyreg",
         "jsonpickle"],
        DESERIALISE,
    ),
    **dict.fromkeys(
        [
            "threading.Thread", "threading.Timer", "threading._start_new_thread",
            "threading.start_new_thread", "threading.excepthook", "_thread",
            "concurrent.futures.ThreadPoolExecutor", "asyncio.to_thread", "signal", "_signal",
            "atexit", "weakref.finalize", "faulthandler.dump_traceback_later",
        ],
        THREADS,
    ),
}  # fmt: skip
"""Modules and module attributes (by qualified name; a module's entry covers what is under
it, a longer entry wins, ``None`` allows) that are a capability wherever they are used."""

_WRITTEN: dict[str, str | None] = {
    "sys.excepthook": HOOKS, "sys.unraisablehook": HOOKS, "sys.breakpointhook": HOOKS,
    "sys.displayhook": HOOKS, "threading.excepthook": HOOKS, "builtins": DYNAMIC,
}  # fmt: skip
"""Names that are a capability when assigned or deleted (anything under ``builtins``)."""

_CODE_ATTRIBUTES = (
    "co_argcount", "co_cellvars", "co_code", "co_consts", "co_exceptiontable", "co_filename",
    "co_firstlineno", "co_flags", "co_freevars", "co_kwonlyargcount", "co_lines",
    "co_linetable", "co_lnotab", "co_name", "co_names", "co_nlocals", "co_positions",
    "co_posonlyargcount", "co_qualname", "co_stacksize", "co_varnames",
)  # fmt: skip
_ATTRIBUTES = {
    **dict.fromkeys(
        [
            "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "f_lasti",
            "tb_frame", "gi_frame", "cr_frame", "ag_frame", "gi_code", "cr_code", "ag_code",
            "_getframe", "_current_frames", "currentframe", "getouterframes", "getinnerframes",
            "walk_stack", "walk_tb",
        ],
        FRAMES,
    ),
    **dict.fromkeys(
        [
            "__code__", "__globals__", "__closure__", "__builtins__", "__defaults__",
            "__kwdefaults__", "cell_contents", "__subclasses__", *_CODE_ATTRIBUTES,
        ],
        CODE,
    ),
    **dict.fromkeys(["get_objects", "get_referrers", "get_referents"], GC),
    **dict.fromkeys(
        [
            "settrace", "setprofile", "gettrace", "getprofile", "addaudithook",
            "settrace_all_threads", "setprofile_all_threads",
        ],
        HOOKS,
    ),
    **dict.fromkeys(
        [
            "meta_path", "path_hooks", "path_importer_cache", "exec_module", "import_module",
            "spec_from_file_location", "module_from_spec", "__loader__",
        ],
        DYNAMIC,
    ),
    **dict.fromkeys(["__dict__", "__getattribute__"], COMPUTED),
    **dict.fromkeys(["start_new_thread", "run_in_executor"], THREADS),
}  # fmt: skip
"""Attribute names only the interpreter's machinery has: a capability on whatever object."""

_MODULE_VALUES = {
    "sys": DYNAMIC, "builtins": DYNAMIC, "inspect": FRAMES, "traceback": FRAMES, "gc": GC,
    "types": CODE, "os": PROCESS, "threading": THREADS, "operator": COMPUTED, "weakref": THREADS,
    "concurrent.futures": THREADS, "pkgutil": DYNAMIC, "asyncio": PROCESS, "importlib": DYNAMIC,
}  # fmt: skip
"""Modules with some capable attributes: passing the module itself around (or star-importing
it) hides which attribute is used, so it counts as the module's capability."""

_BUILTINS = {
    "exec", "eval", "compile", "__import__", "breakpoint", "getattr", "setattr", "delattr",
    "hasattr", "globals", "locals", "vars", "isinstance", "issubclass",
}  # fmt: skip
"""Builtin names the resolver follows (as ``builtins.<name>`` unless shadowed)."""
_ALL_BUILTINS = frozenset(dir(builtins))
_IMPORTERS = frozenset({"builtins.__import__", "importlib.import_module"})
_NAMESPACES = frozenset({"builtins.globals", "builtins.locals", "builtins.vars"})
_BY_NAME = frozenset({"builtins.getattr", "builtins.setattr", "builtins.delattr"})
_HASATTR = "builtins.hasattr"
_ATTRIBUTE_DUNDERS = {"__getattribute__", "__getattr__", "__setattr__", "__delattr__"}
_TYPE_CHECKS = {"builtins.isinstance", "builtins.issubclass"}
_PATH = re.compile(r"[A-Za-z_]\w*(?:[.:][A-Za-z_]\w*)+")
_FIELD_PART = re.compile(r"\.([^.\[]*)|\[([^\]]*)\]")
_MAX_ALIAS_ROUNDS = 8


@dataclass(frozen=True)
class Use:
    """One use of a capability: the line it is on, the lines of the statement holding it
    (a compound statement's header only), what it is and how it was spelled."""

    line: int
    statement: tuple[int, int]
    capability: str
    detail: str


def capability_uses(source: bytes) -> list[Use]:
    """Every use of a capability in ``source`` (a whole Python file, as bytes), one per line
    and capability. A file Python could not compile is one use of ``unparseable``."""
    lines = source.count(b"\n") + 1
    try:
        tree = ast.parse(source)
        return _Analysis(tree).uses()
    except (SyntaxError, ValueError, UnicodeError, LookupError, MemoryError, RecursionError) as e:
        return [Use(1, (1, lines), UNPARSEABLE, f"{type(e).__name__}: {e}"[:200])]


@dataclass(eq=False)
class _Scope:
    """A namespace of the file: the module, a class body, a function, a lambda or a
    comprehension."""

    kind: str
    parent: _Scope | None
    bound: set[str] = field(default_factory=set)
    declared_global: set[str] = field(default_factory=set)
    first_binding: dict[str, int] = field(default_factory=dict)
    """The module's names bound unconditionally by a top-level statement: its line."""


@dataclass(frozen=True, slots=True)
class _Visit:
    node: ast.AST
    parent: ast.AST | None
    scope: _Scope
    statement: ast.stmt | None
    top: ast.stmt | None
    """The top-level statement holding the node."""
    functions: tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...]
    annotation: bool

    binds: tuple[str, ...]
    """The names the node binds in its scope."""

    @property
    def top_line(self) -> int:
        return self.top.lineno if self.top is not None else 0


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = frozenset({*_FUNCTIONS, ast.Lambda, ast.ClassDef, *_COMPREHENSIONS})
_ASSIGNING = frozenset(
    {
        ast.Assign,
        ast.AnnAssign,
        ast.NamedExpr,
        ast.withitem,
        ast.For,
        ast.AsyncFor,
        ast.comprehension,
    }
)
_UNCONDITIONAL = (ast.Assign, ast.AnnAssign, ast.Import, ast.ImportFrom, *_FUNCTIONS, ast.ClassDef)


class _Analysis:
    def __init__(self, tree: ast.Module) -> None:
        self.module = _Scope("module", None)
        self.visits: list[_Visit] = []
        self.parents: dict[int, ast.AST | None] = {}
        self.deleted: set[str] = set()
        self.aliases: dict[str, set[str]] = {}
        self.found: dict[tuple[int, str], Use] = {}
        self.assignments: list[tuple[_Visit, list[tuple[ast.Name, ast.expr]]]] = []
        self._walk(tree, None, self.module, None, None, (), False)
        self._collect_bindings()
        self.literals = self._string_variables()
        self._collect_aliases()

    # -- the walk: each node with its scope and statement ------------------------------------

    def _walk(
        self,
        node: ast.AST,
        parent: ast.AST | None,
        scope: _Scope,
        statement: ast.stmt | None,
        top: ast.stmt | None,
        functions: tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...],
        annotation: bool,
    ) -> None:
        if isinstance(node, ast.stmt):
            statement, top = node, top or node
        self.parents[id(node)] = parent
        binds = tuple(_bound_names(node))
        visit = _Visit(node, parent, scope, statement, top, functions, annotation, binds)
        self.visits.append(visit)
        if type(node) in _ASSIGNING:
            self.assignments.append((visit, _assigned_nodes(node)))
        if type(node) not in _SCOPES:
            hinted = node.annotation if isinstance(node, ast.AnnAssign) else None
            for child in ast.iter_child_nodes(node):
                hint = annotation or child is hinted
                self._walk(child, node, scope, statement, top, functions, hint)
            return

        def outer(child: ast.AST, is_annotation: bool = annotation) -> None:
            self._walk(child, node, scope, statement, top, functions, is_annotation)

        if isinstance(node, (*_FUNCTIONS, ast.Lambda)):
            inner = _Scope("function", scope)
            inner.bound.update(arg.arg for arg in _arguments(node.args))
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None:
                    outer(default)
            body: list[ast.AST] = [node.body] if isinstance(node, ast.Lambda) else [*node.body]
            if isinstance(node, _FUNCTIONS):
                for decorator in node.decorator_list:
                    outer(decorator)
                for annotation_node in _annotations(node):
                    outer(annotation_node, True)
                functions = (*functions, node)
        elif isinstance(node, ast.ClassDef):
            inner = _Scope("class", scope)
            for child in [*node.decorator_list, *node.bases, *node.keywords]:
                outer(child)
            body = [*node.body]
        else:
            assert isinstance(node, _COMPREHENSIONS)
            inner = _Scope("comprehension", scope)
            first, *rest = node.generators
            outer(first.iter)
            body = [*_elements(node), first.target, *first.ifs, *rest]
        for child in body:
            self._walk(child, node, inner, statement, top, functions, annotation)

    # -- names bound in each scope and aliases of modules ------------------------------------

    def _collect_bindings(self) -> None:
        for visit in self.visits:
            node, scope = visit.node, visit.scope
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                scope.declared_global.update(node.names)
                if isinstance(node, ast.Nonlocal):
                    scope.bound.update(node.names)
            for name in visit.binds:
                target = scope
                if isinstance(visit.parent, ast.NamedExpr) and node is visit.parent.target:
                    while target.kind == "comprehension" and target.parent is not None:
                        target = target.parent
                self._bind(target, name, visit)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Del):
                self.deleted.add(node.id)

    def _bind(self, scope: _Scope, name: str, visit: _Visit) -> None:
        if name in scope.declared_global:
            scope = self.module
        scope.bound.add(name)
        top = visit.top
        if scope is self.module and visit.statement is top and isinstance(top, _UNCONDITIONAL):
            self.module.first_binding.setdefault(name, visit.top_line)

    def _collect_aliases(self) -> None:
        for visit in self.visits:
            node = visit.node
            if isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    target = alias.name if alias.asname else bound
                    self.aliases.setdefault(bound, set()).add(target)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    bound = alias.asname or alias.name
                    if node.level == 0 and node.module:
                        self.aliases.setdefault(bound, set()).add(f"{node.module}.{alias.name}")
                    elif alias.name in _MODULE_VALUES:  # a module re-exported by the package
                        self.aliases.setdefault(bound, set()).add(alias.name)
        for _ in range(_MAX_ALIAS_ROUNDS):
            before = sum(map(len, self.aliases.values()))
            for visit, pairs in self.assignments:
                for name_node, value in pairs:
                    resolved = self.resolve(value, visit)
                    if resolved:
                        self.aliases.setdefault(name_node.id, set()).update(resolved)
            if sum(map(len, self.aliases.values())) == before:
                break

    def _string_variables(self) -> dict[str, set[str] | None]:
        """Names only ever bound to string literals (``for lib in ("a", "b")``): their values;
        names bound any other way: None."""
        values: dict[str, set[str] | None] = {}
        literal_targets: set[int] = set()
        for _, pairs in self.assignments:
            for target, value in pairs:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    literal_targets.add(id(target))
                    known = values.setdefault(target.id, set())
                    if known is not None:
                        known.add(value.value)
        for visit in self.visits:
            node = visit.node
            for name in visit.binds:
                if not (isinstance(node, ast.Name) and id(node) in literal_targets):
                    values[name] = None
        return values

    def _shadowed(self, name: str, visit: _Visit) -> bool:
        """Whether ``name`` (a builtin's) is bound where ``visit`` reads it, so that it cannot
        reach the builtin: a local, an enclosing function's, or a module global bound by an
        earlier top-level statement and never deleted."""
        scope: _Scope | None = visit.scope
        while scope is not None and scope.kind != "module":
            if name in scope.declared_global:
                break
            if scope.kind != "class" and name in scope.bound:
                return True
            scope = scope.parent
        line = self.module.first_binding.get(name)
        return name not in self.deleted and line is not None and line < visit.top_line

    def resolve(self, node: ast.AST, visit: _Visit) -> set[str]:
        """The qualified names ``node`` may stand for (``sys._getframe``, ``builtins.exec``)."""
        if isinstance(node, ast.Name):
            names = set(self.aliases.get(node.id, ()))
            if node.id == "__builtins__":
                names.add("builtins")
            if node.id in _BUILTINS and not self._shadowed(node.id, visit):
                names.add(f"builtins.{node.id}")
            return names
        if isinstance(node, ast.Attribute):
            if node.attr == "__self__" and self._builtin_function(node.value, visit):
                return {"builtins"}  # a builtin function's __self__ is the builtins module
            return {f"{name}.{node.attr}" for name in self.resolve(node.value, visit)}
        if isinstance(node, ast.Call) and self.resolve(node.func, visit) & _IMPORTERS:
            return self._imported_literally(node, visit) or set()
        return set()

    def _builtin_function(self, node: ast.AST, visit: _Visit) -> bool:
        return (
            isinstance(node, ast.Name)
            and node.id in _ALL_BUILTINS
            and node.id not in self.aliases
            and not self._shadowed(node.id, visit)
        )

    # -- findings -----------------------------------------------------------------------------

    def uses(self) -> list[Use]:
        for visit in self.visits:
            self._check(visit)
        return sorted(self.found.values(), key=lambda use: (use.line, use.capability))

    def _report(self, visit: _Visit, capability: str, detail: str) -> None:
        statement = _statement_span(visit.statement) if visit.statement else (1, 1)
        line = getattr(visit.node, "lineno", statement[0])
        self.found.setdefault((line, capability), Use(line, statement, capability, detail))

    def _check(self, visit: _Visit) -> None:
        node, parent = visit.node, visit.parent
        if isinstance(node, (ast.Name, ast.Attribute)):
            self._check_reference(node, visit)
        if isinstance(node, ast.Attribute) and node.attr in _ATTRIBUTES:
            called = isinstance(parent, ast.Call) and parent.func is node
            literal_import = (
                called
                and node.attr == "import_module"
                and (
                    self._imported_literally(parent, visit) is not None  # type: ignore[arg-type]
                )
            )
            if not (called and node.attr in _ATTRIBUTE_DUNDERS) and not literal_import:
                self._report(visit, _ATTRIBUTES[node.attr], f"the attribute .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in ("__builtins__", "__loader__"):
            self._report(visit, _ATTRIBUTES[node.id], f"the name {node.id}")
        elif isinstance(node, ast.Call):
            self._check_call(node, visit)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            self._check_string(node.value, visit)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                self._check_name(alias.name, visit, f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            self._check_import_from(node, visit)
        elif isinstance(node, _FUNCTIONS) and node.name == "__del__":
            self._report(visit, THREADS, "a finalizer (__del__)")

    def _check_reference(self, node: ast.Name | ast.Attribute, visit: _Visit) -> None:
        parent = visit.parent
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return  # the longer name is checked
        written = isinstance(node.ctx, (ast.Store, ast.Del))
        called = isinstance(parent, ast.Call) and parent.func is node
        if called and isinstance(parent, ast.Call):
            names = self.resolve(node, visit)
            imported = self._imported_literally(parent, visit) if names & _IMPORTERS else None
            if imported is not None:
                for module in sorted(imported):
                    self._check_name(module, visit, f"imports {module!r} by name")
                return
            if names & _NAMESPACES and _namespace_read_by_literal(parent, self.parents):
                return
        naming_a_type = visit.annotation or self._type_check_argument(node)
        for name in sorted(self.resolve(node, visit)):
            if written and (capability := _lookup(name, _WRITTEN)):
                self._report(visit, capability, f"writes {name}")
            capability = _lookup(name)
            if capability is not None and not (naming_a_type and name.startswith("types.")):
                self._report(visit, capability, name)
            elif name in _BY_NAME or name == _HASATTR:
                if not (isinstance(parent, ast.Call) and parent.func is node):
                    self._report(visit, COMPUTED, f"{name} passed as a value")
            elif name in _MODULE_VALUES and self._module_escapes(node, visit):
                self._report(visit, _MODULE_VALUES[name], f"the {name} module used as a value")

    def _imported_literally(self, call: ast.Call, visit: _Visit) -> set[str] | None:
        """The modules ``__import__(name)`` / ``import_module(name)`` imports when ``name`` is
        a string literal or a variable only ever bound to string literals; else None."""
        if len(call.args) != 1 or call.keywords:
            return None
        argument = call.args[0]
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            return {argument.value}
        if isinstance(argument, ast.Name):
            return self.literals.get(argument.id)
        return None

    def _type_check_argument(self, node: ast.AST) -> bool:
        """``isinstance(f, types.FunctionType)``: naming a type to test against."""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Tuple):
            node, parent = parent, self.parents.get(id(parent))
        return (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id in ("isinstance", "issubclass")
            and len(parent.args) == 2
            and parent.args[1] is node
        )

    def _module_escapes(self, node: ast.AST, visit: _Visit) -> bool:
        parent = visit.parent
        if not isinstance(getattr(node, "ctx", None), ast.Load):
            return False
        if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and parent.value is node:
            return not all(isinstance(t, ast.Name) for t in _targets(parent))
        if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node:
            by_name = self.resolve(parent.func, visit) & {*_BY_NAME, _HASATTR}
            return not (by_name and _string_at(parent, 1) is not None)
        return True

    def _check_name(self, name: str, visit: _Visit, detail: str) -> None:
        capability = _lookup(name)
        if capability is not None:
            self._report(visit, capability, detail)
        last = name.rsplit(".", 1)[-1]
        if last in _ATTRIBUTES:
            self._report(visit, _ATTRIBUTES[last], detail)

    def _check_import_from(self, node: ast.ImportFrom, visit: _Visit) -> None:
        module = node.module or ""
        for alias in node.names:
            full = f"{module}.{alias.name}" if node.level == 0 and module else alias.name
            if alias.name == "*":
                capability = _lookup(module) or _MODULE_VALUES.get(module)
                if node.level == 0 and capability:
                    self._report(visit, capability, f"from {module} import *")
                continue
            self._check_name(full, visit, f"from {'.' * node.level}{module} import {alias.name}")

    def _check_call(self, call: ast.Call, visit: _Visit) -> None:
        called = self.resolve(call.func, visit)
        for name in called & {*_BY_NAME, _HASATTR}:
            literal = _string_at(call, 1)
            if literal is None:
                if name != _HASATTR and not self._forwarded_name(call, visit):
                    self._report(visit, COMPUTED, f"{name.split('.')[1]} with a computed name")
                continue
            written = name in ("builtins.setattr", "builtins.delattr")
            self._check_attribute_path(call.args[0], literal, visit, written)
        if called & {"operator.attrgetter", "operator.methodcaller"}:
            names = call.args if "operator.attrgetter" in called else call.args[:1]
            for argument in names or [call]:
                if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
                    self._report(visit, COMPUTED, "an operator getter with a computed name")
        weak = called & {"weakref.ref", "weakref.proxy", "weakref.WeakMethod"}
        if weak and (len(call.args) > 1 or call.keywords):
            self._report(visit, THREADS, "a weak reference with a callback (a finalizer)")
        function = call.func
        if (
            isinstance(function, ast.Attribute)
            and function.attr in _ATTRIBUTE_DUNDERS
            and not _literal_dunder_call(function.attr, call)
            and not self._forwarded_name(call, visit)
        ):
            self._report(visit, COMPUTED, f"{function.attr} with a computed name")

    def _check_attribute_path(
        self, receiver: ast.AST, attribute: str, visit: _Visit, written: bool
    ) -> None:
        """``getattr(x, "name")`` as ``x.name``."""
        if attribute in _ATTRIBUTES:
            self._report(visit, _ATTRIBUTES[attribute], f"the attribute {attribute!r} by name")
        for name in self.resolve(receiver, visit):
            full = f"{name}.{attribute}"
            capability = _lookup(full) or (_lookup(full, _WRITTEN) if written else None)
            if capability is not None:
                self._report(visit, capability, f"{full} by name")

    def _forwarded_name(self, call: ast.Call, visit: _Visit) -> bool:
        """The name argument is the ``name`` parameter of the ``__getattr__`` (or
        ``__setattr__``, ...) the call is in, never reassigned: attribute access passed on,
        each spelling of which is checked where it is written."""
        for function in visit.functions[-1:]:
            parameters = [arg.arg for arg in _arguments(function.args)]
            if function.name not in _ATTRIBUTE_DUNDERS or len(parameters) < 2:
                continue
            name = parameters[1]
            passed = any(isinstance(a, ast.Name) and a.id == name for a in call.args[:2])
            reassigned = any(
                isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
                for n in ast.walk(function)
            )
            return passed and not reassigned
        return False

    def _check_string(self, value: str, visit: _Visit) -> None:
        if value in _ATTRIBUTES:
            self._report(visit, _ATTRIBUTES[value], f"the string {value!r}")
        elif _PATH.fullmatch(value):
            for part in re.split(r"[.:]", value):
                if part in _ATTRIBUTES:
                    self._report(visit, _ATTRIBUTES[part], f"the string {value!r}")
        elif "{" in value:
            for attribute in _format_attributes(value):
                if attribute in _ATTRIBUTES:
                    self._report(visit, _ATTRIBUTES[attribute], f"a format field .{attribute}")


def _lookup(name: str, table: dict[str, str | None] | None = None) -> str | None:
    """The capability of ``name`` by its longest entry in ``table`` (``_QUALIFIED``)."""
    entries = _QUALIFIED if table is None else table
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in entries:
            return entries[prefix]
    return None


def _string_at(call: ast.Call, position: int) -> str | None:
    """The string literal passed at ``position``, or None (another value, or unpacked)."""
    arguments = call.args[: position + 1]
    if len(arguments) <= position or any(isinstance(a, ast.Starred) for a in arguments):
        return None
    argument = arguments[position]
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return argument.value
    return None


def _literal_dunder_call(method: str, call: ast.Call) -> bool:
    """A call of ``__getattribute__`` (``__setattr__``, ...) with a literal name, bound
    (``obj.__setattr__("x", v)``) or not (``object.__setattr__(obj, "x", v)``), told apart by
    the number of arguments, not by the receiver (which an alias can hide)."""
    bound = 2 if method == "__setattr__" else 1
    count = len(call.args)
    if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
        return False
    return (count == bound and _string_at(call, 0) is not None) or (
        count == bound + 1 and _string_at(call, 1) is not None
    )


def _elements(node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> list[ast.AST]:
    if isinstance(node, ast.DictComp):
        return [node.key, node.value]
    return [node.elt]


def _format_attributes(template: str) -> Iterator[str]:
    """The attribute names read by ``template``'s replacement fields (``{0.a.b}``, nested)."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:
        return
    for _, field_name, spec, _ in parsed:
        for match in _FIELD_PART.finditer(field_name or ""):
            if match.group(1) is not None:
                yield match.group(1)
        if spec and "{" in spec:
            yield from _format_attributes(spec)


def _statement_span(statement: ast.stmt) -> tuple[int, int]:
    """The lines of a simple statement, or of a compound statement's header (decorators
    included) up to its body."""
    start = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", []))])
    body = getattr(statement, "body", None)
    if isinstance(body, list) and body:
        return start, max(start, body[0].lineno - 1)
    return start, statement.end_lineno or statement.lineno


def _arguments(arguments: ast.arguments) -> list[ast.arg]:
    extra = [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    return [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, *extra]


def _annotations(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr]:
    found = [arg.annotation for arg in _arguments(function.args) if arg.annotation is not None]
    return [*found, *([function.returns] if function.returns is not None else [])]


def _bound_names(node: ast.AST) -> list[str]:
    """The names a node binds in its scope."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        return [node.id]
    if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.alias):
        return [] if node.name == "*" else [node.asname or node.name.split(".")[0]]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]
    if isinstance(node, ast.MatchMapping) and node.rest:
        return [node.rest]
    return []


def _targets(node: ast.Assign | ast.AnnAssign | ast.NamedExpr) -> list[ast.expr]:
    return node.targets if isinstance(node, ast.Assign) else [node.target]


def _assigned_nodes(node: ast.AST) -> list[tuple[ast.Name, ast.expr]]:
    """``(name, value)`` of the plain bindings a node makes: ``a = b``, ``a, b = c, d``,
    ``a := b``, ``with b as a``, ``for a in (b, c)``."""
    pairs: list[tuple[ast.Name, ast.expr]] = []
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
        for target in _targets(node):
            pairs += _node_pairs(target, node.value)
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        pairs += _node_pairs(node.optional_vars, node.context_expr)
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and isinstance(
        node.iter, (ast.Tuple, ast.List, ast.Set)
    ):
        for element in node.iter.elts:
            pairs += _node_pairs(node.target, element)
    return pairs


def _node_pairs(target: ast.expr, value: ast.expr) -> list[tuple[ast.Name, ast.expr]]:
    if isinstance(target, ast.Name):
        return [(target, value)]
    if (
        isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, (ast.Tuple, ast.List))
        and len(target.elts) == len(value.elts)
    ):
        pairs = zip(target.elts, value.elts, strict=True)
        return [pair for t, v in pairs for pair in _node_pairs(t, v)]
    return []


def _namespace_read_by_literal(call: ast.Call, parents: dict[int, ast.AST | None]) -> bool:
    """``"name" in globals()`` or ``globals()["name"]`` (a literal, not a dunder): the same as
    naming the variable; ``globals()[name] = value``: the same as assigning one (a write into
    the module's own namespace reads nothing)."""
    if call.args or call.keywords:
        return False
    parent = parents.get(id(call))
    if (
        isinstance(parent, ast.Subscript)
        and parent.value is call
        and isinstance(parent.ctx, ast.Store)
        and isinstance(call.func, ast.Name)
        and call.func.id == "globals"
    ):
        return True
    if isinstance(parent, ast.Compare) and call in parent.comparators:
        return all(isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops)
    if isinstance(parent, ast.Subscript) and parent.value is call:
        key = parent.slice
        return (
            isinstance(key, ast.Constant)
            and isinstance(key.value, str)
            and not key.value.startswith("__")
            and isinstance(parent.ctx, ast.Load)
        )
    return False
