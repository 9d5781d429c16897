"""``after_passing_tests``: compact right after a test run in which every test passed (a fix
verified ends a phase: the reads and failed tries before it are stale). Only a completed
pytest run counts (its closing tally printed, no failure or error, at least one pass), and
only once per run: not again before another turn."""

from __future__ import annotations

from dataclasses import dataclass

from ac_env.compaction.when.moment import Moment
from ac_env.pytest_log import summarize_pytest_output


@dataclass(frozen=True)
class AfterPassingTests:
    @property
    def name(self) -> str:
        return "after_passing_tests"

    @property
    def description(self) -> str:
        return "compacts right after a test run in which every test passed"

    def __call__(self, moment: Moment) -> bool:
        exchange = moment.last_exchange()
        if exchange is None or moment.turns_since_compaction == 0:
            return False
        turn, output = exchange
        return "pytest" in turn and summarize_pytest_output(output).all_passed


RULE = AfterPassingTests
