"""Run a library's test suite in the local sandbox, as tasks will run: Debian's
``/usr/bin/python3`` with apt's pytest, no network, a time limit, every process killed at the
end. Changed files are written in, the suite runs, and git restores the tree afterwards."""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ac_env.pytest_log import (
    FAILING,
    Failure,
    Outcome,
    parse_collected,
    parse_durations,
    parse_failures,
    parse_pytest_log,
)
from ac_env.sandbox.local import Isolation, LocalSandbox
from ac_env.tasks.model import Task

PYTEST = "python3 -m pytest -rA -p no:cacheprovider -o addopts="
"""How a mined task's tests run: the project's own ``addopts`` are dropped (they may ask for
plugins apt's pytest lacks, or for doctests, whose ids name the source file)."""
RESTORE = 'git reset -q --hard && git clean -qfdx && find "$TMPDIR" -mindepth 1 -delete'
_OUTPUT_LIMIT = 16 * 1024 * 1024
_RESTORE_TIMEOUT_S = 60.0


def test_command(python_path: str | None) -> str:
    return f"PYTHONPATH={python_path} {PYTEST}" if python_path else PYTEST


@dataclass(frozen=True)
class SuiteRun:
    """One pytest run: outcome per test id (a file that could not be collected appears as its
    path with ``Outcome.ERROR``; a skipped test is
    not named, as ``-rA`` reports skips by location), what each failing test showed, per-test
    seconds when durations were asked for, and for a collect-only run the collected ids in
    the suite's order."""

    outcomes: dict[str, Outcome]
    exit_code: int
    timed_out: bool
    duration_s: float
    output: str
    failures: dict[str, Failure] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)
    collected: list[str] = field(default_factory=list)

    def collection_errors(self) -> list[str]:
        return sorted(test for test, outcome in self.outcomes.items() if "::" not in test)

    def failing(self, tests: Sequence[str]) -> list[str]:
        return [test for test in tests if self.outcomes.get(test) in FAILING]


class SuiteRunner:
    """A started sandbox holding the library's base repo (``task.snapshot_dir``)."""

    def __init__(self, base: Task, python_path: str | None, isolation: Isolation = "bwrap") -> None:
        self.command = test_command(python_path)
        self._sandbox = LocalSandbox(isolation=isolation)
        self._sandbox.start(base)

    def run(
        self,
        files: Mapping[str, str] | None = None,
        *,
        tests: Sequence[str] = (),
        deselect: Sequence[str] = (),
        ignore: Sequence[str] = (),
        maxfail: int | None = None,
        durations: bool = False,
        collect_only: bool = False,
        timeout_s: float,
    ) -> SuiteRun:
        """Write ``files`` (repo-relative path -> text), run ``tests`` (all when empty), and
        restore the tree with git whatever happened. ``collect_only`` lists the tests (and the
        files that fail to collect) without running them."""
        options = ["--tb=short"]
        if collect_only:
            options += ["--collect-only", "-q", "--continue-on-collection-errors"]
        if maxfail is not None:
            options.append(f"--maxfail={maxfail}")
        if durations:
            options += ["--durations=0", "--durations-min=0"]
        options += [f"--deselect={test}" for test in deselect]
        options += [f"--ignore={path}" for path in ignore]
        command = f"{self.command} {shlex.join([*options, *tests])}"
        started = time.monotonic()
        try:
            for path, text in (files or {}).items():
                self._sandbox.write_file(path, text.encode())
            result = self._sandbox.exec(command, timeout_s, _OUTPUT_LIMIT)
        finally:
            restored = self._sandbox.exec(RESTORE, _RESTORE_TIMEOUT_S, 64 * 1024)
        if restored.exit_code != 0:
            raise RuntimeError(f"git could not restore the tree: {restored.output.strip()}")
        outcomes = parse_pytest_log(result.output)
        failing = [t for t, o in outcomes.items() if o in FAILING and "::" in t]
        return SuiteRun(
            outcomes=outcomes,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            duration_s=time.monotonic() - started,
            output=result.output,
            failures=parse_failures(result.output, failing),
            durations=parse_durations(result.output) if durations else {},
            collected=parse_collected(result.output) if collect_only else [],
        )

    def close(self) -> None:
        self._sandbox.close()


def base_task(name: str, repo: Path, test_files: list[str]) -> Task:
    """A stand-in task whose snapshot is the library's unmutated repo (for the runner)."""
    return Task(
        instance_id=f"{name}-base",
        repo=name,
        problem_statement="",
        patch="",
        FAIL_TO_PASS=[],
        PASS_TO_PASS=[],
        split="real",
        snapshot_dir=repo,
        test_files=test_files,
    )
