"""Grading with SWE-bench semantics: apply the patch to a clean copy, run the tests, resolve.

``grade`` works in a fresh sandbox started from the task's snapshot:

1. the policy's patch is applied with ``git apply``, leaving out every change to the task's
   test files and to any ``conftest.py`` (the tests judge the patch; the patch may not change
   them). A patch that does not apply is the policy's fault: not resolved, reward 0;
2. ``task.test_patch`` is applied (hidden tests, as in SWE-bench);
3. ``task.test_command`` runs FAIL_TO_PASS + PASS_TO_PASS under a timeout; the ``-rA`` log gives
   each test's outcome (``ac_env.test_log``); a test the log does not name counts as failed;
4. resolved when every FAIL_TO_PASS and PASS_TO_PASS test passes (PASSED or XFAIL).

Infrastructure errors give ``reward=None`` and ``infra_error`` (never a silent 0): the sandbox
failing, a task without FAIL_TO_PASS tests, a ``test_patch`` that does not apply, a test run
that exits with a code pytest reserves for its own trouble (3 internal error, 4 usage error
other than test ids not found, 5 no tests collected; anything but 0, 1, 2, 4, e.g. 127 command
not found), or a log naming no test at all with exit code 0 or 1 (the runner never reported).
The policy's own failures stay reward 0: a patch that breaks imports (collection errors give
exit code 2, or 4 with "not found" for the ids of a module that no longer imports; the task's
validation proves its ids exist), or that crashes or hangs the tests (``timed_out``). A test
process that dies mid-run (``os._exit``, a signal, the memory limit) has started pytest's
session and never printed its closing line: that crash is the patch's, reward 0, as SWE-bench's
harness grades it (``tests/test_grading_parity.py`` checks the verdicts agree).
"""

from __future__ import annotations

import re
import shlex
import time
from contextlib import closing

from pydantic import BaseModel, ConfigDict

from ac_env.sandbox.base import Sandbox, SandboxError
from ac_env.sandbox.output import cap_text
from ac_env.tasks.model import Task
from ac_env.test_log import PASSING, parse_pytest_log

MISSING = "MISSING"
"""Outcome of a test the log does not name (counts as failed)."""
PROTECTED_PATTERNS = ("conftest.py", "*/conftest.py")
"""Paths (git wildmatch) the policy's patch may never change, besides ``task.test_files``."""
_PYTEST_NOT_FOUND = "ERROR: not found:"
_SESSION_START = re.compile(r"^=+ test session starts =+$", re.MULTILINE)
_SESSION_END = re.compile(r"^=+ .*\bin \d+(?:\.\d+)?s\b.* =+$", re.MULTILINE)
_PYTEST_TROUBLE = (3, 4, 5)
_MODEL_PATCH = ".git/autocompact-model.patch"
_TEST_PATCH = ".git/autocompact-test.patch"
_APPLY_TIMEOUT_S = 60.0
_APPLY_OUTPUT_LIMIT = 16 * 1024
_RUN_OUTPUT_LIMIT = 8 * 1024 * 1024


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
    tests: dict[str, str] = {}
    fail_to_pass: TestGroup = TestGroup()
    pass_to_pass: TestGroup = TestGroup()
    patch_applied: bool = False
    timed_out: bool = False
    reason: str
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
) -> GradeResult:
    """Grade ``patch`` (a unified diff against the task's base commit; non-UTF-8 bytes as
    surrogate escapes, as ``Sandbox.diff`` returns them) for ``task``.

    ``sandbox`` must be fresh (not started): ``grade`` starts it from the task's snapshot and
    closes it. ``timeout_s`` bounds the test run; ``log_limit`` caps ``GradeResult.log``.
    """
    started = time.monotonic()
    log = _Log(log_limit)
    if not task.FAIL_TO_PASS:
        return GradeResult.infra(f"task {task.instance_id} lists no FAIL_TO_PASS tests")
    try:
        with closing(sandbox):
            sandbox.start(task)
            result = _grade_started(task, patch, sandbox, timeout_s, log)
    except SandboxError as error:
        result = GradeResult.infra(f"sandbox failed: {error}", log=log.text())
    return result.model_copy(update={"duration_s": time.monotonic() - started})


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
    task: Task, patch: str, sandbox: Sandbox, timeout_s: float, log: _Log
) -> GradeResult:
    excludes = [*(_wildmatch_escape(path) for path in task.test_files), *PROTECTED_PATTERNS]
    apply_error = _apply(sandbox, _MODEL_PATCH, patch, excludes, log)
    if apply_error is not None:
        return GradeResult(
            resolved=False,
            reward=0.0,
            reason=f"patch does not apply: {apply_error}",
            log=log.text(),
        )
    test_patch_error = _apply(sandbox, _TEST_PATCH, task.test_patch, [], log)
    if test_patch_error is not None:
        return GradeResult.infra(f"test_patch does not apply: {test_patch_error}", log.text())

    test_ids = list(dict.fromkeys([*task.FAIL_TO_PASS, *task.PASS_TO_PASS]))
    command = f"{task.test_command} {shlex.join(test_ids)}"
    run = sandbox.exec(command, timeout_s, _RUN_OUTPUT_LIMIT)
    log.add(command, run.output + f"\n[exit code {run.exit_code}]\n")
    outcomes = parse_pytest_log(run.output)
    crashed = not run.timed_out and _crashed(run.exit_code, run.output)
    if not run.timed_out and not crashed:
        trouble = _runner_trouble(run.exit_code, run.output, bool(outcomes))
        if trouble is not None:
            return GradeResult.infra(trouble, log.text())

    tests = {test_id: str(outcomes.get(test_id, MISSING)) for test_id in test_ids}
    fail_to_pass = _group(task.FAIL_TO_PASS, tests)
    pass_to_pass = _group(task.PASS_TO_PASS, tests)
    # A crashed run is never resolved, whatever "PASSED" lines its code printed before dying.
    resolved = not fail_to_pass.failed and not pass_to_pass.failed and not crashed
    if run.timed_out:
        reason = f"the test run timed out after {timeout_s:g} s"
    elif crashed:
        reason = f"the test run crashed (exit code {run.exit_code}) before pytest reported"
    elif resolved:
        reason = "resolved: every FAIL_TO_PASS and PASS_TO_PASS test passes"
    else:
        failing = [*fail_to_pass.failed, *pass_to_pass.failed]
        reason = f"not resolved: {len(failing)} test(s) fail: {', '.join(failing[:5])}"
    return GradeResult(
        resolved=resolved and not run.timed_out,
        reward=1.0 if resolved and not run.timed_out else 0.0,
        tests=tests,
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        patch_applied=True,
        timed_out=run.timed_out,
        reason=reason,
        log=log.text(),
    )


def _apply(sandbox: Sandbox, path: str, patch: str, excludes: list[str], log: _Log) -> str | None:
    """Apply ``patch`` in the sandbox's repo; the error text if it does not apply."""
    if not patch.strip():
        return None
    sandbox.write_file(path, patch.encode("utf-8", errors="surrogateescape"))
    options = "".join(f" --exclude={shlex.quote(pattern)}" for pattern in excludes)
    command = f"git apply --verbose{options} {path}"
    result = sandbox.exec(command, _APPLY_TIMEOUT_S, _APPLY_OUTPUT_LIMIT)
    log.add(command, result.output)
    if result.exit_code == 0:
        return None
    lines = [line for line in result.output.splitlines() if line.startswith("error")]
    return "; ".join(lines[:3]) or result.output.strip()[-500:] or f"exit code {result.exit_code}"


def _crashed(exit_code: int, output: str) -> bool:
    """The test process died mid-run: pytest's session started and never closed."""
    return (
        exit_code not in _PYTEST_TROUBLE
        and _SESSION_START.search(output) is not None
        and _SESSION_END.search(output) is None
    )


def _runner_trouble(exit_code: int, output: str, any_outcome: bool) -> str | None:
    """Why a finished test run cannot grade anything, or None when it can."""
    collection_failed = exit_code == 2 or (exit_code == 4 and _PYTEST_NOT_FOUND in output)
    if exit_code not in (0, 1) and not collection_failed:
        meaning = {
            3: "pytest internal error",
            4: "pytest usage error",
            5: "no tests collected",
            126: "test command not executable",
            127: "test command not found",
        }.get(exit_code, "not a pytest outcome")
        return f"the test command exited with code {exit_code} ({meaning})"
    if not any_outcome and not collection_failed:
        return (
            f"the test log names no test (exit code {exit_code}); "
            "does test_command run pytest with -rA?"
        )
    return None


def _group(test_ids: list[str], tests: dict[str, str]) -> TestGroup:
    passed = [test_id for test_id in test_ids if tests[test_id] in PASSING]
    failed = [test_id for test_id in test_ids if tests[test_id] not in PASSING]
    return TestGroup(passed=passed, failed=failed)


def _wildmatch_escape(path: str) -> str:
    """``path`` as a git wildmatch pattern matching only itself."""
    return "".join(f"\\{char}" if char in "*?[\\" else char for char in path)
