"""Run the graded tests through the trusted runner (``boot.py``) and read its report.

The task's ``test_command`` must be a pytest invocation (``[VAR=value ...] python -m pytest
ARGS`` or ``pytest ARGS``): its environment assignments and arguments are kept, and the
interpreter runs ``boot.py`` in isolated mode (``-I -B``) instead of ``-m pytest``.
The runner's report is the line that carries a fresh random nonce; the log around it is
kept for people, never read for outcomes.
"""

from __future__ import annotations

import ast
import re
import secrets
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ac_env.sandbox.base import ExecResult, Sandbox
from ac_env.tasks.model import Task

BOOT_SOURCE = Path(__file__).with_name("boot.py")
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
    outcomes: dict[str, str] = field(default_factory=dict)
    tampered: list[str] = field(default_factory=list)
    repo_code_ran: bool = True


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
    sandbox.write_file(f"{RUNNER_DIR}/boot.py", BOOT_SOURCE.read_bytes())
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
    reports = []
    for line in output.splitlines():
        kind, _, payload = line.removeprefix(f"{nonce} ").partition(" ")
        if not line.startswith(f"{nonce} "):
            continue
        if kind == "STARTED":
            report.started = True
        elif kind == "REPORT":
            reports.append(payload)
    if len(reports) > 1:
        report.tampered.append(f"the runner's report appears {len(reports)} times")
    if len(reports) == 1:
        data = ast.literal_eval(reports[0])
        report.finished = True
        report.exit_code = int(data["exit_code"])
        report.error = str(data["error"])
        report.outcomes = {str(k): str(v) for k, v in data["outcomes"].items()}
        report.tampered += [str(reason) for reason in data["tampered"]]
        report.repo_code_ran = bool(data["repo_code_ran"])
    return report
