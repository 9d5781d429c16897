"""Test one candidate bug against the library's suite and keep it or say why not.

A mutant is kept when, over the baseline's tests, between one and ``max_failing`` fail, every
other one still passes, no test file stops collecting, the run ends within its time limit,
and the failing tests fail again when run alone. Two kept mutants behave the same when they
break the same tests with the same ``E`` lines; only the first of them becomes a task.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from ac_env.mining.baseline import Baseline
from ac_env.mining.runner import SuiteRunner
from ac_env.pytest_log import Failure, Outcome
from ac_env.tasks.synthetic.mutations import Mutation, apply_mutations

Verdict = Literal[
    "kept",
    "survived",
    "too_many_failures",
    "timed_out",
    "broke_collection",
    "changed_other_tests",
    "flaky",
]


class MutantResult(BaseModel):
    """One line of a build's ``mutants.jsonl`` (what makes an interrupted build resumable)."""

    model_config = ConfigDict(frozen=True)

    key: str
    mutation: Mutation
    verdict: Verdict
    fail_to_pass: list[str] = []
    failures: dict[str, Failure] = {}
    duration_s: float = 0.0

    def behaviour(self) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
        """What the mutant does to the suite: its failing tests and what each one printed."""
        return tuple(self.fail_to_pass), tuple(
            tuple(self.failures.get(test, Failure()).errors) for test in self.fail_to_pass
        )


def evaluate_mutant(
    runner: SuiteRunner,
    baseline: Baseline,
    mutation: Mutation,
    source: str,
    *,
    max_failing: int,
    timeout_s: float,
) -> MutantResult:
    """Run the suite with ``mutation`` applied to ``source`` (its file's text)."""
    files = {mutation.file: apply_mutations(source, [mutation])}
    run = runner.run(
        files,
        deselect=baseline.deselected,
        ignore=baseline.ignored_files,
        maxfail=max_failing + 1,
        timeout_s=timeout_s,
    )
    spent = run.duration_s

    def result(verdict: Verdict, failing: list[str] | None = None) -> MutantResult:
        failing = failing or []
        return MutantResult(
            key=mutation.key(),
            mutation=mutation,
            verdict=verdict,
            fail_to_pass=failing,
            failures={test: run.failures[test] for test in failing if test in run.failures},
            duration_s=round(spent, 3),
        )

    if run.timed_out:
        return result("timed_out")
    if run.collection_errors():
        return result("broke_collection")
    failing = run.failing(baseline.tests)
    if not failing:
        return result("survived" if run.exit_code == 0 else "changed_other_tests")
    if len(failing) > max_failing:
        return result("too_many_failures")
    others = set(baseline.tests) - set(failing)
    if any(run.outcomes.get(test) != Outcome.PASSED for test in others):
        return result("changed_other_tests")
    again = runner.run(files, tests=failing, timeout_s=timeout_s)
    spent += again.duration_s
    if again.timed_out or again.failing(failing) != failing:
        return result("flaky")
    return result("kept", failing)
