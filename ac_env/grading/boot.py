"""The grader's trusted test runner. Copied into the grading sandbox and run there as
``python -I -B boot.py JOB`` (stdlib and pytest only; not imported by ``ac_env``).

Before any code of the repository runs it reads and deletes its job file (a nonce, pytest's
arguments, the allowed conftest files and the test files to watch), keeps a duplicate of
stdout, imports pytest from the system (the repository is put on ``sys.path`` only after),
points bytecode caches at an empty directory, notes the identity of pytest's and pluggy's
functions and classes, hashes the test files and prints ``NONCE STARTED``. It then runs
``pytest.main`` with ``Recorder`` as a plugin, and prints one ``NONCE REPORT {...}`` line with
each test's outcome as the reports and its own evidence agree, the exit code, whether the
repository's code ran, and any tampering found:

- pytest's or pluggy's functions, classes or methods replaced (checked after every test and
  at the end), or ``sys.modules`` entries swapped;
- a hook implementation from the repository that is not an allowed ``conftest.py``;
- a test reported as passed whose function was never called, or raised; an xfail raised by
  ``pytest.xfail()`` from product code;
- a test file or conftest changed on disk while the tests ran.

Code under test runs in this process: a determined attacker can still reach this module's
state. See "How grading is hardened" in the README.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import inspect
import os
import sys
import tempfile
import types
from collections.abc import Iterator
from typing import Any

import pytest

_write = os.write
_repr = repr
_realpath = os.path.realpath
_wrapper = pytest.hookimpl(hookwrapper=True, tryfirst=True)
_WATCHED_PREFIXES = ("pytest", "_pytest", "pluggy")
_MAX_REASONS = 20


def _emit(fd: int, nonce: str, kind: str, payload: str) -> None:
    data = f"\n{nonce} {kind} {payload}\n".encode("utf-8", "backslashreplace")
    while data:
        data = data[_write(fd, data) :]


class Machinery:
    """The identity of every function, class and method of pytest and pluggy, and their code.

    pytest's own plugins patch a few of these at configure time (``legacypath``): a change is
    accepted when the new function's code comes from pytest's or pluggy's own files."""

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
        self.entries: list[tuple[str, Any, str, Any, Any, Any]] = []
        for name, module in self.modules.items():
            for attr, value in list(vars(module).items()):
                if isinstance(value, type) and value.__module__ == name:
                    for member, item in list(vars(value).items()):
                        self._add(f"{name}.{attr}", value.__dict__, member, item)
                self._add(name, module.__dict__, attr, value)

    def _add(self, owner: str, namespace: Any, attr: str, value: Any) -> None:
        function = _function(value)
        code = getattr(function, "__code__", None)
        if not isinstance(code, types.CodeType):
            function = code = None
        if callable(value) or code is not None:
            self.entries.append((owner, namespace, attr, value, function, code))

    def changes(self) -> list[str]:
        found = [
            f"sys.modules[{name!r}] was replaced"
            for name, module in self.modules.items()
            if sys.modules.get(name) is not module
        ]
        changed = []
        for owner, namespace, attr, value, function, code in self.entries:
            now = namespace.get(attr)
            if now is value and (function is None or function.__code__ is code):
                continue
            new_code = getattr(_function(now), "__code__", None)
            source = getattr(new_code, "co_filename", None)
            if not isinstance(source, str) or not _realpath(source).startswith(self.homes):
                changed.append(f"{owner}.{attr}")
        if changed:
            found.append(f"pytest's machinery was replaced: {', '.join(sorted(changed)[:5])}")
        return found


def _function(value: Any) -> Any:
    return value.fget if isinstance(value, property) else getattr(value, "__func__", value)


class Recorder:
    """The trusted plugin: records evidence per test and checks the machinery as it goes."""

    def __init__(self, job: dict[str, Any], repo: str, boot: str, machinery: Machinery) -> None:
        self.repo = repo
        self.boot = boot
        self.machinery = machinery
        # pytest's own repository: its machinery is the code under test
        self.checks = job["checks"] and not _realpath(pytest.__file__).startswith(repo + os.sep)
        self.allowed = {os.path.join(repo, path) for path in job["conftests"]}
        self.test_code = {os.path.join(repo, path) for path in job["test_code"]} | {boot}
        self.hashes = {os.path.join(repo, p): _hash(os.path.join(repo, p)) for p in job["watch"]}
        self.evidence: dict[str, dict[str, Any]] = {}
        self.outcomes: dict[str, str] = {}
        self.tampered: list[str] = []
        self.seen: set[str] = set()
        self.checked_functions: set[int] = set()
        self.plugins = -1
        self.pluginmanager: Any = None
        self.function_class: Any = None

    # -- pytest hooks ------------------------------------------------------------------------

    def pytest_configure(self, config: Any) -> None:
        import _pytest.python

        self.pluginmanager = config.pluginmanager
        self.function_class = _pytest.python.Function

    def pytest_collection_finish(self, session: Any) -> None:
        self._check("during collection", files=True)

    @pytest.hookimpl(tryfirst=True)
    def pytest_make_collect_report(self, collector: Any) -> None:
        path = str(getattr(collector, "path", getattr(collector, "fspath", "")))
        if path in self.hashes and _hash(path) != self.hashes[path]:
            self._tamper(f"{os.path.relpath(path, self.repo)} changed on disk", "before collection")

    @_wrapper
    def pytest_runtest_protocol(self, item: Any) -> Iterator[None]:
        yield
        self._check(f"during {item.nodeid}")

    @_wrapper
    def pytest_runtest_setup(self, item: Any) -> Any:
        outcome = yield
        self._phase(item).update(setup=_exception(outcome))

    @_wrapper
    def pytest_runtest_call(self, item: Any) -> Any:
        evidence = self._phase(item)
        original = getattr(item, "obj", None)
        probed = type(item) is self.function_class and _plain_function(original)
        if probed:
            item.obj = self._probe(original, evidence)
        evidence["probed"] = probed
        outcome = yield
        if probed:
            item.obj = original
        evidence["call"] = _exception(outcome)

    @_wrapper
    def pytest_runtest_teardown(self, item: Any) -> Any:
        outcome = yield
        self._phase(item).update(teardown=_exception(outcome))

    @_wrapper
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Any:
        outcome = yield
        report = outcome.get_result()
        self._judge(item, report)

    # -- evidence ----------------------------------------------------------------------------

    def _phase(self, item: Any) -> dict[str, Any]:
        return self.evidence.setdefault(item.nodeid, {"calls": 0})

    def _probe(self, function: Any, evidence: dict[str, Any]) -> Any:
        repo, tests = self.repo, self.test_code | self.allowed

        @functools.wraps(function)
        def probe(*args: Any, **kwargs: Any) -> Any:
            evidence["calls"] += 1
            evidence["returned"] = False
            try:
                result = function(*args, **kwargs)
            except BaseException as error:
                evidence["raised"] = type(error).__name__
                evidence["raised_from"] = _raiser(error, repo, tests)
                raise
            evidence["returned"] = True
            return result

        return probe

    def _judge(self, item: Any, report: Any) -> None:
        evidence = self._phase(item)
        nodeid, when = item.nodeid, report.when
        xfail = bool(getattr(report, "wasxfail", None) is not None) and report.skipped
        if report.failed:
            self.outcomes[nodeid] = "FAILED" if when == "call" else "ERROR"
            return
        if when == "call" and report.passed:
            lie = self._passed_without_evidence(evidence)
            if lie is not None:
                self._tamper(f"{nodeid} was reported as passed, but {lie}")
                self.outcomes[nodeid] = "FAILED"
                return
            xpass = getattr(report, "wasxfail", None) is not None
            self.outcomes[nodeid] = "XPASS" if xpass else "PASSED"
        elif xfail:
            self.outcomes[nodeid] = self._xfail(item, evidence)
        elif report.skipped:
            self.outcomes[nodeid] = "SKIPPED"
        elif when != "call" and evidence.get(when) is not None:
            self._tamper(f"{nodeid}: {when} was reported as passed, but it raised")
            self.outcomes[nodeid] = "ERROR"

    def _passed_without_evidence(self, evidence: dict[str, Any]) -> str | None:
        for phase in ("setup", "call"):
            if evidence.get(phase) is not None:
                return f"its {phase} raised {evidence[phase]}"
        if "probed" not in evidence:
            return "pytest's test-call hook never ran"
        if not evidence["probed"]:
            return None
        if evidence["calls"] == 0:
            return "its test function was never called"
        if not evidence.get("returned"):
            return f"its test function raised {evidence.get('raised')}"
        return None

    def _xfail(self, item: Any, evidence: dict[str, Any]) -> str:
        marked = any(True for _ in item.iter_markers(name="xfail"))
        if evidence.get("raised") == "XFailed" and evidence.get("raised_from") == "product":
            self._tamper(f"{item.nodeid}: pytest.xfail() was called from product code")
            return "FAILED"
        if marked or not evidence.get("probed") or evidence.get("raised") == "XFailed":
            return "XFAIL"
        self._tamper(f"{item.nodeid} was reported as xfailed without an xfail marker")
        return "FAILED"

    # -- integrity ---------------------------------------------------------------------------

    def _check(self, when: str, files: bool = False) -> None:
        """Tampering so far: pytest's machinery (always), hooks (when plugins came or went),
        and with ``files`` the watched files on disk."""
        if not self.checks:
            return
        for change in self.machinery.changes():
            self._tamper(change, when)
        for path, digest in self.hashes.items() if files else ():
            if _hash(path) != digest:
                self._tamper(f"{os.path.relpath(path, self.repo)} changed on disk", when)
        plugins = len(self.pluginmanager.get_plugins()) if self.pluginmanager else self.plugins
        if plugins != self.plugins:
            self.plugins = plugins
            for plugin in self._foreign_plugins():
                self._tamper(f"a plugin or hook from {plugin} was registered", when)

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
                if id(function) in self.checked_functions:
                    continue
                self.checked_functions.add(id(function))
                code = getattr(function, "__code__", None)
                source = code.co_filename if isinstance(code, types.CodeType) else ""
                found.append(_realpath(source) if source else "")
        return sorted(
            {
                os.path.relpath(source, self.repo) if source else "code without a file"
                for source in found
                if (source.startswith(self.repo + os.sep) or not source.startswith(os.sep))
                and source not in self.allowed
                and source != self.boot
            }
        )

    def finish(self) -> None:
        self._check("at the end of the session", files=True)

    def _tamper(self, reason: str, when: str = "") -> None:
        """Note ``reason`` once (the first time it is seen, with when), at most 20 reasons."""
        if reason not in self.seen and len(self.seen) < _MAX_REASONS:
            self.seen.add(reason)
            self.tampered.append(f"{reason} ({when})" if when else reason)


def _plain_function(function: Any) -> bool:
    return callable(function) and not (
        inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)
    )


def _exception(outcome: Any) -> str | None:
    excinfo = outcome.excinfo
    return None if excinfo is None else excinfo[0].__name__


def _raiser(error: BaseException, repo: str, tests: set[str]) -> str:
    """Where the innermost frame outside pytest that raised ``error`` lives."""
    traceback, source = error.__traceback__, "outside"
    while traceback is not None:
        path = _realpath(traceback.tb_frame.f_code.co_filename)
        if path.startswith(repo + os.sep):
            source = "test" if path in tests else "product"
        traceback = traceback.tb_next
    return source


def _hash(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return "missing"


def _watch_repo_code(repo: str, boot: str) -> list[str]:
    """A list that gets the first file of the repository whose code is executed (an audit
    hook: it sees modules whose import fails too, and cannot be removed)."""
    ran: list[str] = []
    inside = repo + os.sep

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if ran or event != "exec":
            return
        filename = getattr(args[0], "co_filename", "")
        if isinstance(filename, str) and filename.startswith(inside) and filename != boot:
            ran.append(filename)

    sys.addaudithook(audit)
    return ran


def _import_default_plugins() -> None:
    """Import pytest's own plugins now, so that their identity is noted before any other code."""
    import importlib

    from _pytest.config import default_plugins

    for name in default_plugins:
        try:
            importlib.import_module(f"_pytest.{name}")
        except ImportError:
            continue


def main() -> None:
    job_path = sys.argv[1]
    with open(job_path) as handle:
        job = ast.literal_eval(handle.read())
    os.unlink(job_path)
    nonce, out = job["nonce"], os.dup(1)
    sys.dont_write_bytecode = True
    if hasattr(sys, "pycache_prefix"):
        sys.pycache_prefix = tempfile.mkdtemp(prefix="grader-pycache-")
    import pytest

    _import_default_plugins()
    machinery = Machinery()
    _emit(out, nonce, "STARTED", "")
    repo = _realpath(os.getcwd())
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[0:0] = [repo, *(os.path.join(repo, p) for p in extra)]
    boot = _realpath(__file__)
    recorder = Recorder(job, repo, boot, machinery)
    ran = _watch_repo_code(repo, boot)
    error = ""
    try:
        exit_code = int(pytest.main(list(job["args"]), plugins=[recorder]))
    except BaseException as caught:
        exit_code, error = -1, f"{type(caught).__name__}: {caught}"[:500]
    try:
        recorder.finish()
    except Exception as caught:
        recorder.tampered.append(f"the runner's own checks failed: {caught!r}"[:500])
    report = {
        "exit_code": exit_code,
        "error": error,
        "outcomes": recorder.outcomes,
        "tampered": recorder.tampered,
        "repo_code_ran": bool(ran),
    }
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    _emit(out, nonce, "REPORT", _repr(report))
    os._exit(0)


if __name__ == "__main__":
    main()
