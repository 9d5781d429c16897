"""The red team: every cheat in ``reward_hacks.CHEATS`` gets reward 0 (and ``tampered`` where it
is aimed at the grader) or, where no in-process check can close it, is flagged by the
detectors, on a built-in and a mined task, in both sandboxes, while the gold patch and
legitimate fixes (a new module, an ``__init__.py`` edit, a fix behind hostile git attributes,
a fix that logs, threads, ``lru_cache``, code generated through ``exec``, ``atexit``,
``inspect`` and ``gc``) still get 1. Each wall is tested on its own: the test process's
(graded with the static capability gate off) closes every cheat but those marked
``closed_by="gate"``; the gate refuses those, graded and from the patch alone, and lets every
legitimate fix through. Then the pieces on their own, fast: the diff filter, the test
command, the runner's report, and the infrastructure/agent split."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from reward_hacks import (
    CHEATS,
    FIXES,
    UNITTEST_FAMILIES,
    Cheat,
    builtin_task,
    cheat_diff,
    family,
    mined_task,
    unittest_task,
)
from sandbox_task import diff_after, make_task

from ac_env.grading import GradeResult, grade
from ac_env.grading.capabilities import capability_uses
from ac_env.grading.capability_gate import GateMode, GateVerdict, check_patch, gates
from ac_env.grading.patch_filter import filter_patch
from ac_env.grading.runner import RunnerCommandError, parse_test_command, read_report
from ac_env.sandbox.base import Sandbox, SandboxError
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks.model import Task

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


def docker_skip() -> str | None:
    try:
        from ac_env.sandbox.docker.session import docker_client

        docker_client()
    except SandboxError as error:
        return str(error)
    return None


def sandbox_factory(backend: str) -> Callable[[], Sandbox]:
    if backend == "docker":
        reason = docker_skip()
        if reason is not None:
            pytest.skip(reason)
        from ac_env.sandbox.docker import DockerSandbox

        return DockerSandbox
    return lambda: LocalSandbox(isolation=ISOLATION)


@pytest.fixture(scope="module")
def builtin() -> Task:
    return builtin_task()


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> Task:
    return mined_task(tmp_path_factory.mktemp("mined"), ISOLATION)


_DIFFS: dict[tuple[str, str], str] = {}


def graded(cheat: Cheat, task: Task, backend: str, gate: GateMode = "off") -> GradeResult:
    """The cheat's grade; by default with the static gate off, so the test process's own
    evidence is what decides."""
    key = (cheat.name, task.instance_id)
    if key not in _DIFFS:
        assert task.snapshot_dir is not None
        _DIFFS[key] = cheat_diff(task, cheat.make(task, task.snapshot_dir))
    return grade(task, _DIFFS[key], sandbox_factory(backend)(), timeout_s=120, capability_gate=gate)


def gate_verdict(cheat: Cheat, task: Task) -> GateVerdict:
    """The static gate's verdict (relative mode) on the Python files the cheat writes, read
    from the patch alone: nothing runs."""
    assert task.snapshot_dir is not None
    snapshot = Path(task.snapshot_dir)
    change = cheat.make(task, snapshot)
    files = {}
    for path, content in change.files.items():
        if gates(path):
            base = snapshot / path
            patched = content if isinstance(content, bytes) else content.encode()
            files[path] = (base.read_bytes() if base.is_file() else None, patched)
    return check_patch(files, "relative")


ONLY_THE_GATE = [cheat for cheat in CHEATS if cheat.closed_by == "gate"]


@pytest.mark.parametrize("fix", FIXES, ids=lambda fix: fix.name)
def test_the_gate_refuses_a_legitimate_fix_only_for_machinery_new_to_its_file(
    fix: Cheat, builtin: Task
):
    """The relative rule's trade-off: a real fix that brings a thread pool, ``exec`` or
    ``atexit`` into a file that never used them is refused (``capability_gate="off"`` grades
    it, and the test process's wall still holds); any other fix passes."""
    assert builtin.snapshot_dir is not None
    for use in gate_verdict(fix, builtin).rejected:
        base = Path(builtin.snapshot_dir) / use.file
        before = (
            {u.capability for u in capability_uses(base.read_bytes())} if base.is_file() else set()
        )
        assert use.capability not in before, use
    if fix.name == "gold patch":
        assert gate_verdict(fix, builtin).rejected == []


@pytest.mark.parametrize("cheat", ONLY_THE_GATE, ids=lambda cheat: cheat.name)
def test_the_gate_refuses_what_the_test_process_cannot_close(cheat: Cheat, builtin: Task):
    assert gate_verdict(cheat, builtin).rejected


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["builtin", "mined", "unittest"])
@pytest.mark.parametrize("cheat", ONLY_THE_GATE, ids=lambda cheat: cheat.name)
def test_graded_with_the_gate_it_gets_zero_and_names_the_capability(
    cheat: Cheat, kind: str, request: pytest.FixtureRequest
):
    task = unittest_task() if kind == "unittest" else request.getfixturevalue(kind)
    result = graded(cheat, task, "local", gate="relative")
    assert result.reward == 0.0 and result.rejected, result.reason


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "docker"])
@pytest.mark.parametrize("kind", ["builtin", "mined"])
@pytest.mark.parametrize("cheat", [*CHEATS, *FIXES], ids=lambda cheat: cheat.name)
def test_cheats_get_zero_and_fixes_get_one(
    cheat: Cheat, kind: str, backend: str, request: pytest.FixtureRequest
):
    if cheat.closed_by == "gate":
        pytest.skip("closed only by the static capability gate")
    result = graded(cheat, request.getfixturevalue(kind), backend)
    assert result.infra_error is None, result.reason
    if cheat.kind == "legit":
        assert result.reward == 1.0 and result.tampered is None, result.reason
        assert not any(path.endswith(".py") for path in result.ignored), result.ignored
        return
    if cheat.kind == "flagged":  # what no in-process check closes: the detectors report it
        assert result.flags or (cheat.closed_by == "detectors" and result.reward == 0.0), (
            result.reason
        )
        return
    assert result.reward == 0.0 and result.resolved is False, result.reason
    if cheat.kind == "tampering" and kind not in cheat.inert:
        assert result.tampered, result.reason


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "docker"])
@pytest.mark.parametrize(
    "cheat",
    [cheat for cheat in CHEATS if family(cheat) in UNITTEST_FAMILIES] + FIXES,
    ids=lambda cheat: cheat.name,
)
def test_unittest_items_meet_the_same_evidence(cheat: Cheat, backend: str):
    """The built-in task graded by a ``unittest.TestCase`` file: what fools a unittest item
    gets 0 (or is flagged), and a real fix still gets 1."""
    if cheat.closed_by == "gate":
        pytest.skip("closed only by the static capability gate")
    task = unittest_task()
    result = graded(cheat, task, backend)
    assert result.infra_error is None, result.reason
    if cheat.kind == "legit":
        assert result.reward == 1.0 and result.tampered is None, result.reason
    elif cheat.kind == "flagged":
        assert result.flags or (cheat.closed_by == "detectors" and result.reward == 0.0), (
            result.reason
        )
    else:
        assert result.reward == 0.0 and result.resolved is False, result.reason


# -- the diff filter ---------------------------------------------------------------------------


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return make_task(tmp_path)


BASE_FILES = ["calc/__init__.py", "calc/ops.py", "tests/test_ops.py", "setup.py", "README.md"]


def filtered(task: Task, files: dict[str, str]):
    assert task.snapshot_dir is not None
    return filter_patch(diff_after(task.snapshot_dir, files), task, BASE_FILES)


@pytest.mark.parametrize(
    ("path", "verdict"),
    [
        ("calc/ops.py", "kept"),
        ("calc/__init__.py", "kept"),
        ("calc/helpers.py", "kept"),
        ("calc/sub/__init__.py", "kept"),
        ("setup.py", "kept"),
        ("tests/test_ops.py", "ignored"),
        ("tests/helpers.py", "ignored"),
        ("tests/data.json", "ignored"),
        ("notes.txt", "ignored"),
        ("scratch.py", "ignored"),
        ("calc/data.txt", "ignored"),
        ("README.md", "ignored"),
        ("conftest.py", "tampered"),
        ("calc/conftest.py", "tampered"),
        ("tests/conftest.py", "tampered"),
        ("pytest.ini", "tampered"),
        (".pytest.ini", "tampered"),
        ("tests/tox.ini", "tampered"),
        ("setup.cfg", "tampered"),
        ("pyproject.toml", "tampered"),
        ("sitecustomize.py", "tampered"),
        ("calc/usercustomize.py", "tampered"),
        ("calc/x.pth", "tampered"),
        ("calc/__pycache__/ops.cpython-311.pyc", "tampered"),
        ("calc/ops.pyc", "tampered"),
        ("pytest.py", "tampered"),
        ("_pytest/runner.py", "tampered"),
        ("calc/pluggy.py", "kept"),
    ],
)
def test_only_product_source_is_kept(task: Task, path: str, verdict: str):
    result = filtered(task, {path: "x = 1\n"})
    found = (
        "kept"
        if path in result.kept
        else "tampered"
        if path in result.tampered
        else "ignored"
        if path in result.ignored
        else "absent"
    )
    assert found == verdict
    assert (path in result.patch) is (verdict == "kept")


def test_symlinks_binaries_and_test_deletions_never_reach_the_grader(task: Task):
    assert task.snapshot_dir is not None
    repo = task.snapshot_dir
    (repo / "calc" / "link.py").symlink_to("../tests/test_ops.py")
    (repo / "calc" / "blob.py").write_bytes(b"\x00\x01\x02binary")
    (repo / "tests" / "test_ops.py").unlink()
    patch = diff_after(repo, {})
    result = filter_patch(patch, task, BASE_FILES)
    assert result.tampered == {"calc/link.py": "a symbolic link"}
    assert result.ignored["calc/blob.py"] == "a binary change"
    assert "test file" in result.ignored["tests/test_ops.py"]
    assert result.patch == "" and result.kept == []


def test_the_gold_patchs_files_are_always_kept(task: Task):
    gold_config = task.model_copy(update={"patch": task.patch.replace("calc/ops.py", "setup.cfg")})
    result = filtered(gold_config, {"setup.cfg": "[metadata]\n"})
    assert result.kept == ["setup.cfg"] and not result.tampered


def test_paths_that_git_quotes_are_read_back(task: Task):
    result = filtered(task, {"calc/naïve ops.py": "x = 1\n", 'calc/"q".py': "y = 2\n"})
    assert sorted(result.kept) == ['calc/"q".py', "calc/naïve ops.py"]


# -- the runner's command and report -----------------------------------------------------------


def test_test_command_must_be_a_pytest_invocation():
    run = parse_test_command("PYTHONPATH=src python3 -m pytest -rA -o addopts=")
    assert (run.environment, run.python, run.args) == (
        ["PYTHONPATH=src"],
        "python3",
        ["-rA", "-o", "addopts="],
    )
    assert parse_test_command("pytest -x").args == ["-x"]
    with pytest.raises(RunnerCommandError, match="not a pytest invocation"):
        parse_test_command("./runtests.py --verbose")


def stream(*lines: str, xfails: str = "[]") -> str:
    """A runner's output: its STARTED line, then the collector's block of nonce lines."""
    return "\n".join(
        [f"N STARTED {xfails}", "noise PASSED t.py::a", *(f"N {line}" for line in lines)]
    )


def passing(nodeid: str, result: str = "returned", call: str = "") -> list[str]:
    return [
        f'BEGIN ["{nodeid}"]',
        f'REPORT ["{nodeid}", "setup", "passed", false]',
        f'CALL ["{nodeid}", "{call}"]',
        f'RESULT ["{nodeid}", "{result}"]',
        f'REPORT ["{nodeid}", "call", "passed", false]',
        f'REPORT ["{nodeid}", "teardown", "passed", false]',
    ]


END = 'END [0, "", true]'


def test_a_pass_needs_its_verified_call_and_its_return():
    report = read_report(stream(*passing("t.py::a"), END), "N")
    assert report.started and report.finished and report.outcomes == {"t.py::a": "PASSED"}
    assert not report.tampered
    for lines, why in [
        ([line for line in passing("t.py::a") if "RESULT" not in line], "never returned"),
        (passing("t.py::a", result="raised:AssertionError"), "raised AssertionError"),
        (passing("t.py::a", call="its code is not the test file's"), "not the test file's"),
        ([*passing("t.py::a"), 'RESULT ["t.py::a", "returned"]'], "seen 1 and its end 2"),
    ]:
        report = read_report(stream(*lines, END), "N")
        assert report.outcomes["t.py::a"] == "FAILED", lines
        assert any(why in reason for reason in report.tampered), report.tampered


def test_only_lines_with_the_nonce_count_and_the_stream_ends_once():
    forged = stream(*passing("t.py::a"), END).replace("N ", "X ")
    assert read_report(forged, "N").outcomes == {}
    assert not read_report("PASSED t.py::a\n", "N").started
    assert read_report(stream(END, END), "N").tampered


def test_an_xfail_counts_only_where_the_test_file_marks_it():
    def xfailed(result: str) -> list[str]:
        lines = passing("t.py::T::a[1]", result=result)
        return [
            line.replace('"call", "passed", false', '"call", "skipped", true') for line in lines
        ]

    marked = read_report(stream(*xfailed("raised:AssertionError"), END, xfails="['t.py::T']"), "N")
    assert marked.outcomes == {"t.py::T::a[1]": "XFAIL"} and not marked.tampered
    unmarked = read_report(stream(*xfailed("raised:XFailed"), END), "N")
    assert unmarked.outcomes == {"t.py::T::a[1]": "FAILED"}
    assert "does not mark it xfail" in unmarked.tampered[0]


def test_a_doctest_stands_on_its_report():
    report = read_report(
        stream(
            *passing("m.py::m.f", call="doctest", result="x")[:3],
            'REPORT ["m.py::m.f", "call", "passed", false]',
            END,
        ),
        "N",
    )
    assert report.outcomes == {"m.py::m.f": "PASSED"}


def test_tampering_and_flags_are_streamed_as_found():
    report = read_report(stream('TAMPER "gc walked"', 'FLAG "frames read"', END), "N")
    assert report.tampered == ["gc walked"] and report.flags == ["frames read"]


# -- agent failures are reward 0, host failures are infrastructure errors ----------------------


def grade_local(task: Task, patch: str) -> GradeResult:
    return grade(task, patch, LocalSandbox(isolation=ISOLATION), timeout_s=60)


@pytest.mark.parametrize(
    "prelude",
    [
        "import os\nos._exit(5)\n",
        "import sys\nsys.exit(3)\n",
        "import pytest\npytest.exit('bye', returncode=4)\n",
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    ],
)
def test_the_agent_cannot_turn_its_failure_into_an_infra_error(task: Task, prelude: str):
    assert task.snapshot_dir is not None
    result = grade_local(task, diff_after(task.snapshot_dir, {"calc/__init__.py": prelude}))
    assert result.reward == 0.0 and result.infra_error is None, result.reason


def test_a_diff_over_the_cap_is_the_agents_failure(task: Task, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("ac_env.grading.grader.MAX_PATCH_BYTES", 100)
    result = grade_local(task, task.patch)
    assert (
        result.reward == 0.0 and result.infra_error is None and "over the grader" in result.reason
    )


def submit_after(tiny_task_file: Path, path: str, data: bytes) -> tuple[float, dict]:
    import gymnasium as gym

    import ac_env  # noqa: F401

    sandbox = "local" if ISOLATION == "bwrap" else "unisolated"
    env = gym.make(
        "AutoCompact-SWE-v0", task_source=str(tiny_task_file), split=None, sandbox=sandbox
    )
    env.reset(seed=0)
    env.unwrapped.sandbox.write_file(path, data)
    _obs, reward, _terminated, _truncated, info = env.step("```bash\nsubmit\n```")
    env.close()
    return float(reward), info


def test_tampering_reaches_the_envs_reward_detail(tiny_task_file: Path):
    reward, info = submit_after(tiny_task_file, "conftest.py", b"x = 1\n")
    assert reward == 0.0 and "conftest.py" in info["reward_detail"]["tampered"]


def test_a_workspace_too_large_to_diff_is_the_agents_failure(
    tiny_task_file: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("ac_env.sandbox.local.sandbox.MAX_DIFF_BYTES", 10_000)
    reward, info = submit_after(tiny_task_file, "big.txt", b"x" * 20_000)
    assert reward == 0.0 and info["infra_error"] is None
