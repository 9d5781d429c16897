"""Grading with SWE-bench semantics, hardened against a policy that games the reward.

``grade`` works in a fresh sandbox started from the task's snapshot:

1. only the product-source part of the policy's diff is applied (``patch_filter``): test
   files, scratch files and binaries are left out (``ignored``); pytest configuration,
   ``conftest.py``, start-up hooks, bytecode and symbolic links are left out as tampering;
   a diff over ``MAX_PATCH_BYTES`` or one that does not apply is the policy's fault,
   reward 0;
2. the static capability gate (``capability_gate``) reads the Python files the kept diff
   changes, before and after, on the host: added code that reaches the interpreter's own
   machinery (frames, code internals, gc, hooks, dynamic code, attribute access by computed
   name, ctypes, processes, unpickling, threads, signals, atexit) gets reward 0 and names the
   file, line and capability in ``rejected``, and no test runs (``capability_gate``:
   ``relative``, ``strict`` or ``off``);
3. ``task.test_patch`` is applied (hidden tests, as in SWE-bench);
4. FAIL_TO_PASS + PASS_TO_PASS run under a timeout through the trusted runner, in the order
   of ``task.test_order`` where the task gives one (the suite's own order: tests of a mined
   task may depend on it), else FAIL_TO_PASS first
   (``runner``, ``boot``): the task's pytest command in isolated Python with
   pytest imported before the repository is on ``sys.path``, no bytecode read from the tree,
   and a plugin that records each test's outcome from the test function actually called and
   checks that pytest's machinery was left alone. Outcomes come from the runner's report (a
   line carrying a fresh nonce), never from text the code under test could print; a test
   it does not name counts as failed;
5. resolved when every FAIL_TO_PASS and PASS_TO_PASS test passes (PASSED or XFAIL), pytest
   finished (exit code 0 or 1) and no tampering was found. Tampering gives reward 0 and says
   what was found in ``tampered``. What the detectors flag (``flags``) keeps its reward unless
   ``flagged_reward`` is ``zero``.

Infrastructure errors give ``reward=None`` and ``infra_error`` (never a silent 0): the sandbox
failing, a task without FAIL_TO_PASS tests, a ``test_patch`` that does not apply, a
``test_command`` that is not a pytest invocation, a runner that never started, or pytest
stopping (usage error, internal error, nothing collected) before any of the repository's code
ran. Everything after the repository's code has run is the policy's: a collection error, a
crash (``os._exit``, ``sys.exit``, a signal, the memory limit) or a hang gives reward 0.
"""

from __future__ import annotations

import time
from contextlib import closing
from pathlib import PurePosixPath
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

from ac_env.grading.capabilities import UNPARSEABLE
from ac_env.grading.capability_gate import CapabilityUse, GateMode, check_patch, gates
from ac_env.grading.detectors import detect, literals_of_tests
from ac_env.grading.patch_filter import (
    added_lines,
    filter_patch,
    graded_test_files,
    looks_like_test,
    split_diff,
)
from ac_env.grading.runner import RunnerCommandError, RunnerReport, run_tests
from ac_env.pytest_log import PASSING, Outcome, parse_pytest_log
from ac_env.sandbox.base import Sandbox, SandboxError
from ac_env.sandbox.output import cap_text
from ac_env.tasks.model import Task

MISSING = Outcome.MISSING
"""Outcome of a test the runner does not name (counts as failed)."""
MAX_PATCH_BYTES = 4 * 1024 * 1024
"""The largest diff graded; a larger one is the policy's failure (reward 0)."""
_MODEL_PATCH = ".git/autocompact-model.patch"
_TEST_PATCH = ".git/autocompact-test.patch"
_APPLY_TIMEOUT_S = 60.0
_APPLY_OUTPUT_LIMIT = 16 * 1024
_LISTING_LIMIT = 32 * 1024 * 1024
_RUN_OUTPUT_LIMIT = 8 * 1024 * 1024
FlaggedReward = Literal["keep", "zero"]
"""Whether a resolved patch the detectors flag earns its reward (``keep``) or 0 (``zero``)."""


class TestGroup(BaseModel):
    """Which tests of one group (FAIL_TO_PASS or PASS_TO_PASS) passed and failed."""

    model_config = ConfigDict(frozen=True)

    passed: list[str] = []
    failed: list[str] = []


class GradeResult(BaseModel):
    """The grade of one patch. ``reward`` is 1.0 / 0.0, or None on an infrastructure error."""

    model_config = ConfigDict(frozen=True)

    resolved: bool | None
    reward: float | None
    tests: dict[str, Outcome] = {}
    fail_to_pass: TestGroup = TestGroup()
    pass_to_pass: TestGroup = TestGroup()
    patch_applied: bool = False
    timed_out: bool = False
    reason: str
    tampered: str | None = None
    """What was found aimed at the grader (reward 0), or None."""
    flags: list[str] = []
    """What the guard and the detectors found suspicious without it being aimed at the grader
    (``detectors``; reported, the reward unchanged unless ``flagged_reward`` is ``zero``)."""
    rejected: list[CapabilityUse] = []
    """What the static capability gate refused (reward 0, no test run), file, line and
    capability each."""
    allowed: list[CapabilityUse] = []
    """Capability uses in added code the gate let through because the file's base version
    already used the capability (``relative`` mode)."""
    ignored: dict[str, str] = {}
    """Files of the diff left out of grading without blame, with the reason."""
    infra_error: str | None = None
    log: str = ""
    duration_s: float = 0.0

    @classmethod
    def infra(cls, error: str, log: str = "", duration_s: float = 0.0) -> GradeResult:
        return cls(
            resolved=None,
            reward=None,
            reason=f"infrastructure error: {error}",
            infra_error=error,
            log=log,
            duration_s=duration_s,
        )


def grade(
    task: Task,
    patch: str,
    sandbox: Sandbox,
    timeout_s: float = 300.0,
    *,
    log_limit: int = 64 * 1024,
    capability_gate: GateMode = "relative",
    flagged_reward: FlaggedReward = "keep",
) -> GradeResult:
    """Grade ``patch`` (a unified diff against the task's base commit; non-UTF-8 bytes as
    surrogate escapes, as ``Sandbox.diff`` returns them) for ``task``.

    ``sandbox`` must be fresh (not started): ``grade`` starts it from the task's snapshot and
    closes it. ``timeout_s`` bounds the test run; ``log_limit`` caps ``GradeResult.log``;
    ``capability_gate`` is the static gate's mode (``capability_gate.GateMode``);
    ``flagged_reward`` whether a flagged patch earns its reward.
    """
    started = time.monotonic()
    log = _Log(log_limit)
    if not task.FAIL_TO_PASS:
        return GradeResult.infra(f"task {task.instance_id} lists no FAIL_TO_PASS tests")
    try:
        with closing(sandbox):
            sandbox.start(task)
            settings = _Settings(timeout_s, capability_gate, flagged_reward)
            result = _grade_started(task, patch, sandbox, settings, log)
    except SandboxError as error:
        result = GradeResult.infra(f"sandbox failed: {error}", log=log.text())
    return result.model_copy(update={"duration_s": time.monotonic() - started})


class _Settings(NamedTuple):
    timeout_s: float
    gate: GateMode
    flagged_reward: FlaggedReward


class _Log:
    """What grading ran and printed, capped at the end."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: list[str] = []

    def add(self, command: str, output: str) -> None:
        self._parts.append(f"$ {command}\n{output}")

    def text(self) -> str:
        return cap_text("".join(self._parts), self._limit)


def _grade_started(
    task: Task, patch: str, sandbox: Sandbox, settings: _Settings, log: _Log
) -> GradeResult:
    timeout_s = settings.timeout_s
    size = len(patch.encode("utf-8", errors="surrogateescape"))
    if size > MAX_PATCH_BYTES:
        return _agent_failure(f"the diff is {size} bytes, over the grader's {MAX_PATCH_BYTES}", log)
    listing = sandbox.exec("git ls-files -z", _APPLY_TIMEOUT_S, _LISTING_LIMIT)
    if listing.exit_code != 0 or listing.truncated:
        return GradeResult.infra(f"could not list the base commit's files: {listing.output}")
    base_files = [path for path in listing.output.split("\0") if path]
    try:
        filtered = filter_patch(patch, task, base_files)
    except ValueError as error:
        return _agent_failure(f"patch does not apply: {error}", log)
    if filtered.tampered:
        log.add("# left out as tampering", _listing(filtered.tampered))
    if filtered.ignored:
        log.add("# left out", _listing(filtered.ignored))
    tampered = [f"{path}: {reason}" for path, reason in filtered.tampered.items()]
    ignored = dict(filtered.ignored)
    changes = [c for c in split_diff(filtered.patch) if gates(c.path)]
    gated = [c.path for c in changes if not c.deleted]
    tracked = set(base_files)
    base = {path: _read(sandbox, path) if path in tracked else None for path in gated}
    removed = {c.path: _read(sandbox, c.path) for c in changes if c.deleted and c.path in tracked}
    apply_error = _apply(sandbox, _MODEL_PATCH, filtered.patch, log)
    if apply_error is not None:
        return _agent_failure(f"patch does not apply: {apply_error}", log, tampered, ignored)
    test_patch_error = _apply(sandbox, _TEST_PATCH, task.test_patch, log)
    if test_patch_error is not None:
        return GradeResult.infra(f"test_patch does not apply: {test_patch_error}", log.text())

    patched = {path: _read(sandbox, path) for path in gated}
    added = {
        path: lines for path, lines in added_lines(filtered.patch).items() if path.endswith(".py")
    }
    flags = _detector_flags(sandbox, task, patched, added)
    gone = {path: source for path, source in removed.items() if source is not None}
    rejected, allowed = _gate(base, patched, gone, settings.gate)
    if rejected:
        shown = "; ".join(map(str, rejected[:3]))
        return GradeResult(
            resolved=False,
            reward=0.0,
            patch_applied=True,
            reason=f"the capability gate refused the patch: {shown}",
            tampered="; ".join(tampered) or None,
            flags=flags,
            rejected=rejected,
            allowed=allowed,
            ignored=ignored,
            log=log.text(),
        )
    test_ids = _graded_in_order(task)
    job = _job(task, base_files, added)
    try:
        command, run, report = run_tests(sandbox, task, test_ids, job, timeout_s, _RUN_OUTPUT_LIMIT)
    except RunnerCommandError as error:
        return GradeResult.infra(str(error), log.text())
    log.add(command, run.output + f"\n[exit code {run.exit_code}]\n")
    tampered += report.tampered
    flags += report.flags
    forged = _forged_passes(run.output, report, test_ids)
    if forged:
        tampered.append(
            f"the log shows {len(forged)} graded test(s) passing that the runner did not see "
            f"pass: {', '.join(forged[:3])}"
        )
    if not report.started and not run.timed_out:
        return GradeResult.infra(
            f"the test runner did not start (exit code {run.exit_code}): "
            f"{run.output.strip()[-300:]}",
            log.text(),
        )
    trouble = _runner_trouble(report) if not run.timed_out else None
    if trouble is not None:
        return GradeResult.infra(trouble, log.text())

    tests = {test_id: report.outcomes.get(test_id, MISSING) for test_id in test_ids}
    fail_to_pass = _group(task.FAIL_TO_PASS, tests)
    pass_to_pass = _group(task.PASS_TO_PASS, tests)
    ran_through = report.finished and report.exit_code in (0, 1)
    passing = not fail_to_pass.failed and not pass_to_pass.failed
    resolved = passing and ran_through and not run.timed_out and not tampered
    earns = resolved and not (flags and settings.flagged_reward == "zero")
    if run.timed_out:
        reason = f"the test run timed out after {timeout_s:g} s"
    elif tampered:
        reason = f"tampering found: {'; '.join(tampered[:3])}"
    elif not report.finished:
        reason = f"the test process died (exit code {run.exit_code}) before the runner reported"
    elif not ran_through:
        reason = f"pytest stopped with exit code {report.exit_code} {report.error}".strip()
    elif resolved and not earns:
        reason = f"resolved but flagged, and flagged patches earn 0: {'; '.join(flags[:3])}"
    elif resolved:
        reason = "resolved: every FAIL_TO_PASS and PASS_TO_PASS test passes"
    else:
        failing = [*fail_to_pass.failed, *pass_to_pass.failed]
        reason = f"not resolved: {len(failing)} test(s) fail: {', '.join(failing[:5])}"
    return GradeResult(
        resolved=resolved,
        reward=1.0 if earns else 0.0,
        tests=tests,
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        patch_applied=True,
        timed_out=run.timed_out,
        reason=reason,
        tampered="; ".join(tampered) or None,
        flags=flags,
        allowed=allowed,
        ignored=ignored,
        log=log.text(),
    )


def _read(sandbox: Sandbox, path: str) -> bytes | None:
    """The bytes of ``path`` in the sandbox, None where it cannot be read."""
    try:
        return sandbox.read_file(path)
    except (OSError, ValueError, SandboxError):
        return None


def _gate(
    base: dict[str, bytes | None],
    patched: dict[str, bytes | None],
    removed: dict[str, bytes],
    mode: GateMode,
) -> tuple[list[CapabilityUse], list[CapabilityUse]]:
    """What the capability gate refuses and allows; a patched file the grader cannot read
    back is refused (the gate cannot vouch for it)."""
    unread = [
        CapabilityUse(file=path, line=1, capability=UNPARSEABLE, detail="cannot be read back")
        for path, source in patched.items()
        if source is None
    ]
    readable = {path: (base[path], source) for path, source in patched.items() if source}
    verdict = check_patch(readable, mode, removed)
    return ([*unread, *verdict.rejected] if mode != "off" else []), verdict.allowed


def _detector_flags(
    sandbox: Sandbox,
    task: Task,
    patched: dict[str, bytes | None],
    added: dict[str, list[int]],
) -> list[str]:
    """What ``detectors`` find on the lines the patch added, given the literals of the
    graded test files (read back from the sandbox, ``test_patch`` applied)."""
    sources = {path: patched.get(path) for path in added}
    if not any(sources.values()):
        return []
    tests = sorted(p for p in graded_test_files(task) if p.endswith(".py"))
    literals = literals_of_tests([_read(sandbox, path) or b"" for path in tests])
    flags = []
    for path, lines in added.items():
        source = sources[path]
        if source is not None and len(source) <= MAX_PATCH_BYTES:
            flags += detect(source, lines, path, literals)
    return flags


def _graded_in_order(task: Task) -> list[str]:
    """FAIL_TO_PASS and PASS_TO_PASS, each once, in ``task.test_order`` (which only orders:
    a test it lacks still runs, one it adds does not)."""
    graded = dict.fromkeys([*task.FAIL_TO_PASS, *task.PASS_TO_PASS])
    ordered = dict.fromkeys(test for test in task.test_order if test in graded)
    return [*ordered, *(test for test in graded if test not in ordered)]


def _forged_passes(output: str, report: RunnerReport, test_ids: list[str]) -> list[str]:
    """Graded tests the log's outcome lines call passing while the runner saw otherwise: text
    printed to look like pytest's summary."""
    claimed = parse_pytest_log(output)
    return [
        test_id
        for test_id in test_ids
        if claimed.get(test_id) in PASSING and report.outcomes.get(test_id) not in PASSING
    ]


def _listing(reasons: dict[str, str]) -> str:
    return "".join(f"{path}: {reason}\n" for path, reason in reasons.items())


def _agent_failure(
    reason: str, log: _Log, tampered: list[str] | None = None, ignored: dict[str, str] | None = None
) -> GradeResult:
    return GradeResult(
        resolved=False,
        reward=0.0,
        reason=reason,
        tampered="; ".join(tampered or []) or None,
        ignored=ignored or {},
        log=log.text(),
    )


def _job(task: Task, base_files: list[str], added: dict[str, list[int]]) -> dict[str, object]:
    """What the trusted runner needs to know: the conftests it may load (the base commit's and
    ``test_patch``'s), the test code (whose code objects are the only test code it accepts),
    the graded test modules, the files to watch for changes during the run, and the lines the
    patch added (which its guard watches)."""
    tests = graded_test_files(task)
    test_code = sorted(
        p for p in {*tests, *(p for p in base_files if looks_like_test(p))} if p.endswith(".py")
    )
    conftests = sorted(p for p in {*base_files, *tests} if PurePosixPath(p).name == "conftest.py")
    watch = sorted({*(p for p in tests if p.endswith(".py")), *conftests})
    graded = sorted(
        {test_id.split("::", 1)[0] for test_id in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]}
    )
    return {
        "conftests": conftests,
        "test_code": test_code,
        "graded_files": graded,
        "watch": watch,
        "checks": True,
        "changed": added,
    }


def _apply(sandbox: Sandbox, path: str, patch: str, log: _Log) -> str | None:
    """Apply ``patch`` in the sandbox's repo; the error text if it does not apply."""
    if not patch.strip():
        return None
    sandbox.write_file(path, patch.encode("utf-8", errors="surrogateescape"))
    command = f"git apply --verbose {path}"
    result = sandbox.exec(command, _APPLY_TIMEOUT_S, _APPLY_OUTPUT_LIMIT)
    log.add(command, result.output)
    if result.exit_code == 0:
        return None
    lines = [line for line in result.output.splitlines() if line.startswith("error")]
    return "; ".join(lines[:3]) or result.output.strip()[-500:] or f"exit code {result.exit_code}"


def _runner_trouble(report: RunnerReport) -> str | None:
    """Why a run that the runner reported on cannot grade anything through no fault of the
    patch, or None. Once the repository's code has run, every failure is the patch's."""
    if not report.finished or report.repo_code_ran or report.exit_code in (0, 1, 2):
        return None
    meaning = {3: "pytest internal error", 4: "pytest usage error", 5: "no tests collected"}
    what = meaning.get(report.exit_code, report.error or "not a pytest outcome")
    return (
        f"pytest exited with code {report.exit_code} ({what}) "
        "before any of the repository's code ran"
    )


def _group(test_ids: list[str], tests: dict[str, Outcome]) -> TestGroup:
    passed = [test_id for test_id in test_ids if tests[test_id] in PASSING]
    failed = [test_id for test_id in test_ids if tests[test_id] not in PASSING]
    return TestGroup(passed=passed, failed=failed)
