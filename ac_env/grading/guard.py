"""The grader's trust anchor inside the test process: an audit hook (PEP 578) that the trusted
runner (``boot.py``) installs before any code of the repository runs. It cannot be removed, and
it is the only part of the test process whose word the grader takes. Copied into the grading
sandbox beside ``boot.py`` and loaded from its file (stdlib only; never imported by ``ac_env``).

**Trust is identity.** Code is known by the identity of its code object, never by its file
name or line: *trusted* code is what stage 0 loaded before any repository code ran (the
standard library, pytest, pluggy, unittest, the runner); *test* code is what stage 0 compiled
from the test files (and handed to pytest); *imported* code is what the import system itself
compiled from a file of the repository or of the system that nobody wrote during the run.
Everything else (compiled from a string, made by ``exec``, a copy of a test's code, a module
the product wrote) is of unknown origin and counts as the patch's, as do the lines the patch
added to the files it changed (``changed``: file -> added line numbers).

What it does, once armed (``install`` then ``arm``, both at stage 0):

- **Evidence.** The runner's pytest plugin raises ``autocompact.*`` audit events (a test began,
  its function was about to be called, it returned or raised, pytest reported a phase). The
  hook accepts one only when it comes from the main thread, from the exact code object that
  is meant to raise it, called by the code meant to call it, with every frame of the stack
  trusted or test code. Before a test function is called, its code must be the code stage 0
  compiled for *that* test (its file and qualified name, from the node id), and its globals
  the namespace the import system made for its module (each test module runs once).
- **A stream out of the process.** Every accepted fact and every tampering found is written at
  once to a pipe read by the collector (a process forked at stage 0), each line with the
  run's nonce, a sequence number and a MAC under the run's secret. The collector accepts
  exactly one authenticated end, in sequence; any other line is tampering.
- **Nothing the product supplies runs inside the guard.** Every function it uses is bound when
  it is installed; it reads event arguments only after checking their exact built-in type;
  gc is held off while it works, so no finalizer runs inside it; an event raised while it
  works, by anything but its own code, is tampering (re-entry). An event product code raises
  by hand with an interpreter's name gains nothing: the events that grant anything (a test
  module's or an imported module's code executed) count only when raised by the import
  system's own code, by identity.
- **Capabilities.** After arming it refuses, for any code: tracing and profiling hooks of
  untrusted code, new audit hooks, ``ctypes``, extension modules loaded from outside the
  system's directories, opening any process's ``/proc/*/mem``, links to ``/proc`` or the test
  files, reading a traceback frame of this hook, giving a test's or a trusted function other
  code (whoever asks), changing the import system's loaders, and running a test module's code a
  second time. With any code of the patch's (see above) on the stack, in any thread, it
  refuses ``gc``'s object graph and other threads' frames (also to a thread trampoline: a
  stdlib frame that only calls what it was given), and reports as tampering a read of a
  graded test file or of a test's code, and compiling code under another real file's name;
  it flags frame access and process creation.
"""

from __future__ import annotations

import _thread
import gc
import hashlib
import os
import stat
import sys
import types
from typing import Any

_FRAME_ATTRS = ("tb_frame", "gi_frame", "cr_frame", "ag_frame")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_MAX_REASONS = 50
_key = object.__hash__
"""An object's identity (its address, rotated), like ``id`` but without the audit event that
``id`` raises: the guard asks for identities at every event."""


def install(nonce: str, secret: bytes, out: int, repo: str, changed: dict, protected: list) -> Any:
    """Install the hook (permissive until armed) and return its ``arm`` function."""
    write, getframe, ident, stat_path = os.write, sys._getframe, _thread.get_ident, os.stat
    key = _key
    is_regular, mac_of = stat.S_ISREG, hashlib.blake2b
    gc_enabled, gc_disable, gc_enable = gc.isenabled, gc.disable, gc.enable
    lock = _thread.allocate_lock()
    str_type, int_type, bytes_type, tuple_type = str, int, bytes, tuple
    code_type, function_type, method_type = types.CodeType, types.FunctionType, types.MethodType
    module_type, dict_type, type_type, frame_type = types.ModuleType, dict, type, types.FrameType
    frame_holders = (
        types.TracebackType,
        types.GeneratorType,
        types.CoroutineType,
        types.AsyncGeneratorType,
    )
    dict_get = dict.get
    plain = (str, int, bool, type(None))
    inside = repo + os.sep
    places = {"cwd": repo}
    system_dirs = tuple(
        _normal(os.path.realpath(entry), "/") + os.sep
        for entry in sys.path
        if entry
        and os.path.isdir(entry)
        and not os.path.realpath(entry).startswith((inside, "/tmp"))
    )
    protected_files = frozenset(protected)
    changed_lines = {_normal(path, repo): frozenset(lines) for path, lines in changed.items()}
    written: set = set()  # files opened for writing (or renamed, linked) since arming
    state: dict = {"armed": False, "ended": False, "reasons": 0, "ran": False, "seq": 0}
    depths: dict = {}  # thread -> 1 while the guard works in it, 2 while it checks re-entry
    trusted: dict = {}  # key(code) -> code: stage 0's (kept alive, so ids stay unique)
    tests: dict = {}  # key(code) -> code: what stage 0 compiled from the test files
    by_test: dict = {}  # (test file, qualified name) -> ids of the codes stage 0 compiled
    test_modules: dict = {}  # key(module code) -> its test file
    test_files: set = set()  # the files stage 0 compiled as test code
    ran_modules: set = set()  # test files whose module code has run
    imported: dict = {}  # key(code) -> its file: compiled by the import system from a file
    raisers: dict = {}  # evidence kind -> (ids of the codes that raise it, ids of their callers)
    roles: dict = {}  # what stage 0 names by identity (the import system's codes, loaders)
    genuine: dict = {}  # id -> the namespace the import system made for a test module
    item_kinds: dict = {}  # classes of pytest items whose report alone is their outcome
    own_globals = globals()

    def emit(kind: str, payload: Any) -> None:
        body = kind + " " + _encode(payload)
        with lock:
            state["seq"] += 1
            text = str_type(state["seq"]) + " " + body
            mac = mac_of(text.encode("utf-8", "replace"), key=secret, digest_size=16).hexdigest()
            data = (nonce + " " + text + " " + mac + "\n").encode("utf-8", "replace")
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
        if filename.startswith(inside):
            filename = filename[len(inside) :]
        return f"{filename}:{frame.f_lineno}"

    def frames() -> list:
        """The stack below the hook, innermost first."""
        frame: Any = getframe(1)
        found: list = []
        while frame is not None and frame.f_globals is own_globals:
            frame = frame.f_back
        while frame is not None:
            found.append(frame)
            frame = frame.f_back
        return found

    def is_test_code(code: Any) -> bool:
        return key(code) in tests

    def is_trusted(code: Any) -> bool:
        return key(code) in trusted or key(code) in tests

    def is_known(code: Any) -> bool:
        return key(code) in trusted or key(code) in tests or key(code) in imported

    def patch_frame(stack: list) -> Any:
        """The first frame of the patch's: code of unknown origin, code imported from a file
        written during the run, or a line the patch added."""
        for frame in stack:
            code = frame.f_code
            if not is_known(code):
                return frame
            filename = dict_get(imported, key(code))
            if filename is None:
                continue
            if filename in written:
                return frame
            lines = dict_get(changed_lines, filename)
            if lines is not None and frame.f_lineno in lines:
                return frame
        return None

    def by_patch(what: str, severe: bool) -> None:
        frame = patch_frame(frames())
        if frame is not None:
            (tamper if severe else flag)(f"the patch's code at {where(frame)} {what}")

    def deny_to_patch(what: str) -> Exception | None:
        """Refuse ``what`` to the patch's code anywhere on the stack, and to a thread
        trampoline (a stdlib frame that only calls what it was handed, or no frame at all)."""
        stack = frames()
        frame = patch_frame(stack)
        if frame is not None:
            tamper(f"the patch's code at {where(frame)} {what}")
            return PermissionError(f"{what}: denied by the grader")
        if not stack or key(stack[0].f_code) in roles["trampolines"]:
            tamper(f"code handed to a thread {what}")
            return PermissionError(f"{what}: denied by the grader")
        return None

    # -- evidence ----------------------------------------------------------------------------

    def evidence(kind: str, args: tuple) -> None:
        """Check and stream one event of the runner's. Every kind must come from the main
        thread and the code meant to raise it, called as it should be; ``call`` and ``result``
        (a pass needs both) also from a stack of trusted code alone. The others cannot make a
        test pass: a forged report, begin or integrity problem only loses reward."""
        if state["ended"]:
            return
        stack = frames()
        expected, callers = dict_get(raisers, kind, ((), ()))
        raiser = stack[0] if stack else None
        problem = ""
        if ident() != state["thread"]:
            problem = "from another thread"
        elif raiser is None or key(raiser.f_code) not in expected:
            problem = "from code that is not the runner's"
        elif callers and (raiser.f_back is None or key(raiser.f_back.f_code) not in callers):
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
            emit("CALL", [nodeid, verify(function, nodeid)])
        elif kind == "end":
            emit("END", [*args, state["ran"]])
            state["ended"] = True
        elif kind == "integrity":
            for reason in args[0]:
                tamper(reason)
        else:
            emit(kind.upper(), list(args))

    def verify(function: Any, nodeid: str, depth: int = 0) -> str:
        """'' when ``function`` carries the code stage 0 compiled for the test ``nodeid``
        names, with its module's genuine globals, else why not. A decorator's wrapper of the
        standard library's or pytest's (``mock.patch``, ``functools.wraps``) passes when the
        function it wraps (its ``__wrapped__``, which it holds in its closure) does."""
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
            if depth < 8 and key(code) in trusted and any(holds(cell, inner) for cell in cells):
                return verify(inner, nodeid, depth + 1)
            return "its code is not the test file's"
        own = dict_get(by_test, _test_name(nodeid, repo))
        if own is not None and key(code) not in own:
            return f"it runs the code of {code.co_qualname}, not its own"
        if key(function.__globals__) not in genuine:
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
        kind = type(target)
        if name in _FRAME_ATTRS and kind in frame_holders:
            frame = getattr(target, name)  # an exact built-in type: nobody's property runs
            if frame is not None and frame.f_globals is own_globals:
                reader = stranger()
                if reader is not None:
                    tamper(f"a frame of the grader's guard was read by the code at {where(reader)}")
                    return RuntimeError("access denied by the grader")
            by_patch(f"reads a frame ({name})", severe=False)
        elif name == "__code__" and kind is function_type and is_test_code(target.__code__):
            by_patch("reads a test function's code", severe=True)
        elif name == "f_code" and kind is frame_type and is_test_code(target.f_code):
            by_patch("reads a test's code through its frame", severe=True)
        return None

    def on_setattr(args: tuple) -> Exception | None:
        target, name = args[0], args[1]
        if type(name) is not str_type:
            return None
        kind = type(target)
        if kind is function_type and name == "__code__" and is_trusted(target.__code__):
            where_from = stranger() or patch_frame(frames())
            place = f" at {where(where_from)}" if where_from is not None else ""
            tamper(f"a test's or the runner's function was given other code{place}")
            return RuntimeError("denied by the grader")
        if kind is type_type and key(target) in roles["loaders"]:
            tamper(f"the import system's {target.__name__}.{name} was replaced")
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
        filename = "".join((code.co_filename,))
        if not state["ran"] and filename.startswith(inside):
            state["ran"] = True
        if code.co_name != "<module>":
            return None
        stack = frames()
        test_file = dict_get(test_modules, key(code))
        if test_file is not None:
            return test_module_runs(test_file, stack)
        if import_system_compiled(stack) or (
            stack and key(stack[0].f_code) == roles["rewriting_loader"]
        ):
            path = _normal(filename, places["cwd"])
            if path in written or not (path.startswith(inside) or path.startswith(system_dirs)):
                return None
            keep.append(code)
            if path in test_files:  # a test file the import system compiled from its bytes
                for nested in _nested(code):
                    tests[key(nested)] = nested
                    name = (path, nested.co_qualname)
                    by_test[name] = dict_get(by_test, name, frozenset()) | {key(nested)}
                return test_module_runs(path, stack)
            for nested in _nested(code):
                imported[key(nested)] = path
        return None

    keep: list = []  # imported module codes, kept alive so that their ids stay unique

    def test_module_runs(test_file: str, stack: list) -> Exception | None:
        """A test module's code may run once, by the import system (pytest's rewriting
        loader or the standard one); its namespace is then the module's genuine one."""
        raiser = stack[0] if stack else None
        if test_file in ran_modules:
            tamper(f"the code of {test_file[len(inside) :]} was executed a second time")
            return RuntimeError("denied by the grader")
        if raiser is None or key(raiser.f_code) not in roles["module_runners"]:
            tamper(f"the code of {test_file[len(inside) :]} was executed outside the import system")
            return RuntimeError("denied by the grader")
        strangers = [frame for frame in stack if not is_trusted(frame.f_code)]
        if strangers:
            tamper(f"a test module's code was executed by the code at {where(strangers[0])}")
            return RuntimeError("denied by the grader")
        ran_modules.add(test_file)
        for value in raiser.f_locals.values():  # the import system's frame holds the namespace
            if type(value) is tuple_type and len(value) > 1:
                value = value[1]
            elif type(value) is module_type:
                value = value.__dict__
            if type(value) is dict_type:
                genuine[key(value)] = value
        return None

    def import_system_compiled(stack: list) -> bool:
        """Whether the module code being executed is one the standard source loader compiled
        from its file: raised by ``_call_with_frames_removed`` for ``exec_module`` of an exact
        ``SourceFileLoader`` whose methods are its class's (the classes cannot be changed)."""
        if len(stack) < 2 or key(stack[0].f_code) != roles["frames_removed"]:
            return False
        caller = stack[1]
        if key(caller.f_code) != roles["exec_module"]:
            return False
        loader = dict_get(caller.f_locals, "self")
        if type(loader) is not roles["source_loader"]:
            return False
        own = loader.__dict__  # an exact stdlib class that nobody may change: no code of theirs
        return type(own) is dict_type and all(name not in own for name in roles["loader_methods"])

    def on_compile(args: tuple) -> Exception | None:
        filename = args[1] if len(args) > 1 else None
        if type(filename) is not str_type or not is_file(filename):
            return None
        if patch_frame(frames()) is None:
            return None
        source = args[0]
        if type(source) is str_type:
            source = source.encode("utf-8", "surrogateescape")
        if type(source) is bytes_type and _same_file_bytes(filename, source):
            return None
        by_patch(f"compiles code under the name of {filename}", severe=True)
        return None

    def on_code_new(args: tuple) -> Exception | None:
        filename = args[1] if len(args) > 1 else None
        if type(filename) is str_type and is_file(filename):
            by_patch(f"makes code under the name of {filename}", severe=True)
        return None

    def is_file(path: str) -> bool:
        try:
            return is_regular(stat_path(path).st_mode)
        except (OSError, ValueError):
            return False

    def path_text(path: Any) -> str | None:
        """``path`` as an exact str, without running any method of anybody's: only an exact
        str or bytes is read (the interpreter hands the guard those; a path object in an
        event was put there by hand)."""
        kind = type(path)
        if kind is str_type:
            return path
        if kind is bytes_type:
            return path.decode("utf-8", "surrogateescape")
        return None

    def on_open(args: tuple) -> Exception | None:
        path, mode, flags = args
        if type(path) is int_type:
            return None
        text = path_text(path)
        if text is None:
            tamper("an 'open' event with a path that is not a string was raised")
            return PermissionError("denied by the grader")
        plain_path = _normal(text, places["cwd"])  # a link cannot stand in: ``on_link`` watches
        if plain_path.startswith("/proc/") and plain_path.endswith("/mem"):
            tamper(f"{text} was opened")
            return PermissionError("denied by the grader")
        writing = (type(mode) is str_type and any(c in mode for c in "wax+")) or (
            type(flags) is int_type and flags & _WRITE_FLAGS
        )
        if writing:
            written.add(plain_path)
            if plain_path.endswith((".pyc", ".so")):
                return deny(f"writes {plain_path}")
        elif plain_path in protected_files:
            by_patch(f"reads {plain_path[len(inside) :]}", severe=True)
        return None

    def on_link(args: tuple) -> Exception | None:
        """A link to a process's files, a test file or the runner is refused: opening it would
        read what ``on_open`` guards by name. Both ends count as written."""
        texts = [text for text in (path_text(arg) for arg in args[:2]) if text is not None]
        if len(texts) != 2:
            tamper("a link event with a path that is not a string was raised")
            return PermissionError("denied by the grader")
        source, destination = (_normal(text, places["cwd"]) for text in texts)
        written.update((source, destination))
        if source.startswith("/proc/") or source in protected_files:
            tamper(f"a link to {texts[0]} was made")
            return PermissionError("denied by the grader")
        return None

    def on_rename(args: tuple) -> Exception | None:
        for arg in args[:2]:
            text = path_text(arg)
            if text is not None:
                written.add(_normal(text, places["cwd"]))
        return None

    def on_chdir(args: tuple) -> Exception | None:
        text = path_text(args[0]) if args else None
        if text is not None:
            places["cwd"] = _normal(text, places["cwd"])
        return None

    def on_import(args: tuple) -> Exception | None:
        filename = args[1] if len(args) > 1 else None
        if type(filename) is str_type and filename.endswith(".so"):
            real = _normal(filename, places["cwd"])
            if real.startswith(inside) or not real.startswith(system_dirs) or real in written:
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

    def reentered(event: str) -> Exception | None:
        """An event raised while the guard works in this thread: its own reads, or code that
        runs inside it (a signal handler, anything the guard was tricked into calling)."""
        depths[ident()] = 2
        try:
            raiser = getframe(2)
            if raiser is not None and raiser.f_globals is own_globals:
                return None
            tamper(f"the grader's guard was re-entered ({event}) by the code at {where(raiser)}")
            return RuntimeError("re-entering the grader's guard is denied")
        finally:
            depths[ident()] = 1

    def hook(event: str, args: tuple) -> None:
        __tracebackhide__ = True  # pytest leaves the guard out of failure reports
        if not state["armed"]:
            return
        me = ident()
        depth = dict_get(depths, me, 0)
        if depth:
            refusal = reentered(event) if depth == 1 else None
            if refusal is not None:
                raise refusal
            return
        if type(event) is not str_type:
            return
        handler = dict_get(handlers, event)
        if handler is None and event[:7] != "ctypes." and event[:12] != "autocompact.":
            return  # most events: nothing to check
        depths[me] = 1
        collecting = gc_enabled()
        if collecting:
            gc_disable()  # no finalizer of anybody's runs inside the guard
        refusal = None
        try:
            if event[:12] == "autocompact.":
                evidence(event[12:], args if type(args) is tuple_type else ())
            elif event[:7] == "ctypes.":
                by_patch("uses ctypes", severe=True)
                refusal = ImportError("ctypes is denied by the grader")
            elif handler is not None:
                refusal = handler(args if type(args) is tuple_type else ())
        except Exception as error:  # a fault of the guard's must never break the code under test
            flag(f"the grader's guard failed on {event}: {type(error).__name__}: {error}")
        finally:
            if collecting:
                gc_enable()
            depths[me] = 0
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
        "os.rename": on_rename,
        "os.chdir": on_chdir,
        "sys.settrace": lambda args: deny_untrusted("sets a trace function"),
        "sys.setprofile": lambda args: deny_untrusted("sets a profile function"),
        "sys.addaudithook": lambda args: deny("adds an audit hook"),
        "gc.get_objects": lambda args: deny_to_patch("walks gc's objects"),
        "gc.get_referrers": lambda args: deny_to_patch("walks gc's referrers"),
        "gc.get_referents": lambda args: deny_to_patch("walks gc's referents"),
        "sys._current_frames": lambda args: deny_to_patch("reads other threads' frames"),
        "sys._current_exceptions": lambda args: deny_to_patch("reads other threads' errors"),
        "sys._getframe": lambda args: by_patch("reads a frame (sys._getframe)", severe=False),
        "subprocess.Popen": lambda args: by_patch("starts a process", severe=False),
        "os.system": lambda args: by_patch("starts a process", severe=False),
        "os.posix_spawn": lambda args: by_patch("starts a process", severe=False),
        "os.exec": lambda args: by_patch("runs a program", severe=False),
        "os.fork": lambda args: by_patch("forks", severe=False),
    }

    def arm(
        trusted_codes: list,
        test_codes: dict,
        evidence_raisers: dict,
        kinds: dict,
        identities: dict,
    ) -> None:
        """``test_codes``: test file -> {qualified name: [codes]} as stage 0 compiled them
        (plainly and rewritten), with ``<module>`` for each module's own code;
        ``identities``: what the guard recognises by identity (see ``roles``)."""
        if state["armed"]:
            return
        item_kinds.update(kinds)
        for code in trusted_codes:
            trusted[key(code)] = code
        test_files.update(test_codes)
        for test_file, names in test_codes.items():
            for name, codes in names.items():
                for code in codes:
                    for nested in _nested(code):
                        tests[key(nested)] = nested
                    if name == "<module>":
                        test_modules[key(code)] = test_file
                by_test[(test_file, name)] = frozenset(key(code) for code in codes)
        raisers.update(evidence_raisers)
        roles.update(identities)
        for code in _nested(install.__code__):
            trusted[key(code)] = code
        state["thread"] = ident()
        state["armed"] = True

    sys.addaudithook(hook)
    return arm


def _test_name(nodeid: str, repo: str) -> tuple[str, str]:
    """(the test file, the test's qualified name) that a pytest node id names: parameters
    left out, classes joined with dots."""
    path, _, rest = nodeid.partition("::")
    bracket = rest.find("[")
    if bracket >= 0:
        rest = rest[:bracket]
    return _normal(path, repo), ".".join(rest.split("::"))


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
