"""The guard and the collector on their own, fast: each check runs a small script in a fresh
interpreter (an audit hook cannot be removed), with the guard installed and armed as stage 0
would, and reads back what reached the collector. The red team (``test_reward_hacking``)
plays the same classes through whole grading runs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

GRADING = Path(__file__).resolve().parents[1] / "ac_env" / "grading"

# The script's prelude: a collector forked, the guard installed and armed with every function
# alive as trusted code (stage 0's rule) and one test file's code, then ``BODY``, then the end.
PRELUDE = """
import importlib.util, os, sys, types
sys.path.insert(0, {grading!r})
import boot
nonce, secret = "N" * 32, b"k" * 32
collector, stream = boot._fork_collector(nonce, secret)
spec = importlib.util.spec_from_file_location("autocompact_guard", {grading!r} + "/guard.py")
guard = importlib.util.module_from_spec(spec)
spec.loader.exec_module(guard)
repo = os.getcwd()
arm = guard.install(nonce, secret, stream, repo, {{}}, [repo + "/test_x.py"])
TEST = "def test_passes():\\n    pass\\n\\ndef test_fails():\\n    assert False\\n"
with open("test_x.py", "w") as handle:
    handle.write(TEST)
module_code = compile(TEST, repo + "/test_x.py", "exec")
names = {{}}
for code in boot._nested_codes(module_code):
    names.setdefault(code.co_qualname, []).append(code)
raisers = {{"end": ({{boot._key(sys._getframe().f_code)}}, set())}}
arm(boot._loaded_codes(), {{repo + "/test_x.py": names}}, raisers, {{}}, boot._identities())
"""
END = """
sys.audit("autocompact.end", 0, "")
os.close(stream)
os.waitpid(collector, 0)
"""


def guarded(tmp_path: Path, body: str) -> tuple[list[str], str]:
    """(the tampering and flags the collector printed, the script's other output)."""
    script = PRELUDE.format(grading=str(GRADING)) + textwrap.dedent(body) + END
    run = subprocess.run(
        [sys.executable, "-I", "-c", script], cwd=tmp_path, capture_output=True, text=True
    )
    found, other = [], []
    for line in run.stdout.splitlines():
        if line.startswith("N" * 32 + " "):
            kind, _, payload = line[33:].partition(" ")
            if kind in ("TAMPER", "FLAG"):
                found.append(f"{kind} {json.loads(payload)}")
        elif line.strip():
            other.append(line)
    assert run.returncode == 0, run.stderr[-2000:]
    return found, "\n".join(other) + run.stderr


def test_the_guard_never_calls_what_the_product_can_swap(tmp_path: Path):
    found, output = guarded(
        tmp_path,
        """
        import pathlib
        calls = []
        os.path.relpath = os.path.isfile = lambda *a: calls.append(a) or "x"
        pathlib.PurePath.__fspath__ = lambda self: calls.append(self) or "x"
        code = compile("import sys\\nsys._getframe()", "<generated>", "exec")
        exec(code, {})  # flagged: the guard names the place without os.path.relpath
        sys.audit("compile", b"", "/etc/hostname")  # named like the interpreter's
        try:
            sys.audit("open", pathlib.PurePosixPath("test_x.py"), "r", 0)
        except PermissionError:
            print("refused")
        print("calls", len(calls))
        """,
    )
    assert "calls 0" in output and "refused" in output, output
    assert any("not a string" in reason for reason in found), found


def test_code_of_unknown_origin_in_a_thread_is_the_patchs(tmp_path: Path):
    found, output = guarded(
        tmp_path,
        """
        import threading
        source = (
            "def run(box):\\n"
            "    import gc\\n"
            "    try:\\n        gc.get_objects()\\n    except PermissionError:\\n"
            "        box.append('gc refused')\\n"
            "    try:\\n        open('test_x.py').read()\\n    except OSError:\\n        pass\\n"
        )
        generated = {}
        exec(compile(source, "<generated>", "exec"), generated)
        box = []
        thread = threading.Thread(target=generated["run"], args=(box,))
        thread.start()
        thread.join()
        referrers = map(__import__("gc").get_referrers, [box])
        trampoline = threading.Thread(target=box.extend, args=(referrers,))
        trampoline.start()
        trampoline.join()
        print(box[0], len(box))
        """,
    )
    assert "gc refused 1" in output, output
    assert any("<generated>:4 walks gc" in reason for reason in found), found
    assert any("reads test_x.py" in reason for reason in found), found
    assert any("code handed to a thread walks gc's referrers" in r for r in found), found


def test_a_test_modules_code_runs_only_through_the_import_system(tmp_path: Path):
    found, output = guarded(
        tmp_path,
        """
        namespace = {}
        try:  # not by the import system
            exec(module_code, namespace)
        except RuntimeError:
            print("refused")
        print("executed", "test_passes" in namespace)
        """,
    )
    assert "refused" in output and "executed False" in output, output
    assert any("outside the import system" in reason for reason in found), found


def test_giving_a_test_function_other_code_is_refused_whoever_asks(tmp_path: Path):
    found, output = guarded(
        tmp_path,
        """
        import threading
        funcs = {}
        for code in boot._nested_codes(module_code):
            if code.co_name.startswith("test_"):
                funcs[code.co_name] = types.FunctionType(code, {})
        thread = threading.Thread(
            target=setattr, args=(funcs["test_fails"], "__code__", funcs["test_passes"].__code__)
        )
        thread.start()
        thread.join()
        print("swapped", funcs["test_fails"].__code__ is funcs["test_passes"].__code__)
        """,
    )
    assert "swapped False" in output, output
    assert any("given other code" in reason for reason in found), found


def test_the_collector_takes_one_authenticated_end(tmp_path: Path):
    script = f"""
import os, sys
sys.path.insert(0, {str(GRADING)!r})
import boot
nonce, secret = "N" * 32, b"k" * 32
collector, stream = boot._fork_collector(nonce, secret)
os.write(stream, f'{{nonce}} 1 END [0, "", true] 0000\\n'.encode())  # no MAC: not an end
import hashlib
def line(seq, body):
    text = f"{{seq}} {{body}}"
    mac = hashlib.blake2b(text.encode(), key=secret, digest_size=16).hexdigest()
    return f"{{nonce}} {{text}} {{mac}}\\n".encode()
os.write(stream, line(1, 'BEGIN ["t"]') + line(3, 'BEGIN ["u"]') + line(2, 'END [0, "", true]'))
os.close(stream)
os.waitpid(collector, 0)
"""
    run = subprocess.run(
        [sys.executable, "-I", "-c", script], cwd=tmp_path, capture_output=True, text=True
    )
    lines = [line[33:] for line in run.stdout.splitlines() if line.startswith("N" * 32)]
    assert lines[:2] == ['BEGIN ["t"]', 'END [0, "", true]'], run.stdout + run.stderr
    assert "2 line(s) in the runner's stream were forged or out of sequence" in lines[-1]


@pytest.mark.parametrize(
    ("nodeid", "expected"),
    [
        ("tests/test_a.py::test_b", ("/repo/tests/test_a.py", "test_b")),
        ("tests/test_a.py::T::test_b[1-x::y]", ("/repo/tests/test_a.py", "T.test_b")),
        ("./t.py::A::B::test", ("/repo/t.py", "A.B.test")),
    ],
)
def test_a_node_id_names_its_file_and_qualified_name(nodeid: str, expected: tuple[str, str]):
    sys.path.insert(0, str(GRADING))
    try:
        import guard
    finally:
        sys.path.remove(str(GRADING))
    assert guard._test_name(nodeid, "/repo") == expected
