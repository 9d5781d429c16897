"""The grader's trusted test runner. Copied into the grading sandbox with ``guard.py`` and run
there as ``python -I -B boot.py JOB`` (stdlib and pytest only; not imported by ``ac_env``).

Stage 0, before any code of the repository runs:

1. read and delete the job file (the nonce, pytest's arguments, the graded test files, the
   conftests that may load, the lines the patch added);
2. make the process non-dumpable (no other process, a child of the product's included, may
   read or write its memory through ``/proc`` or ptrace);
3. draw the run's secret and fork the collector: a process that reads the guard's stream,
   keeps only lines that carry the nonce, the next sequence number and a MAC under the
   secret, and prints them in one block once the run ends (any other nonce line is
   tampering);
4. install the guard (``guard.py``: an audit hook that cannot be removed);
5. import pytest, its default plugins, installed ``pytest11`` plugins and ``unittest``; note
   the identity of every function and class of pytest, pluggy and unittest (``Machinery``);
6. compile the graded test files and allowed conftests as pytest's assertion rewriter would
   (and plainly), by file and qualified name: the only test code the guard will accept, each
   test only its own; find the tests the files mark xfail, statically;
7. arm the guard with the code loaded so far (trusted, by identity: every function alive),
   the test code, which of the plugin's functions may raise which evidence, and the import
   system's code it recognises by identity; print ``NONCE STARTED``.

Then ``pytest.main`` runs with ``Reporter`` as a plugin. The reporter holds no verdict: for
each test it raises evidence events (the test began; its function, about to be called by a
probe; the probe saw it return or raise; pytest's report of each phase) that the guard checks
and streams, and after each test it checks that pytest's, pluggy's and unittest's machinery,
``builtins``, the import system and the test modules' namespaces were left alone. The host
(``runner.read_report``) decides every outcome from the stream: a test passes only when its
own code, verified against the file, returned inside a call the trusted runner made and
pytest reported it passed.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import importlib.util
import inspect
import os
import sys
import tempfile
import types
from collections.abc import Iterator
from typing import Any

import pytest

_realpath = os.path.realpath
_WATCHED_PREFIXES = ("pytest", "_pytest", "pluggy", "unittest")
_XFAIL_NAMES = ("xfail", "expectedFailure")
_DESCRIPTORS = (property, staticmethod, classmethod)
_COLLECTOR_KEEP_BYTES = 64 * 1024 * 1024
_key = object.__hash__
"""An identity as the guard takes it (``id`` raises an audit event; this does not)."""


def _emit_line(fd: int, nonce: str, kind: str) -> None:
    data = f"\n{nonce} {kind}\n".encode()
    while data:
        data = data[os.write(fd, data) :]


# -- stage 0 ---------------------------------------------------------------------------------


def _no_dumping() -> None:
    """PR_SET_DUMPABLE 0 (through ctypes, then forgotten: the guard refuses ctypes later)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (OSError, AttributeError, ImportError):
        pass
    for name in [name for name in sys.modules if name == "ctypes" or name.startswith("ctypes.")]:
        del sys.modules[name]
    sys.modules.pop("_ctypes", None)


def _fork_collector(nonce: str, secret: bytes) -> tuple[int, int]:
    """(the collector's pid, the stream's write end). The collector keeps the guard's lines
    that carry the nonce, the next sequence number and a MAC under ``secret``, until the
    first such ``END`` or the end of the stream, then prints them to stdout in one block
    (without sequence number and MAC). Any other line with the nonce is tampering."""
    import hashlib

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(read_end)
        return pid, write_end
    os.close(write_end)
    prefix = f"{nonce} ".encode()
    kept, size, pending, expected, forged = [], 0, b"", 1, 0
    done = False
    while not done:
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if not line.startswith(prefix):
                continue
            text, _, mac = line[len(prefix) :].rpartition(b" ")
            seq, _, body = text.partition(b" ")
            digest = hashlib.blake2b(text, key=secret, digest_size=16).hexdigest().encode()
            if mac != digest or seq != str(expected).encode():
                forged += 1
                continue
            expected += 1
            if size < _COLLECTOR_KEEP_BYTES:
                kept.append(prefix + body + b"\n")
                size += len(body) + 1
            if body.startswith(b"END "):
                done = True
                break
        if len(pending) > 1 << 20:  # no line of the guard's is this long
            pending = b""
    if forged:
        reason = f"{forged} line(s) in the runner's stream were forged or out of sequence"
        kept.append(prefix + f'TAMPER "{reason}"\n'.encode())
    data = b"\n" + b"".join(kept)
    while data:
        data = data[os.write(1, data) :]
    os._exit(0)


def _load_guard(directory: str) -> Any:
    spec = importlib.util.spec_from_file_location("autocompact_guard", f"{directory}/guard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.__dict__["__builtins__"] = dict(vars(builtins))  # its own: the product's rebinding
    spec.loader.exec_module(module)  # of a builtin cannot reach the guard
    return module


def _import_plugins(repo: str, test_paths: list[str]) -> None:
    """pytest's default plugins, installed ``pytest11`` plugins, ``unittest``, and the
    standard library's modules that the test files import (their decorators wrap tests and
    their helpers run them), imported now so that their code is known before the
    repository's."""
    import importlib
    import importlib.metadata

    for name in ["unittest", "concurrent.futures.thread", *_stdlib_imports(repo, test_paths)]:
        with contextlib.suppress(Exception):
            importlib.import_module(name)

    from _pytest.config import default_plugins

    for name in default_plugins:
        with contextlib.suppress(ImportError):
            importlib.import_module(f"_pytest.{name}")
    with contextlib.suppress(Exception):
        for entry in importlib.metadata.entry_points(group="pytest11"):
            with contextlib.suppress(Exception):
                entry.load()


def _stdlib_imports(repo: str, paths: list[str]) -> list[str]:
    """The modules of the standard library that ``paths`` import."""
    import sysconfig

    stdlib = _realpath(sysconfig.get_paths()["stdlib"]) + os.sep
    names: set[str] = set()
    for path in paths:
        with contextlib.suppress(OSError, SyntaxError, ValueError):
            with open(os.path.join(repo, path), "rb") as handle:
                tree = ast.parse(handle.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module)
    found = []
    for name in sorted(names):
        with contextlib.suppress(Exception):
            spec = importlib.util.find_spec(name.split(".")[0])
            origin = getattr(spec, "origin", None) or ""
            if origin in ("built-in", "frozen") or _realpath(origin).startswith(stdlib):
                found.append(name)
    return found


def _nested_codes(code: types.CodeType) -> Iterator[types.CodeType]:
    pending = [code]
    while pending:
        current = pending.pop()
        yield current
        pending.extend(c for c in current.co_consts if isinstance(c, types.CodeType))


def _loaded_codes() -> list[types.CodeType]:
    """Every code object reachable from the modules loaded so far: their functions (with the
    functions nested in them, their defaults, closures and wrapped originals), classes and
    their methods and properties, and partials; and every function alive (a cached
    property's, a registry's)."""
    found: dict[int, types.CodeType] = {}
    seen: set[int] = set()
    pending: list[Any] = [
        value
        for module in list(sys.modules.values())
        for value in list(getattr(module, "__dict__", {}).values())
    ]
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        kind = type(value)
        if kind is types.FunctionType:
            for code in _nested_codes(value.__code__):
                found[id(code)] = code
            pending.extend(value.__defaults__ or ())
            pending.extend((value.__kwdefaults__ or {}).values())
            for cell in value.__closure__ or ():
                with contextlib.suppress(ValueError):
                    pending.append(cell.cell_contents)
            pending.append(value.__dict__.get("__wrapped__"))
        elif isinstance(value, type):
            pending.extend(vars(value).values())
        elif kind in (staticmethod, classmethod, types.MethodType):
            pending.append(value.__func__)
        elif kind is property:
            pending.extend((value.fget, value.fset, value.fdel))
        elif kind is functools.partial:
            pending.append(value.func)
    import gc

    for value in gc.get_objects():  # every function alive, however it is reached
        if type(value) is types.FunctionType:
            for code in _nested_codes(value.__code__):
                found[id(code)] = code
    return list(found.values())


def _test_codes(
    repo: str, paths: list[str]
) -> tuple[dict[str, dict[str, list[types.CodeType]]], set[str], dict[str, types.CodeType]]:
    """The code of each test file, compiled plainly and as pytest's assertion rewriter
    compiles it (with the assertion-pass hook when the repository's configuration mentions
    it), by file and qualified name (``<module>`` for the module's own code); the tests the
    files mark xfail; and the rewritten module code by real path, which pytest is then handed
    instead of rewriting the file again (``_hand_over``)."""
    from _pytest.assertion.rewrite import rewrite_asserts

    class PassHook:
        def getini(self, name: str) -> bool:
            return name == "enable_assertion_pass_hook"

    config = PassHook() if _mentions_pass_hook(repo) else None
    codes: dict[str, dict[str, list[types.CodeType]]] = {}
    xfails: set[str] = set()
    rewritten: dict[str, types.CodeType] = {}
    for path in paths:
        filename = os.path.join(repo, path)
        try:
            with open(filename, "rb") as handle:
                source = handle.read()
            tree = ast.parse(source, filename=filename)
        except (OSError, SyntaxError, ValueError):
            continue
        xfails |= {f"{path}::{name}" for name in _marked_xfail(tree)}
        named = codes.setdefault(filename, {})
        modules = [compile(source, filename, "exec", dont_inherit=True)]
        with contextlib.suppress(Exception):
            rewrite_asserts(tree, source, filename, config)  # type: ignore[arg-type]
            rewritten[_realpath(filename)] = compile(tree, filename, "exec", dont_inherit=True)
            modules.append(rewritten[_realpath(filename)])
        for module in modules:
            for code in _nested_codes(module):
                name = getattr(code, "co_qualname", code.co_name)
                named.setdefault(name, []).append(code)
    return codes, xfails, rewritten


def _mentions_pass_hook(repo: str) -> bool:
    for name in ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
        with contextlib.suppress(OSError), open(os.path.join(repo, name), "rb") as handle:
            if b"enable_assertion_pass_hook" in handle.read():
                return True
    return False


def _hand_over(rewritten: dict[str, types.CodeType]) -> None:
    """pytest's rewriter, for the files stage 0 rewrote, returns that code instead of
    rewriting again: the module pytest executes is then the very code the guard trusts, and
    the files are rewritten once, before any code of the repository ran."""
    import _pytest.assertion.rewrite as rewrite

    original = getattr(rewrite, "_rewrite_test", None)
    if original is None:
        return

    def _rewrite_test(fn: Any, config: Any) -> Any:
        code = rewritten.get(_realpath(str(fn)))
        return original(fn, config) if code is None else (os.stat(fn), code)

    rewrite._rewrite_test = _rewrite_test


def _marked_xfail(tree: ast.Module) -> set[str]:
    """Qualified names of the tests the file itself may mark xfail: a decorator, a class's or
    the module's ``pytestmark``, a ``pytest.param(..., marks=...)`` or a ``pytest.xfail()``
    call in the test's body; ``*`` for the whole module."""

    def mentions_xfail(node: ast.AST) -> bool:
        return any(
            (isinstance(n, ast.Attribute) and n.attr in _XFAIL_NAMES)
            or (isinstance(n, ast.Name) and n.id in _XFAIL_NAMES)
            for n in ast.walk(node)
        )

    def marks_module(body: list[ast.stmt]) -> bool:
        return any(
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets)
            and mentions_xfail(stmt.value)
            for stmt in body
        )

    found: set[str] = {"*"} if marks_module(tree.body) else set()

    def visit(body: list[ast.stmt], prefix: str, inherited: bool) -> None:
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                marked = inherited or marks_module(stmt.body) or mentions_xfail(stmt)
                if any(mentions_xfail(d) for d in stmt.decorator_list) or marked:
                    found.add(f"{prefix}{stmt.name}")
                visit(stmt.body, f"{prefix}{stmt.name}::", marked and inherited)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                inherited or mentions_xfail(stmt)
            ):
                found.add(f"{prefix}{stmt.name}")

    visit(tree.body, "", False)
    return found


# -- the machinery the tests stand on -----------------------------------------------------------


class Machinery:
    """The identity of every function, class and method of pytest, pluggy and unittest, and
    of ``builtins``' values, noted at stage 0. (Their code cannot be swapped in place: the
    guard refuses untrusted code giving a trusted function other code.)

    pytest's own plugins patch a few of these at configure time (``legacypath``): a change is
    accepted when the new function's code comes from pytest's, pluggy's or unittest's own
    files."""

    def __init__(self) -> None:
        self.modules = {
            name: module
            for name, module in list(sys.modules.items())
            if module is not None and name.split(".")[0] in _WATCHED_PREFIXES
        }
        self.homes = tuple(
            os.path.dirname(_realpath(str(getattr(sys.modules.get(name), "__file__", "")))) + os.sep
            for name in _WATCHED_PREFIXES
            if getattr(sys.modules.get(name), "__file__", None)
        )
        self.entries: list[tuple[str, Any, str, Any]] = []
        for name, module in self.modules.items():
            for attr, value in list(vars(module).items()):
                if isinstance(value, type) and value.__module__ == name:
                    for member, item in list(vars(value).items()):
                        if callable(item) or isinstance(
                            item, (property, staticmethod, classmethod)
                        ):
                            self.entries.append((f"{name}.{attr}", value.__dict__, member, item))
                if callable(value):
                    self.entries.append((name, module.__dict__, attr, value))
        self.builtins = dict(vars(builtins))

    def changes(self) -> list[str]:
        found = [
            f"sys.modules[{name!r}] was replaced"
            for name, module in self.modules.items()
            if sys.modules.get(name) is not module
        ]
        changed = []
        for owner, namespace, attr, value in self.entries:
            now = namespace.get(attr)
            if now is value:
                continue
            new_code = getattr(_function(now), "__code__", None)
            source = getattr(new_code, "co_filename", None)
            if not isinstance(source, str) or not _realpath(source).startswith(self.homes):
                changed.append(f"{owner}.{attr}")
        if changed:
            found.append(f"the test machinery was replaced: {', '.join(sorted(changed)[:5])}")
        now = vars(builtins)
        rebound = sorted(n for n, v in self.builtins.items() if now.get(n, self) is not v)
        if rebound:
            found.append(f"builtins were replaced: {', '.join(rebound[:5])}")
        return found


def _function(value: Any) -> Any:
    return value.fget if isinstance(value, property) else getattr(value, "__func__", value)


# -- the plugin ---------------------------------------------------------------------------------


class Reporter:
    """Raises the evidence the guard checks and streams; holds no verdict itself."""

    def __init__(self, job: dict[str, Any], repo: str, machinery: Machinery) -> None:
        self.repo = repo
        self.machinery = machinery
        self.allowed = {os.path.join(repo, path) for path in job["conftests"]}
        self.graded = {os.path.join(repo, path) for path in job["graded_files"]}
        self.hashes = {os.path.join(repo, p): _hash(os.path.join(repo, p)) for p in job["watch"]}
        # pytest's own repository: its machinery is the code under test
        self.checks = job["checks"] and not _realpath(pytest.__file__).startswith(repo + os.sep)
        self.pluginmanager: Any = None
        self.plugins = -1
        self.checked_functions: set[Any] = set()
        self.namespaces: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        self.function_class: Any = None
        self.unittest_class: Any = None

    # -- pytest hooks ------------------------------------------------------------------------

    def pytest_configure(self, config: Any) -> None:
        import _pytest.python
        import _pytest.unittest

        self.pluginmanager = config.pluginmanager
        self.function_class = _pytest.python.Function
        self.unittest_class = _pytest.unittest.TestCaseFunction

    def pytest_collection_finish(self, session: Any) -> None:
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None)
            if isinstance(path, str) and _realpath(path) in self.graded:
                values = dict(vars(module))
                kept = {k: v for k, v in values.items() if _is_definition(v)}
                self.namespaces.append((name, vars(module), kept))
        sys.audit("autocompact.integrity", self._problems("during collection", files=True))

    @pytest.hookimpl(tryfirst=True)
    def pytest_make_collect_report(self, collector: Any) -> None:
        path = str(getattr(collector, "path", getattr(collector, "fspath", "")))
        if path in self.hashes and _hash(path) != self.hashes[path]:
            reason = f"{os.path.relpath(path, self.repo)} changed on disk (before collection)"
            sys.audit("autocompact.integrity", [reason])

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: Any) -> Iterator[None]:
        sys.audit("autocompact.begin", item.nodeid)
        yield
        sys.audit("autocompact.integrity", self._problems(f"during {item.nodeid}"))

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: Any) -> Iterator[None]:
        nodeid = item.nodeid
        if type(item) in (self.function_class, self.unittest_class):
            original = item.obj  # pytest calls it (a unittest case: through unittest's run)
            sys.audit("autocompact.call", nodeid, original)
            if _plain_function(original):
                item.obj = _probe(original, nodeid)
            yield
            item.obj = original
        else:  # the guard tells a doctest (whose report alone decides) from anything else
            sys.audit("autocompact.call", nodeid, item)
            yield

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Iterator[Any]:
        outcome: Any = yield
        report = outcome.get_result()
        wasxfail = getattr(report, "wasxfail", None) is not None
        sys.audit(
            "autocompact.report", item.nodeid, str(report.when), str(report.outcome), wasxfail
        )

    # -- integrity ---------------------------------------------------------------------------

    def _problems(self, when: str, files: bool = False) -> list[str]:
        """The tampering found so far in the machinery, the graded test modules' definitions,
        hooks (when plugins came or went), and with ``files`` the watched files. (The import
        system's finders are not watched: libraries add their own, and a finder cannot run a
        test module's code: the guard refuses that to anything but the import system.)"""
        if not self.checks:
            return []
        found = list(self.machinery.changes())
        for name, namespace, kept in self.namespaces:
            changed = sorted(k for k, v in kept.items() if namespace.get(k, self) is not v)
            if changed:
                found.append(f"the test module {name} was changed: {', '.join(changed[:5])}")
        for path, digest in self.hashes.items() if files else ():
            if _hash(path) != digest:
                found.append(f"{os.path.relpath(path, self.repo)} changed on disk")
        plugins = len(self.pluginmanager.get_plugins()) if self.pluginmanager else self.plugins
        if plugins != self.plugins:
            self.plugins = plugins
            found += [f"a plugin or hook from {p} was registered" for p in self._foreign_plugins()]
        return [f"{reason} ({when})" for reason in found]

    def _foreign_plugins(self) -> list[str]:
        """Files of the repository, other than allowed conftests, that registered a plugin
        (a module) or a hook implementation."""
        found = [
            _realpath(str(plugin.__file__))
            for plugin in self.pluginmanager.get_plugins()
            if isinstance(plugin, types.ModuleType) and getattr(plugin, "__file__", None)
        ]
        for caller in list(vars(self.pluginmanager.hook).values()):
            for impl in getattr(caller, "get_hookimpls", list)():
                function = impl.function
                if function in self.checked_functions:
                    continue
                self.checked_functions.add(function)
                code = getattr(function, "__code__", None)
                source = code.co_filename if isinstance(code, types.CodeType) else ""
                found.append(_realpath(source) if source else "")
        boot = _realpath(__file__)
        return sorted(
            {
                os.path.relpath(source, self.repo) if source else "code without a file"
                for source in found
                if (source.startswith(self.repo + os.sep) or not source.startswith(os.sep))
                and source not in self.allowed
                and source != boot
            }
        )


def _probe(function: Any, nodeid: str) -> Any:
    """``function`` wrapped so that its return or raise is evidence."""

    @functools.wraps(function)
    def probe(*args: Any, **kwargs: Any) -> Any:
        try:
            result = function(*args, **kwargs)
        except BaseException as error:
            sys.audit("autocompact.result", nodeid, f"raised:{type(error).__name__}")
            raise
        sys.audit("autocompact.result", nodeid, "returned")
        return result

    return probe


def _is_definition(value: Any) -> bool:
    return isinstance(value, (types.FunctionType, type, types.ModuleType))


def _plain_function(function: Any) -> bool:
    return callable(function) and not (
        inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)
    )


def _hash(path: str) -> str:
    import hashlib

    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return "missing"


# -- main -----------------------------------------------------------------------------------------


def main() -> None:
    job_path = sys.argv[1]
    with open(job_path) as handle:
        job = ast.literal_eval(handle.read())
    os.unlink(job_path)
    runner_dir = os.path.dirname(_realpath(__file__))
    nonce, stdout = job.pop("nonce"), os.dup(1)
    sys.dont_write_bytecode = True
    if hasattr(sys, "pycache_prefix"):
        sys.pycache_prefix = tempfile.mkdtemp(prefix="grader-pycache-")
    _no_dumping()
    secret = os.urandom(32)
    collector, stream = _fork_collector(nonce, secret)
    repo = _realpath(os.getcwd())
    test_paths = sorted({*job["test_code"], *job["conftests"]})
    protected = [os.path.join(repo, path) for path in test_paths]
    arm = _load_guard(runner_dir).install(
        nonce, secret, stream, repo, job["changed"], [*protected, f"{runner_dir}/boot.py"]
    )
    _import_plugins(repo, test_paths)
    tests, xfails, rewritten = _test_codes(repo, test_paths)
    _hand_over(rewritten)
    machinery = Machinery()
    reporter = Reporter(job, repo, machinery)
    loaded = _loaded_codes()
    multicall = _named(loaded, "_multicall")
    evidence = {
        "begin": ([Reporter.pytest_runtest_protocol.__code__], multicall),
        "call": ([Reporter.pytest_runtest_call.__code__], multicall),
        "report": ([Reporter.pytest_runtest_makereport.__code__], multicall),
        "result": (
            [c for c in _nested_codes(_probe.__code__) if c.co_name == "probe"],
            _named(loaded, "pytest_pyfunc_call", "_callTestMethod"),
        ),
        "integrity": (
            [
                Reporter.pytest_runtest_protocol.__code__,
                Reporter.pytest_collection_finish.__code__,
                Reporter.pytest_make_collect_report.__code__,
                main.__code__,
            ],
            multicall | {_key(sys._getframe(1).f_code)},
        ),
        "end": ([main.__code__], {_key(sys._getframe(1).f_code)}),
    }
    raisers = {kind: ({_key(c) for c in codes}, ids) for kind, (codes, ids) in evidence.items()}
    import _pytest.doctest

    arm(
        [*loaded, sys._getframe(1).f_code],
        tests,
        raisers,
        {_pytest.doctest.DoctestItem: "doctest"},
        _identities(),
    )
    _emit_line(stdout, nonce, f"STARTED {sorted(xfails)!r}")
    del job["changed"], nonce, secret, arm, loaded, tests, rewritten
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[0:0] = [repo, *(os.path.join(repo, p) for p in extra)]
    error = ""
    try:
        exit_code = int(pytest.main(list(job["args"]), plugins=[reporter]))
    except BaseException as caught:
        exit_code, error = -1, f"{type(caught).__name__}: {caught}"[:500]
    for stream_object in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream_object.flush()
    try:
        sys.audit("autocompact.integrity", reporter._problems("at the end", files=True))
    except Exception as caught:
        failure = f"the runner's own checks failed: {caught!r}"[:500]
        sys.audit("autocompact.integrity", [failure])
    sys.audit("autocompact.end", exit_code, error)
    os.close(stream)
    with contextlib.suppress(OSError):
        os.waitpid(collector, 0)
    os._exit(0)


def _identities() -> dict[str, Any]:
    """What the guard recognises by identity: the import system's code that runs a module's
    code (pytest's rewriting loader, ``_call_with_frames_removed``) and compiles it from its
    file (``exec_module`` of an exact ``SourceFileLoader``), the loader classes that nobody may
    change, and the stdlib frames that only call what they were handed (thread trampolines)."""
    import concurrent.futures.thread
    import importlib._bootstrap
    import importlib._bootstrap_external
    import threading
    import weakref

    from _pytest.assertion.rewrite import AssertionRewritingHook

    bootstrap: Any = importlib._bootstrap  # private modules: typeshed leaves their names out
    external: Any = importlib._bootstrap_external
    loaders = (
        external.SourceFileLoader,
        external.FileLoader,
        external.SourceLoader,
        external._LoaderBasics,
    )
    return {
        "frames_removed": _key(bootstrap._call_with_frames_removed.__code__),
        "exec_module": _key(external._LoaderBasics.exec_module.__code__),
        "module_runners": {
            _key(bootstrap._call_with_frames_removed.__code__),
            _key(AssertionRewritingHook.exec_module.__code__),
        },
        "rewriting_loader": _key(AssertionRewritingHook.exec_module.__code__),
        "source_loader": external.SourceFileLoader,
        "loaders": {_key(cls) for cls in loaders},
        "loader_methods": sorted({name for cls in loaders for name in vars(cls)}),
        "trampolines": {
            _key(threading.Thread.run.__code__),
            _key(concurrent.futures.thread._WorkItem.run.__code__),
            _key(weakref.finalize.__call__.__code__),
        },
    }


def _named(codes: list[types.CodeType], *names: str) -> set[int]:
    """The ids of the codes of functions with one of ``names``."""
    return {_key(code) for code in codes if code.co_name in names}


if __name__ == "__main__":
    main()
