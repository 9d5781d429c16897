"""The library's suite before any bug: which tests a task may use, in the suite's own order.

A collect-only run lists the suite's test ids in collection order (skipped tests included,
which ``-rA`` reports without an id) and the test files that cannot be collected; those files
are ignored from then on. The first full run (with per-test durations) then gives each test's
outcome. The tests a task may use are those that pass in every run and take at most
``slow_test_s`` seconds each; every other collected test (failing, skipped, flaky, slow) is
deselected in every later run (a slow test would make each mutant's run slow; a skipped one
would count towards ``--maxfail``; leaving them out of FAIL_TO_PASS and PASS_TO_PASS keeps
"the rest pass" exact over the tests the task has). ``Baseline.tests`` keeps the suite's
order, which tasks record so that grading runs their tests in it.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from ac_env.mining.runner import SuiteRun, SuiteRunner
from ac_env.pytest_log import Outcome

MAX_FAILING_SHARE = 0.2
"""A suite where more than this share of collected tests fails at baseline is refused."""
_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
_ERROR_LINE = re.compile(r"^E\s+(\w+(?:Error|Exception)\b.*)$", re.MULTILINE)


class BaselineError(RuntimeError):
    """The suite cannot serve as a baseline; the message is one line saying why."""


class Baseline(BaseModel):
    model_config = ConfigDict(frozen=True)

    tests: list[str]
    deselected: list[str]
    ignored_files: list[str]
    slow: list[str]
    duration_s: float
    collection_error: str = ""
    """The first error of the ignored files (``ImportError: ...``), or ""."""


def _refuse_listing(listing: SuiteRun, timeout_s: float) -> None:
    """Refuse a suite of which nothing collects, naming the first import error."""
    if listing.timed_out:
        raise BaselineError(f"collecting the test suite ran over {timeout_s:g} s at baseline")
    if listing.collected:
        return
    missing = _MISSING_MODULE.search(listing.output)
    if missing:
        raise BaselineError(
            f"tests need module {missing.group(1)!r}, which the sandbox's python3 cannot "
            "import (it has the standard library and pytest only)"
        )
    error = first_error(listing.output)
    if error:
        raise BaselineError(f"tests do not collect: {error}")
    raise BaselineError(f"no test collected at baseline ({_last_line(listing)})")


def first_error(output: str) -> str:
    """The first ``E   SomeError: ...`` line of a pytest log, without the ``E``; or ""."""
    error = _ERROR_LINE.search(output)
    return error.group(1).strip() if error else ""


def _refuse_run(run: SuiteRun, timeout_s: float) -> None:
    if run.timed_out:
        raise BaselineError(f"the test suite ran over {timeout_s:g} s at baseline")
    if not any("::" in test for test in run.outcomes):
        raise BaselineError(f"no test ran at baseline ({_last_line(run)})")
    if run.exit_code not in (0, 1):
        raise BaselineError(f"pytest exited with code {run.exit_code} at baseline")


def _last_line(run: SuiteRun) -> str:
    lines = [line for line in run.output.splitlines() if line.strip()]
    return f"exit code {run.exit_code}: {lines[-1].strip('= ') if lines else 'no output'}"


def run_baseline(
    runner: SuiteRunner, *, runs: int = 2, slow_test_s: float = 0.25, timeout_s: float = 900.0
) -> Baseline:
    listing = runner.run(collect_only=True, timeout_s=timeout_s)
    _refuse_listing(listing, timeout_s)
    ignored = listing.collection_errors()
    first = runner.run(ignore=ignored, durations=True, timeout_s=timeout_s)
    _refuse_run(first, timeout_s)
    ran = [test for test in first.outcomes if "::" in test]
    collected = list(dict.fromkeys([*listing.collected, *ran]))
    failing = first.failing(collected)
    if len(failing) > MAX_FAILING_SHARE * len(collected):
        raise BaselineError(f"{len(failing)} of {len(collected)} tests fail at baseline")
    slow = sorted(t for t in collected if first.durations.get(t, 0.0) > slow_test_s)
    kept = [t for t in collected if first.outcomes.get(t) == Outcome.PASSED and t not in set(slow)]
    duration_s = 0.0
    for _ in range(runs - 1):
        deselect = sorted(set(collected) - set(kept))
        again = runner.run(deselect=deselect, ignore=ignored, timeout_s=timeout_s)
        _refuse_run(again, timeout_s)
        kept = [t for t in kept if again.outcomes.get(t) == Outcome.PASSED]
        duration_s = max(duration_s, again.duration_s)
    if not kept:
        raise BaselineError("no test passes at baseline")
    return Baseline(
        tests=kept,
        deselected=sorted(set(collected) - set(kept)),
        ignored_files=ignored,
        slow=slow,
        duration_s=duration_s or first.duration_s,
        collection_error=first_error(listing.output) if ignored else "",
    )
