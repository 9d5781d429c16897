"""Run the graded tests through the trusted runner (``boot.py`` with its guard, ``guard.py``)
and decide each test's outcome from what the guard streamed.

The task's ``test_command`` must be a pytest invocation (``[VAR=value ...] python -m pytest
ARGS`` or ``pytest ARGS``): its environment assignments and arguments are kept, and the
interpreter runs ``boot.py`` in isolated mode (``-I -B``) instead of ``-m pytest``. The
runner's word is only what carries a fresh random nonce: ``STARTED`` (printed before any code
of the repository ran, with the tests the test files mark xfail) and the collector's block of
the guard's stream (``BEGIN``, ``CALL``, ``RESULT``, ``REPORT``, ``TAMPER``, ``FLAG``,
``END``). The log around it is kept for people, never read for outcomes.

``read_report`` decides: a test PASSED when pytest reported its call passed *and* the guard
saw, exactly once each, its call begin with the test file's own code (``CALL`` with no
reason) and that code return (``RESULT returned``) - or, for a doctest, when pytest reported
it passed. An xfail counts (XFAIL) only for a test its file marks xfail and whose code raised.
A pass that lacks its evidence, and an xfail the file does not mark, are reported tampering.
"""

from __future__ import annotations

import ast
import json
import re
import secrets
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ac_env.pytest_log import Outcome
from ac_env.sandbox.base import ExecResult, Sandbox
from ac_env.tasks.model import Task

RUNNER_FILES = ("boot.py", "guard.py")
RUNNER_DIR = ".git/autocompact-grader"
"""Where the runner and its job file are written in the grading sandbox (a patch can never
write under ``.git``)."""
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^(?:\S*/)?python[0-9.]*$")
_PYTEST = ("pytest", "py.test")
_ALWAYS = ["-p", "no:cacheprovider"]


class RunnerCommandError(ValueError):
    """The task's test_command is not a pytest invocation the runner can take over."""


@dataclass(frozen=True)
class Invocation:
    environment: list[str]
    python: str
    args: list[str]


@dataclass
class RunnerReport:
    """What the trusted runner said: ``started`` is False when it never began (a host
    problem), ``finished`` False when the test process died before reporting."""

    started: bool = False
    finished: bool = False
    exit_code: int = -1
    error: str = ""
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    tampered: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    """What the guard found suspicious but not aimed at the grader (reported, not penalised)."""
    repo_code_ran: bool = True


@dataclass
class _Facts:
    """What the guard streamed about one test."""

    calls: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    reports: list[tuple[str, str, bool]] = field(default_factory=list)


def parse_test_command(command: str) -> Invocation:
    try:
        words = shlex.split(command)
    except ValueError as error:
        raise RunnerCommandError(f"test_command {command!r} is not shell words: {error}") from None
    environment = []
    while words and _ASSIGNMENT.match(words[0]):
        environment.append(words.pop(0))
    if words and _PYTHON.match(words[0]) and words[1:3] == ["-m", "pytest"]:
        return Invocation(environment, words[0], words[3:])
    if words and words[0] in _PYTEST:
        return Invocation(environment, "python3", words[1:])
    raise RunnerCommandError(
        f"test_command {command!r} is not a pytest invocation "
        "([VAR=value ...] python -m pytest ARGS, or pytest ARGS)"
    )


def run_tests(
    sandbox: Sandbox,
    task: Task,
    test_ids: list[str],
    job: dict[str, object],
    timeout_s: float,
    output_limit: int,
) -> tuple[str, ExecResult, RunnerReport]:
    """Run ``test_ids`` under the trusted runner; the command, its result and the report."""
    invocation = parse_test_command(task.test_command)
    nonce = secrets.token_hex(16)
    args = [*_ALWAYS, *invocation.args, *test_ids]
    job_text = repr({**job, "nonce": nonce, "args": args})
    for name in RUNNER_FILES:
        sandbox.write_file(f"{RUNNER_DIR}/{name}", Path(__file__).with_name(name).read_bytes())
    sandbox.write_file(f"{RUNNER_DIR}/job", job_text.encode())
    words = [*invocation.environment, invocation.python, "-I", "-B"]
    command = shlex.join([*words, f"{RUNNER_DIR}/boot.py", f"{RUNNER_DIR}/job"])
    if invocation.environment:
        command = f"env {command}"
    run = sandbox.exec(command, timeout_s, output_limit)
    return command, run, read_report(run.output, nonce)


def read_report(output: str, nonce: str) -> RunnerReport:
    """The runner's report in ``output`` (lines that start with ``nonce``)."""
    report = RunnerReport()
    xfails: set[str] = set()
    facts: dict[str, _Facts] = {}
    ends = 0
    for line in output.splitlines():
        if not line.startswith(f"{nonce} "):
            continue
        kind, _, payload = line.removeprefix(f"{nonce} ").partition(" ")
        if kind == "STARTED":
            report.started = True
            xfails = set(ast.literal_eval(payload or "[]"))
            continue
        try:
            data = json.loads(payload)
        except ValueError:
            report.tampered.append(f"an unreadable line of the runner's stream: {kind}")
            continue
        if kind == "TAMPER":
            report.tampered.append(str(data))
        elif kind == "FLAG":
            report.flags.append(str(data))
        elif kind == "CALL":
            facts.setdefault(str(data[0]), _Facts()).calls.append(str(data[1]))
        elif kind == "RESULT":
            facts.setdefault(str(data[0]), _Facts()).results.append(str(data[1]))
        elif kind == "REPORT":
            nodeid, when, outcome, wasxfail = data
            facts.setdefault(str(nodeid), _Facts()).reports.append((when, outcome, bool(wasxfail)))
        elif kind == "END":
            ends += 1
            report.finished = True
            report.exit_code, report.error, report.repo_code_ran = (
                int(data[0]),
                str(data[1]),
                bool(data[2]),
            )
    if ends > 1:
        report.tampered.append(f"the runner's stream ended {ends} times")
    for nodeid, seen in facts.items():
        outcome, problem = _outcome(nodeid, seen, xfails)
        if outcome is not None:
            report.outcomes[nodeid] = outcome
        if problem:
            report.tampered.append(f"{nodeid} {problem}")
    return report


def _outcome(nodeid: str, seen: _Facts, xfails: set[str]) -> tuple[Outcome | None, str]:
    """(the outcome of a test, tampering found or ''), from what the guard streamed."""
    phases = {when: (outcome, wasxfail) for when, outcome, wasxfail in seen.reports}
    if any(outcome == "failed" for outcome, _ in phases.values()):
        failed_call = phases.get("call", ("", False))[0] == "failed"
        return (Outcome.FAILED if failed_call else Outcome.ERROR), ""
    call = phases.get("call")
    setup = phases.get("setup", ("", False))
    if call is None and setup[0] == "skipped":
        if setup[1]:  # xfail(run=False), or an xfail raised while setting up
            return (Outcome.XFAIL, "") if _marked(nodeid, xfails) else (Outcome.FAILED, "")
        return Outcome.SKIPPED, ""
    if call is None:
        return None, ""
    outcome, wasxfail = call
    evidence = seen.calls == [""] and seen.results == ["returned"]
    if outcome == "passed":
        if seen.calls == ["doctest"] or evidence:
            return (Outcome.XPASS if wasxfail else Outcome.PASSED), ""
        why = _missing_evidence(seen)
        return Outcome.FAILED, f"was reported as passed, but {why}"
    if outcome == "skipped" and wasxfail:
        raised = len(seen.results) == 1 and seen.results[0].startswith("raised:")
        if _marked(nodeid, xfails) and (raised or seen.calls == ["doctest"]):
            return Outcome.XFAIL, ""
        if seen.results == ["raised:XFailed"]:
            return (
                Outcome.FAILED,
                "was reported as xfailed, but its test file does not mark it xfail",
            )
        return Outcome.FAILED, ""
    return Outcome.SKIPPED, ""


def _missing_evidence(seen: _Facts) -> str:
    if not seen.calls:
        return "the runner never saw its call begin"
    if len(seen.calls) > 1 or len(seen.results) > 1:
        return f"its call was seen {len(seen.calls)} and its end {len(seen.results)} times"
    if seen.calls[0]:
        return seen.calls[0]
    if not seen.results:
        return "its test function never returned"
    return f"its test function {seen.results[0].replace(':', ' ')}"


def _marked(nodeid: str, xfails: set[str]) -> bool:
    """Whether the test file marks ``nodeid`` xfail (``file::Class::name``, the class, or
    the whole file)."""
    path, _, rest = nodeid.partition("::")
    parts = re.sub(r"\[.*\]$", "", rest).split("::")
    return any(
        f"{path}::{name}" in xfails
        for name in ["*", *("::".join(parts[: depth + 1]) for depth in range(len(parts)))]
    )
