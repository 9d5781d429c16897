"""The static capability gate: what added code may not reach, however it is spelled, what the
relative rule allows, and the grader refusing such a patch before any test runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sandbox_task import BUGGY, diff_after, make_task

from ac_env.grading import grade
from ac_env.grading.cache import GradeSettings, grade_cached
from ac_env.grading.capabilities import capability_uses
from ac_env.grading.capability_gate import check_patch
from ac_env.sandbox.local import LocalSandbox

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
BASE = b'"""A module."""\n\n\ndef add(a, b):\n    return a - b\n'


def added(code: str) -> bytes:
    """``BASE`` with ``code`` appended inside ``add`` (indented) before its return."""
    body = "".join(f"    {line}\n" for line in code.splitlines())
    return BASE.replace(b"    return a - b\n", body.encode() + b"    return a + b\n")


def refused(code: str, base: bytes = BASE, mode: str = "relative") -> set[str]:
    verdict = check_patch({"pkg/ops.py": (base, added(code))}, mode)  # type: ignore[arg-type]
    return {use.capability for use in verdict.rejected}


# Each capability class, in its plain spelling and in spellings meant to hide it.
CASES = {
    "frames": [
        "import sys\nsys._getframe(1).f_locals",
        "from sys import _getframe as g\ng()",
        "import inspect as i\ni.stack()",
        "import inspect\nx = inspect\nx.currentframe()",
        "try:\n    1 / 0\nexcept Exception as e:\n    e.__traceback__.tb_frame",
        "import traceback\ntraceback.walk_stack(None)",
        "g = (i for i in ())\ng.gi_frame",
        "import logging\nlogging.currentframe()",
        "getattr(f, 'f_back')",
        "import pydoc\npydoc.locate('sys._getframe')",
    ],
    "code-internals": [
        "add.__code__",
        "add.__globals__['x']",
        "getattr(add, '__co' 'de__')",
        "'{0.__init__.__globals__}'.format(a)",
        "object.__subclasses__()",
        "import types\ntypes.CodeType",
        "from types import FunctionType as F\nF(c, {})",
        "__builtins__",
        "import operator\noperator.attrgetter('__closure__')(add)",
    ],
    "gc": [
        "import gc\ngc.get_objects()",
        "from gc import get_referrers",
        "import gc as g\ng.garbage",
        "import gc\nf(gc)",
    ],
    "hooks": [
        "import sys\nsys.settrace(None)",
        "import sys\nsys.addaudithook(print)",
        "import sys\nsys.audit('open', 'x', 'r')",
        "import threading\nthreading.setprofile(None)",
        "import sys\nsys.monitoring.use_tool_id(1, 'x')",
        "import sys\nsys.excepthook = print",
        "breakpoint()",
        "import pdb",
    ],
    "dynamic-code": [
        "exec('x = 1')",
        "eval('1')",
        "compile('1', 'f', 'eval')",
        "__import__(name)",
        "import importlib\nimportlib.import_module(name)",
        "import sys\nsys.modules['gc']",
        "import sys as s\nm = s\nm.meta_path.append(f)",
        "import builtins\nbuiltins.len = f",
        "import runpy\nrunpy.run_path('x.py')",
        "import zipimport",
        "\uff45\uff58\uff45\uff43('x = 1')",  # NFKC: Python reads this as exec
        "run = exec\nrun('x')",
        "f = [exec][0]",
        "from sys import *",
        "len.__self__.exec('x = 1')",
        "__import__('builtins').exec('x = 1')",
        "b = __import__('builtins')\nb.eval('1')",
    ],
    "computed-attribute": [
        "getattr(a, '__co' + 'de__')",
        "getattr(a, name)",
        "setattr(a, name, 1)",
        "vars(a)",
        "globals()",
        "locals()[name]",
        "type(a).__dict__['x']",
        "object.__getattribute__(a, name)",
        "import operator\noperator.attrgetter(name)(a)",
        "g = getattr\ng(a, 'x')",
    ],
    "ctypes": [
        "import ctypes",
        "from ctypes import pythonapi",
        "import _ctypes",
        "__import__('ctypes')",
    ],
    "process": [
        "import subprocess\nsubprocess.run(['true'])",
        "import os\nos.system('true')",
        "from os import execv",
        "import os\nos.fork()",
        "__import__('os').system('true')",
        "import multiprocessing",
        "import pty",
    ],
    "deserialise": [
        "import pickle\npickle.loads(b'')",
        "import marshal",
        "import shelve",
        "import copyreg",
    ],
    "threads-signals-atexit": [
        "import threading\nthreading.Thread(target=f).start()",
        "import _thread\n_thread.start_new_thread(f, ())",
        "import atexit\natexit.register(f)",
        "import signal\nsignal.signal(2, f)",
        "import weakref\nweakref.finalize(a, f)",
        "import weakref\nweakref.ref(a, f)",
        "from concurrent.futures import ThreadPoolExecutor",
    ],
}


@pytest.mark.parametrize(
    "capability, code",
    [(capability, code) for capability, codes in CASES.items() for code in codes],
)
def test_each_capability_is_refused_in_added_code_however_spelled(capability: str, code: str):
    assert capability in refused(code), code


LEGITIMATE = [
    "import sys\nprint(sys.argv, sys.version_info, file=sys.stderr)",
    "import inspect\ninspect.signature(add)",
    "import types\nisinstance(a, types.FunctionType)",
    "getattr(a, 'name', None)\nsetattr(a, 'name', 1)\nhasattr(a, name)",
    "import functools\nfunctools.lru_cache(maxsize=None)(add)",
    "import threading\nlock = threading.Lock()\nwith lock:\n    pass",
    "from importlib.metadata import version\nversion('x')",
    "import importlib\nfor lib in ('json', 'csv'):\n    importlib.import_module(lib)",
    "object.__setattr__(a, 'x', 1)",
    "if 'X' in globals():\n    pass",
    "globals()[name] = 1",
    "'{0.__class__.__name__}({0.x!r})'.format(a)",
    "import os\nos.path.join(os.environ.get('HOME', ''), 'x')",
    "import re\nre.compile('x').match('x')",
    "__import__('time').sleep(0)",
]


@pytest.mark.parametrize("code", LEGITIMATE)
def test_legitimate_fixes_in_allowed_forms_are_not_refused(code: str):
    assert refused(code) == set(), code
    assert refused(code, mode="strict") == set(), code


def test_shadowed_builtins_are_not_the_builtin_but_conditional_or_late_ones_are():
    assert not capability_uses(b"def f(compile):\n    return compile(1)\n")
    assert not capability_uses(b"def exec(s):\n    pass\n\n\ndef g():\n    exec('x')\n")
    late = b"def g():\n    exec('x')\n\n\ndef exec(s):\n    pass\n"  # g runs before the def
    conditional = b"if False:\n    def exec(s): pass\nexec('x')\n"
    default = b"def f(exec=exec):\n    exec('x')\n"  # the default is the builtin
    comprehension = b"def f():\n    [0 for exec in ()]\n    exec('x')\n"
    deleted = b"exec = print\ndel exec\nexec('x')\n"
    for source in (late, conditional, default, comprehension, deleted):
        assert "dynamic-code" in {u.capability for u in capability_uses(source)}, source


def test_a_proxy_forwarding_its_own_name_argument_is_not_computed_access():
    proxy = b"class P:\n    def __getattr__(self, name):\n        return getattr(self._w, name)\n"
    assert not capability_uses(proxy)
    renamed = proxy.replace(b"getattr(self._w, name)", b"getattr(self._w, '_' + name)")
    assert {u.capability for u in capability_uses(renamed)} == {"computed-attribute"}


def test_the_file_is_read_as_python_reads_it():
    """A coding declaration decodes the file before it is parsed; bytes Python cannot
    compile are refused, not skipped."""
    latin = "# -*- coding: latin-1 -*-\nx = 'é'\nexec(x)\n".encode("latin-1")
    assert {u.capability for u in capability_uses(latin)} == {"dynamic-code"}
    assert refused("x = (") == {"unparseable"}
    assert refused("x = 1\x00") == {"unparseable"}


def test_a_file_the_patch_adds_may_use_only_what_the_changed_files_used():
    new = b"import gc\ngc.get_objects()\n"
    verdict = check_patch({"pkg/new.py": (None, new)}, "relative")
    assert [(u.file, u.line, u.capability) for u in verdict.rejected] == [("pkg/new.py", 2, "gc")]
    walker = b"import gc\n\n\ndef walk():\n    return gc.get_referrers(walk)\n"
    moved = {"pkg/new.py": (None, new), "pkg/walk.py": (walker, walker + b"x = 1\n")}
    assert check_patch(moved, "relative").rejected == []  # it could have gone in walk.py
    renamed = check_patch({"pkg/new.py": (None, new)}, "relative", {"pkg/old.py": walker})
    assert renamed.rejected == []  # a module moved to a new file keeps what it used
    assert {u.file for u in check_patch(moved, "strict").rejected} == {"pkg/new.py"}


def test_a_capability_the_base_file_used_is_allowed_and_reported():
    base = BASE + b"\n\ndef caller():\n    import sys\n    return sys._getframe(1)\n"
    patched = added("import sys\nsys._getframe(2)") + base[len(BASE) :]
    verdict = check_patch({"pkg/ops.py": (base, patched)}, "relative")
    assert verdict.rejected == []
    assert [(u.line, u.capability) for u in verdict.allowed] == [(6, "frames")]
    strict = check_patch({"pkg/ops.py": (base, patched)}, "strict")
    assert [(u.line, u.capability) for u in strict.rejected] == [(6, "frames")]
    assert refused("exec('1')", base=base) == {"dynamic-code"}  # another capability: refused
    assert check_patch({"pkg/ops.py": (BASE, added("exec('1')"))}, "off").rejected == []


def test_unchanged_code_whose_meaning_the_patch_changes_is_refused():
    """Deleting the local ``exec`` an unchanged line calls makes that line reach the builtin."""
    base = b"def exec(s):\n    return s\n\n\ndef run(s):\n    return exec(s)\n"
    patched = b"\n\n\n\ndef run(s):\n    return exec(s)\n"
    verdict = check_patch({"pkg/run.py": (base, patched)}, "relative")
    assert [(u.line, u.capability) for u in verdict.rejected] == [(6, "dynamic-code")]


def test_an_unparseable_base_allows_what_it_cannot_show():
    verdict = check_patch({"pkg/x.py": (b"def (:\n", b"exec('1')\n")}, "relative")
    assert verdict.rejected == [] and verdict.allowed[0].capability == "dynamic-code"


# -- the grader ------------------------------------------------------------------------------


def test_a_patch_reading_frames_gets_zero_naming_file_line_and_capability(tmp_path: Path):
    task = make_task(tmp_path)
    assert task.snapshot_dir is not None
    frames = BUGGY.replace(
        "    return a - b", "    import sys\n    sys._getframe(1)\n    return a + b"
    )
    patch = diff_after(task.snapshot_dir, {"calc/ops.py": frames})
    result = grade(task, patch, LocalSandbox(isolation=ISOLATION), 60)
    assert result.reward == 0.0 and result.resolved is False and result.infra_error is None
    assert [(u.file, u.line, u.capability) for u in result.rejected] == [
        ("calc/ops.py", 7, "frames")
    ]
    assert result.tests == {} and "capability gate" in result.reason  # no test ran
    unchecked = grade(task, patch, LocalSandbox(isolation=ISOLATION), 60, capability_gate="off")
    assert unchecked.reward == 1.0 and unchecked.rejected == []


def test_a_cached_grade_is_not_replayed_under_another_gate_mode(tmp_path: Path):
    task = make_task(tmp_path)
    assert task.snapshot_dir is not None
    patch = diff_after(task.snapshot_dir, {"calc/ops.py": BUGGY.replace("a - b", "eval('a + b')")})
    store = str(tmp_path / "store")

    def make() -> LocalSandbox:
        return LocalSandbox(isolation=ISOLATION)

    gated = grade_cached(task, patch, make, 60, store)
    assert gated.reward == 0.0 and gated.rejected
    off = grade_cached(task, patch, make, 60, store, GradeSettings(capability_gate="off"))
    assert off.reward == 1.0 and not off.rejected
