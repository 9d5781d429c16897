"""What the execution history shows (``ac_train.judge.evidence``): places from a failing run's
pointer and the code read, workspace changes and verification, and the summary claims the
history does not support. Outputs are in the formats real runs print (pytest's short and long
tracebacks, the reference agent's fault ranking, ``cat -n``, ``grep -n``)."""

from __future__ import annotations

import gymnasium as gym
import pytest

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.reference import ReferenceAgent
from ac_env.agents.rollout import rollout
from ac_env.trajectory import ToolResult
from ac_train.judge.evidence import Evidence, may_change_workspace, unsupported_claims

SHORT_TRACEBACK = """\
FF.                                                                      [100%]
=================================== FAILURES ===================================
______________________ test_fifo_stock_value_after_issue _______________________
tests/stock/test_ledger.py:22: in test_fifo_stock_value_after_issue
    assert stocked_ledger.stock_value("TEE-0042").amount == Decimal("40.00")
ledgerly/stock/ledger.py:86: in stock_value
    return self._queue(sku).value()
ledgerly/stock/valuation.py:26: in value
    return self.unit_cost / self.quantity
E   TypeError: unsupported operand type(s) for /: 'Money' and 'int'
=========================== short test summary info ============================
FAILED tests/stock/test_ledger.py::test_fifo_stock_value_after_issue - TypeEr...
FAILED tests/stock/test_ledger.py::test_total_stock_value - TypeError: unsupp...
2 failed, 1 passed in 0.05s
"""
READ_VALUE = """\
    25\t    def value(self) -> Money:
    26\t        return self.unit_cost / self.quantity
"""
READ_OTHER_VALUE = """\
    63\t    def value(self) -> Money:
    64\t        return sum_money([layer.value() for layer in self.layers], self.currency)
"""
RANKING = """\
F                                                                        [100%]
FAILED tests/pricing/test_quote.py::test_percent_coupon - AssertionError: ass...
1 failed in 0.02s
.....                                                                    [100%]
5 passed in 0.10s
suspicious lines (failing runs: 1, passing runs: 5):
1.00 ledgerly/pricing/discounts.py:51 in parse_coupon [45-53] | if kind == "SAVE":
0.87 ledgerly/pricing/quote.py:53 in build_quote [39-65] | coupon = parse_coupon(coupon_code)
"""
READ_PARSE_COUPON = """\
    45\tdef parse_coupon(code: str) -> Coupon:
    46\t    match = COUPON_PATTERN.match(code.strip().upper())
"""
READ_BUILD_QUOTE = """\
    39\tdef build_quote(lines):
    40\t    subtotal = sum_money([line.total() for line in lines])
"""
SUITE = "python3 -m pytest -q --tb=short -p no:cacheprovider 2>&1 | tail -n 60"
LOCALIZE = "timeout 55 python3 - <<'AC_LOCALIZE_END'\nimport pytest\nAC_LOCALIZE_END"


def result(step: int, command: str, output: str) -> ToolResult:
    return ToolResult(
        step=step,
        command=command,
        output=output,
        exit_code=0,
        timed_out=False,
        truncated=False,
        duration_s=0.0,
    )


def places(*results: ToolResult) -> list[tuple[str, str, str]]:
    return [(p.path, p.function, p.pointer) for p in Evidence.of(results).places]


def test_a_traceback_frame_and_the_functions_code_make_a_place():
    run = result(0, SUITE, SHORT_TRACEBACK)
    read = result(1, "cat -n ledgerly/stock/valuation.py | sed -n '25,26p'", READ_VALUE)
    assert places(run, read) == [("ledgerly/stock/valuation.py", "value", "frame")]
    assert places(run) == []  # the frame alone shows one line, not the function
    assert places(read) == []  # the code alone, with no failing run behind it


def test_a_frame_points_into_its_own_file_only():
    run = result(0, SUITE, SHORT_TRACEBACK)
    elsewhere = result(1, "cat -n ledgerly/stock/layers.py | sed -n '63,64p'", READ_OTHER_VALUE)
    assert places(run, elsewhere) == []


def test_the_top_of_a_fault_ranking_and_its_code_make_a_place():
    ranking = result(0, LOCALIZE, RANKING)
    top = result(1, "cat -n ledgerly/pricing/discounts.py | sed -n '45,46p'", READ_PARSE_COUPON)
    second = result(1, "cat -n ledgerly/pricing/quote.py | sed -n '39,40p'", READ_BUILD_QUOTE)
    assert places(ranking, top) == [("ledgerly/pricing/discounts.py", "parse_coupon", "ranking")]
    assert places(ranking, second) == []


def test_a_grep_hit_shows_no_code_but_grep_with_context_does():
    run = result(0, SUITE, SHORT_TRACEBACK)
    hit = "ledgerly/stock/valuation.py:25:    def value(self) -> Money:\n"
    with_body = (
        hit + "ledgerly/stock/valuation.py-26-        return self.unit_cost / self.quantity\n"
    )
    assert places(run, result(1, "grep -rn 'def value' .", hit)) == []
    assert places(run, result(1, "grep -rn -A1 'def value' .", with_body)) == [
        ("ledgerly/stock/valuation.py", "value", "frame")
    ]


@pytest.mark.parametrize(
    ("command", "changes"),
    [
        ("cat -n a.py | sed -n '1,5p'", False),
        ("grep -rn foo . | head -n 20", False),
        ("[ -d src ] && export PYTHONPATH=src\ntimeout 55 python3 -m pytest -q 2>&1 | tail", False),
        ("git diff && git status", False),
        ("sed -i 's/a/b/' a.py", True),
        ("echo x >> a.py", True),
        ("python3 - <<'END'\nopen('a.py', 'w')\nEND", True),
        ("git checkout -- a.py", True),
        ("python3 -m pytest -q > log.txt", True),
    ],
)
def test_which_commands_may_change_the_workspace(command, changes):
    assert may_change_workspace(command) is changes


def test_verified_needs_a_passing_run_after_the_last_change():
    passing = "3 passed in 0.01s\n"
    edit = result(1, "sed -i 's/a/b/' a.py", "")
    assert Evidence.of([edit, result(2, SUITE, passing)]).verified
    assert not Evidence.of([result(0, SUITE, passing), edit]).verified
    assert not Evidence.of([edit, result(2, SUITE, SHORT_TRACEBACK)]).verified
    both = result(1, "sed -i 's/a/b/' a.py && " + SUITE, passing)  # the run follows the edit
    assert Evidence.of([both]).verified


FAITHFUL = """# Auto Context Summary
## Task
stock value crashes
## Known
- `value` in ledgerly/stock/valuation.py: a failing run's traceback passes through it.
## Workspace
no changes yet
## Tests
fail: tests/stock/test_ledger.py::test_fifo_stock_value_after_issue,
tests/stock/test_ledger.py::test_total_stock_value
## Next
Edit it: `sed -n 25,26p ledgerly/stock/valuation.py`
"""


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (("`value` in ledgerly/stock/valuation.py", "The bug is in `stock_value`"), "location:"),
        (("Edit it:", "Read `tax_for` in ledgerly/tax.py, then edit:"), "never shown"),
        (("## Workspace", "## Ruled out\nledgerly/stock/ledger.py\n## Workspace"), "ruled out:"),
        (("no changes yet", "ledgerly/stock/valuation.py: changed, verified"), "workspace:"),
        (("test_fifo_stock_value_after_issue", "test_made_up"), "never shown"),
    ],
)
def test_a_claim_the_history_does_not_show_is_reported(edit, problem):
    history = [
        result(0, SUITE, SHORT_TRACEBACK),
        result(1, "cat -n ledgerly/stock/valuation.py | sed -n '25,26p'", READ_VALUE),
    ]
    evidence = Evidence.of(history, "stock value crashes")
    assert unsupported_claims(FAITHFUL, evidence) == []
    problems = unsupported_claims(FAITHFUL.replace(*edit), evidence)
    assert len(problems) == 1 and problem in problems[0], problems


@pytest.mark.parametrize(
    ("compact_when", "source", "task_id"),
    [
        ("after_locate", None, "tiny-calc-1"),
        # three bugs: a summary after each partial fix, a fresh search after it
        ("after_fix", "builtin", "synthetic__ledgerly-medium-train-10000"),
    ],
)
def test_the_reference_agents_own_summaries_assert_nothing_unshown(
    tiny_task_file, compact_when, source, task_id
):
    """The checker does not fault summaries that carry only what happened (the model-free
    agent writes its summaries from its own history)."""
    split = "medium" if source else None
    env = gym.make("AutoCompact-SWE-v0", task_source=source or str(tiny_task_file), split=split)
    try:
        agent = ReferenceAgent(compact_when)
        trajectory = rollout(env, agent, options={"task_id": task_id}, max_steps=40)
        statement = env.unwrapped.task.problem_statement
    finally:
        env.close()
    events = [e for e in trajectory.compactions() if e.summary]
    assert events
    for event in events:
        before = [r for r in trajectory.tool_results() if r.step < event.step]
        assert unsupported_claims(event.summary, Evidence.of(before, statement)) == []
