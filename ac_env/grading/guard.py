"""The grader's trust anchor inside the test process: an audit hook (PEP 578) that the trusted
runner (``boot.py``) installs before any code of the repository runs. It cannot be removed, and
it is the only part of the test process whose word the grader takes. Copied into the grading
sandbox beside ``boot.py`` and loaded from its file (stdlib only; never imported by ``ac_env``).

What it does, once armed (``install`` then ``arm``, both at stage 0):

- **Evidence.** The runner's pytest plugin raises ``autocompact.*`` audit events (a test began,
  its function was about to be called, it returned or raised, pytest reported a phase). The
  hook accepts one only when it comes from the main thread, from the exact code object that
  is meant to raise it (by identity), called by the code meant to call it, with every frame
  of the stack trusted: code loaded at stage 0 (the standard library, pytest, pluggy, the
  runner) or the graded test files' own code. Code of the product, or anything compiled since,
  can never speak for a test: calling the plugin's functions, scheduling them as callbacks or
  raising the events by hand is itself reported as tampering. Before a test function is
  called, its code must equal the code that stage 0 compiled from the test file on disk.
- **A stream out of the process.** Every accepted fact and every tampering found is written at
  once, with the run's nonce, to a pipe read by the collector (a process forked at stage 0,
  before any repository code, that keeps only nonce lines and prints them after the test
  process ends). What was written cannot be taken back, output floods cannot push it out of
  the log, and the nonce lives only in this hook's closure.
- **Capabilities.** After arming it refuses, for any code: tracing and profiling hooks, new
  audit hooks, ``ctypes``, extension modules loaded from outside the system's directories,
  opening any process's ``/proc/*/mem``, and reading a traceback frame of this hook. It
  refuses to untrusted code: making a function from, or giving a function, the code of a test
  or of the runner, and executing a test module's code a second time. With the patch's own
  lines known (``changed``: file -> added line numbers), it reports as tampering a use of
  ``gc``'s object graph, other threads' frames, a read of a graded test file or of a test
  function's code, compiling code under the name of another real file, and writing bytecode
  or extension files, whenever a frame of the stack stands on a line the patch added; and it
  flags (reports, without tampering) frame access and process creation from those lines.

It never calls, compares or formats an object the product could have made: it inspects only
exact built-in types, so no product method runs while it does.
"""

from __future__ import annotations

import _thread
import os
import sys
import types
from pathlib import PosixPath, PurePosixPath
from typing import Any

_FRAME_ATTRS = ("tb_frame", "gi_frame", "cr_frame", "ag_frame")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_MAX_REASONS = 50


def install(nonce: str, out: int, repo: str, changed: dict, protected: list) -> Any:
    """Install the hook (permissive until armed) and return its ``arm`` function."""
    write, getframe, ident, realpath = os.write, sys._getframe, _thread.get_ident, os.path.realpath
    str_type, int_type, bytes_type, tuple_type = str, int, bytes, tuple
    code_type, function_type, method_type = types.CodeType, types.FunctionType, types.MethodType
    module_type, dict_type = types.ModuleType, dict
    dict_get = dict.get
    plain = (str, int, bool, type(None))
    inside = repo + os.sep
    cwd = repo
    system_dirs = tuple(
        realpath(entry) + os.sep
        for entry in sys.path
        if entry and os.path.isdir(entry) and not realpath(entry).startswith((inside, "/tmp"))
    )
    protected_files = frozenset(protected)
    changed_lines = {os.path.join(repo, path): frozenset(lines) for path, lines in changed.items()}
    state: dict = {"armed": False, "ended": False, "reasons": 0, "ran": False}
    trusted: dict = {}  # id(code) -> code (kept alive, so ids stay unique)
    tests: set = set()  # code objects of the graded test files (compared by value)
    raisers: dict = {}  # evidence kind -> (ids of the codes that raise it, ids of their callers)
    busy: set = set()
    guard_codes: set = set()
    genuine: dict = {}  # id -> the namespace the import system made for a test module
    real_names: dict = {}  # co_filename -> whether it names a graded test file
    item_kinds: dict = {}  # classes of pytest items whose report alone is their outcome

    def emit(kind: str, payload: Any) -> None:
        data = (nonce + " " + kind + " " + _encode(payload) + "\n").encode("utf-8", "replace")
        try:
            while data:
                data = data[write(out, data) :]
        except OSError:
            pass  # the product closed the stream: what follows is lost, and counts as missing

    def tamper(reason: str) -> None:
        if state["reasons"] < _MAX_REASONS:
            state["reasons"] += 1
            emit("TAMPER", reason)

    def flag(reason: str) -> None:
        if state["reasons"] < _MAX_REASONS:
            state["reasons"] += 1
            emit("FLAG", reason)

    def where(frame: Any) -> str:
        filename = "".join((frame.f_code.co_filename,))
        return f"{os.path.relpath(filename, repo)}:{frame.f_lineno}"

    def frames() -> list:
        """The stack below the hook, innermost first."""
        frame: Any = getframe(1)
        found: list = []
        while frame is not None and frame.f_code in guard_codes:
            frame = frame.f_back
        while frame is not None:
            found.append(frame)
            frame = frame.f_back
        return found

    def is_test_code(code: Any) -> bool:
        """Code of a graded test file: equal to what stage 0 compiled from it, and compiled
        under that file's name (an empty module elsewhere compiles to equal code)."""
        filename = "".join((code.co_filename,))  # an exact str, whatever the code holds
        known = real_names.get(filename)
        if known is None:  # first the file (a string), then the code's value (a hash)
            known = real_names[filename] = _normal(filename, cwd) in protected_files
        return known and code in tests

    def is_trusted(code: Any) -> bool:
        return id(code) in trusted or is_test_code(code)

    def patch_frame(stack: list) -> Any:
        """The first frame standing on a line the patch added, or None."""
        for frame in stack:
            lines = changed_lines.get(frame.f_code.co_filename)
            if lines is not None and frame.f_lineno in lines:
                return frame
        return None

    def by_patch(what: str, severe: bool) -> None:
        frame = patch_frame(frames())
        if frame is not None:
            (tamper if severe else flag)(f"the patch's code at {where(frame)} {what}")

    # -- evidence ----------------------------------------------------------------------------

    def evidence(kind: str, args: tuple) -> None:
        """Check and stream one event of the runner's. Every kind must come from the main
        thread and the code meant to raise it, called as it should be; ``call`` and ``result``
        (a pass needs both) also from a stack of trusted code alone. The others cannot make a
        test pass: a forged report, begin or integrity problem only loses reward."""
        if state["ended"]:
            return
        stack = frames()
        expected, callers = raisers.get(kind, ((), ()))
        raiser = stack[0] if stack else None
        problem = ""
        if ident() != state["thread"]:
            problem = "from another thread"
        elif raiser is None or id(raiser.f_code) not in expected:
            problem = "from code that is not the runner's"
        elif callers and (raiser.f_back is None or id(raiser.f_back.f_code) not in callers):
            problem = "by a caller that is not pytest's"
        elif kind in ("call", "result"):  # the two facts a pass stands on: the whole stack
            strangers = [frame for frame in stack if not is_trusted(frame.f_code)]
            if strangers:
                problem = f"with untrusted code on the stack at {where(strangers[0])}"
        if not problem and not all(_plain_values(arg, plain) for arg in args[:1] + args[2:]):
            problem = "with arguments that are not plain values"
        if problem:
            tamper(f"evidence '{kind}' was raised {problem}")
            return
        if kind == "call":
            nodeid, function = args
            emit("CALL", [nodeid, verify(function)])
        elif kind == "end":
            emit("END", [*args, state["ran"]])
            state["ended"] = True
        elif kind == "integrity":
            for reason in args[0]:
                tamper(reason)
        else:
            emit(kind.upper(), list(args))

    def verify(function: Any, depth: int = 0) -> str:
        """'' when ``function`` carries a graded test file's own code, else why not. A
        decorator's wrapper of the standard library's or pytest's (``mock.patch``,
        ``functools.wraps``) passes when the function it wraps (its ``__wrapped__``, which it
        holds in its closure) does."""
        if depth == 0 and type(function) in item_kinds:
            return item_kinds[type(function)]
        if type(function) is method_type:
            function = function.__func__
        if type(function) is not function_type:
            return "the test is not a plain function"
        code = function.__code__
        if type(code) is not code_type:
            return "its code is not the test file's"
        if not is_test_code(code):
            inner = dict_get(function.__dict__, "__wrapped__")
            cells = function.__closure__ or ()
            if depth < 8 and id(code) in trusted and any(holds(cell, inner) for cell in cells):
                return verify(inner, depth + 1)
            return "its code is not the test file's"
        if id(function.__globals__) not in genuine:
            return "its globals are not its test module's"
        return ""

    def holds(cell: Any, value: Any) -> bool:
        try:
            return cell.cell_contents is value
        except ValueError:  # an empty cell
            return False

    # -- capabilities ------------------------------------------------------------------------

    def on_getattr(args: tuple) -> Exception | None:
        target, name = args
        if type(name) is not str_type:
            return None
        if name in _FRAME_ATTRS:
            frame = getattr(target, name, None)
            reader = stranger() if frame is not None and frame.f_code in guard_codes else None
            if reader is not None:
                tamper(f"a frame of the grader's guard was read by the code at {where(reader)}")
                return RuntimeError("access denied by the grader")
            by_patch(f"reads a frame ({name})", severe=False)
        elif name == "__code__" and type(target) is function_type and is_test_code(target.__code__):
            by_patch("reads a test function's code", severe=True)
        elif name == "f_code" and is_test_code(target.f_code):
            by_patch("reads a test's code through its frame", severe=True)
        return None

    def on_setattr(args: tuple) -> Exception | None:
        target, name = args[0], args[1]
        if type(name) is not str_type or type(target) is not function_type:
            return None
        writer = stranger() if name == "__code__" and is_trusted(target.__code__) else None
        if writer is not None:
            tamper(f"a test's or the runner's function was given other code at {where(writer)}")
            return RuntimeError("denied by the grader")
        return None

    def stranger() -> Any:
        """The innermost frame of untrusted code on the stack, or None."""
        for frame in frames():
            if not is_trusted(frame.f_code):
                return frame
        return None

    def on_exec(args: tuple) -> Exception | None:
        code = args[0]
        if type(code) is not code_type:
            return None
        if not state["ran"] and "".join((code.co_filename,)).startswith(inside):
            state["ran"] = True
        if code.co_name != "<module>" or not is_test_code(code):
            return None  # (the file name is checked before the code's value)
        stack = frames()
        strangers = [frame for frame in stack if not is_trusted(frame.f_code)]
        if strangers:
            tamper(f"a test module's code was executed by the code at {where(strangers[0])}")
            return RuntimeError("denied by the grader")
        if stack:  # the import system's frame holds the new module's namespace
            for value in stack[0].f_locals.values():
                if type(value) is tuple_type and len(value) > 1:
                    value = value[1]
                elif type(value) is module_type:
                    value = value.__dict__
                if type(value) is dict_type:
                    genuine[id(value)] = value
        return None

    def on_compile(args: tuple) -> Exception | None:
        filename = args[1] if len(args) > 1 else None
        if type(filename) is not str_type or patch_frame(frames()) is None:
            return None
        if not os.path.isfile(filename):
            return None
        source = args[0]
        if type(source) is str_type:
            source = source.encode("utf-8", "surrogateescape")
        if type(source) is bytes and _same_file_bytes(filename, source):
            return None
        by_patch(f"compiles code under the name of {filename}", severe=True)
        return None

    def on_code_new(args: tuple) -> Exception | None:
        filename = args[1] if len(args) > 1 else None
        if type(filename) is str_type and os.path.isfile(filename):
            by_patch(f"makes code under the name of {filename}", severe=True)
        return None

    def path_text(path: Any) -> str | None:
        """``path`` as an exact str, without running any method of the product's."""
        kind = type(path)
        if issubclass(kind, str_type):
            return "".join((path,))
        if issubclass(kind, bytes_type):
            return b"".join((path,)).decode("utf-8", "surrogateescape")
        if kind in (PosixPath, PurePosixPath):
            return os.fspath(path)
        return None

    def on_open(args: tuple) -> Exception | None:
        path, mode, flags = args
        if type(path) is int_type:
            return None
        text = path_text(path)
        if text is None:
            by_patch("opens a file through a path object of its own", severe=False)
            return None
        plain_path = _normal(text, cwd)  # a link cannot stand in: ``on_link`` watches links
        if plain_path.startswith("/proc/") and plain_path.endswith("/mem"):
            tamper(f"{text} was opened")
            return PermissionError("denied by the grader")
        writing = (type(mode) is str_type and any(c in mode for c in "wax+")) or (
            type(flags) is int_type and flags & _WRITE_FLAGS
        )
        if writing and plain_path.endswith((".pyc", ".so")):
            return deny(f"writes {plain_path}")
        if not writing and plain_path in protected_files:
            by_patch(f"reads {os.path.relpath(plain_path, repo)}", severe=True)
        return None

    def on_link(args: tuple) -> Exception | None:
        """A link to a process's files, a test file or the runner is refused: opening it would
        read what ``on_open`` guards by name."""
        target = path_text(args[0]) if args else None
        if target is None:
            return None
        plain_target = _normal(target, cwd)
        if plain_target.startswith("/proc/") or plain_target in protected_files:
            tamper(f"a link to {target} was made")
            return PermissionError("denied by the grader")
        return None

    def on_import(args: tuple) -> Exception | None:
        filename = args[1] if len(args) > 1 else None
        if type(filename) is str_type and filename.endswith(".so"):
            real = _normal(filename, cwd)
            if real.startswith(inside) or not real.startswith(system_dirs):
                tamper(f"an extension module was loaded from {filename}")
                return ImportError("extension modules outside the system are denied by the grader")
        return None

    def deny_untrusted(what: str) -> Exception | None:
        """Refuse ``what`` when untrusted code is on the stack (doctest, called by a test,
        clears the trace function while it runs its examples)."""
        return None if stranger() is None else deny(what)

    def deny(what: str) -> Exception:
        by_patch(what, severe=True)
        return PermissionError(f"{what}: denied by the grader")

    def hook(event: str, args: tuple) -> None:
        __tracebackhide__ = True  # pytest leaves the guard out of failure reports
        if not state["armed"] or type(event) is not str_type:
            return
        handler = handlers.get(event)
        if handler is None and event[:7] != "ctypes." and event[:12] != "autocompact.":
            return  # most events: nothing to check
        me = ident()
        if me in busy:
            return  # events raised by the hook's own work
        busy.add(me)
        refusal: Exception | None = None
        try:
            if event[:12] == "autocompact.":
                evidence(event[12:], args if type(args) is tuple_type else ())
            elif event[:7] == "ctypes.":
                by_patch("uses ctypes", severe=True)
                refusal = ImportError("ctypes is denied by the grader")
            elif handler is not None:
                refusal = handler(args)
        except Exception as error:  # a fault of the guard's must never break the code under test
            flag(f"the grader's guard failed on {event}: {type(error).__name__}: {error}")
        finally:
            busy.discard(me)
        if refusal is not None:
            raise refusal

    handlers = {
        "object.__getattr__": on_getattr,
        "object.__setattr__": on_setattr,
        "exec": on_exec,
        "compile": on_compile,
        "code.__new__": on_code_new,
        "open": on_open,
        "import": on_import,
        "os.symlink": on_link,
        "os.link": on_link,
        "sys.settrace": lambda args: deny_untrusted("sets a trace function"),
        "sys.setprofile": lambda args: deny_untrusted("sets a profile function"),
        "sys.addaudithook": lambda args: deny("adds an audit hook"),
        "gc.get_objects": lambda args: by_patch("walks gc's objects", severe=True),
        "gc.get_referrers": lambda args: by_patch("walks gc's referrers", severe=True),
        "gc.get_referents": lambda args: by_patch("walks gc's referents", severe=True),
        "sys._current_frames": lambda args: by_patch("reads other threads' frames", severe=True),
        "sys._current_exceptions": lambda args: by_patch("reads other threads' errors", True),
        "sys._getframe": lambda args: by_patch("reads a frame (sys._getframe)", severe=False),
        "subprocess.Popen": lambda args: by_patch("starts a process", severe=False),
        "os.system": lambda args: by_patch("starts a process", severe=False),
        "os.posix_spawn": lambda args: by_patch("starts a process", severe=False),
        "os.exec": lambda args: by_patch("runs a program", severe=False),
        "os.fork": lambda args: by_patch("forks", severe=False),
    }

    def arm(trusted_codes: list, test_codes: list, evidence_raisers: dict, kinds: dict) -> None:
        if state["armed"]:
            return
        item_kinds.update(kinds)
        for code in trusted_codes:
            trusted[id(code)] = code
        tests.update(test_codes)
        raisers.update(evidence_raisers)
        guard_codes.update(_nested(install.__code__))
        for code in guard_codes:
            trusted[id(code)] = code
        state["thread"] = ident()
        state["armed"] = True

    sys.addaudithook(hook)
    return arm


def _encode(value: Any) -> str:
    """``value`` (plain values, lists of them) as JSON, without the json module (whose code
    reads builtins the product may have replaced; this module has its own copy)."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int:
        return str(value)
    if type(value) in (list, tuple):
        return "[" + ", ".join(_encode(item) for item in value) + "]"
    text = "".join((value,)) if issubclass(type(value), str) else "?"
    escaped = "".join(c if c not in '"\\' and c >= " " else f"\\u{ord(c):04x}" for c in text)
    return '"' + escaped + '"'


def _normal(path: str, cwd: str) -> str:
    """``path`` made absolute and normalised by string operations alone (no system call the
    product could have replaced)."""
    parts: list[str] = []
    for part in (path if path.startswith("/") else cwd + "/" + path).split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part and part != ".":
            parts.append(part)
    return "/" + "/".join(parts)


def _plain_values(value: Any, plain: tuple) -> bool:
    """Whether ``value`` is built of exact str/int/bool/None values and lists of them."""
    if type(value) in (list, tuple):
        return all(_plain_values(item, plain) for item in value)
    return type(value) in plain


def _nested(code: Any) -> list:
    found, pending = [], [code]
    while pending:
        current = pending.pop()
        found.append(current)
        consts = current.co_consts
        pending.extend(c for c in consts if type(c) is type(current))
    return found


def _same_file_bytes(path: str, source: bytes) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(source) + 1) == source
    except OSError:
        return False
