"""The pytest -rA log parser."""

from __future__ import annotations

from dataclasses import dataclass

from ac_env.pytest_log import (
    FRAME,
    Outcome,
    TestRunSummary,
    failing_lines,
    last_test_run,
    parse_collected,
    parse_pytest_log,
    summarize_pytest_output,
    tally_counts,
)

LOG = """============================= test session starts ==============================
collected 6 items

tests/test_a.py .F.sxX                                                    [100%]

=================================== FAILURES ===================================
___________________________________ test_two ___________________________________
----------------------------- Captured stdout call -----------------------------
PASSED tests/test_a.py::test_two
==================================== PASSES ====================================
=========================== short test summary info ============================
PASSED tests/test_a.py::test_one
PASSED tests/test_a.py::test_param[a b]
SKIPPED [1] tests/test_a.py:12: not today
XFAIL tests/test_a.py::test_known - reason: bug 12
XPASS tests/test_a.py::test_lucky
FAILED tests/test_a.py::test_two - AssertionError: assert 1 == 2
ERROR tests/test_b.py::test_setup - RuntimeError: fixture broke
============== 1 failed, 2 passed, 1 skipped, 1 xfailed, 1 xpassed in 0.05s ===============
PASSED tests/test_a.py::test_two
"""


def test_summary_outcomes_are_parsed():
    assert parse_pytest_log(LOG) == {
        "tests/test_a.py::test_one": Outcome.PASSED,
        "tests/test_a.py::test_param[a b]": Outcome.PASSED,
        "tests/test_a.py::test_known": Outcome.XFAIL,
        "tests/test_a.py::test_lucky": Outcome.XPASS,
        "tests/test_a.py::test_two": Outcome.FAILED,
        "tests/test_b.py::test_setup": Outcome.ERROR,
    }


def test_without_a_summary_every_outcome_line_counts():
    log = "PASSED tests/t.py::test_a\nnoise\nFAILED tests/t.py::test_b - boom\nPASSEDNOT x\n"
    assert parse_pytest_log(log) == {
        "tests/t.py::test_a": Outcome.PASSED,
        "tests/t.py::test_b": Outcome.FAILED,
    }


def test_missing_is_never_read_from_a_log():
    log = "MISSING tests/t.py::test_a\nPASSED tests/t.py::test_b\n"
    assert parse_pytest_log(log) == {"tests/t.py::test_b": Outcome.PASSED}


def test_failing_lines_keep_ids_with_spaces_and_their_reasons():
    output = (
        "FAILED tests/t.py::test_p[a b] - AssertionError: x - y\n"
        "ERROR tests/t_bad.py\n"
        "  FAILED tests/t.py::indented is not a summary line\n"
    )
    assert failing_lines(output) == {
        "tests/t.py::test_p[a b]": "AssertionError: x - y",
        "tests/t_bad.py": "",
    }


def test_a_short_traceback_frame_names_its_file_and_function():
    found = [m.groupdict() for m in FRAME.finditer("x\nsrc/calc.py:12: in add\n    return a\n")]
    assert found == [{"path": "src/calc.py", "function": "add"}]


def test_a_log_without_outcomes_is_empty():
    assert parse_pytest_log("ModuleNotFoundError: No module named 'pytest'\n") == {}


def test_terminal_output_is_summarized_from_its_closing_tally():
    run = summarize_pytest_output(LOG)
    assert (run.completed, run.passed, run.failed) == (True, 2, 1)
    assert run.failing == ("tests/test_a.py::test_two", "tests/test_b.py::test_setup")
    assert run.messages["tests/test_a.py::test_two"] == "AssertionError: assert 1 == 2"
    assert run.tally_line == "1 failed, 2 passed, 1 skipped, 1 xfailed, 1 xpassed in 0.05s"
    assert not run.all_passed
    assert run.tally() == "2 passed, 1 failed"


def test_output_cut_before_the_tally_did_not_complete():
    run = summarize_pytest_output("FAILED tests/t.py::test_b - boom\nKilled\n")
    assert run == TestRunSummary(False, 0, 0, ())
    assert run.tally() == "did not complete"


def test_a_tally_quoted_in_any_text_is_counted():
    assert tally_counts("Tests: 2 failed, 1 error, 8 passed after the fix") == (8, 3)
    assert tally_counts("tests pass now") is None


@dataclass(frozen=True)
class Ran:
    command: str
    output: str


def test_the_last_test_run_is_the_last_pytest_command():
    runs = [
        Ran("python3 -m pytest -q", "2 failed, 8 passed in 0.1s"),
        Ran("cat core.py", "1 failed in 0.1s"),  # not a test run
        Ran("python3 -m pytest -x", "Timeout"),  # printed no tally
    ]
    record, run = last_test_run(runs) or (None, None)
    assert record is runs[2] and run is not None and not run.completed
    record, run = last_test_run(runs, completed=True) or (None, None)
    assert record is runs[0] and run is not None and (run.failed, run.passed) == (2, 8)
    assert last_test_run(runs[1:2]) is None


COLLECTED = """tests/test_a.py::test_b
tests/test_a.py::test_p[a b]
tests/test_a.py::TestK::test_m

==================================== ERRORS ====================================
______________________ ERROR collecting tests/test_bad.py ______________________
E   ModuleNotFoundError: No module named 'x::y'
=========================== short test summary info ============================
ERROR tests/test_bad.py
3 tests collected, 1 error in 0.06s
"""


def test_collect_only_listing_gives_ids_in_suite_order():
    assert parse_collected(COLLECTED) == [
        "tests/test_a.py::test_b",
        "tests/test_a.py::test_p[a b]",
        "tests/test_a.py::TestK::test_m",
    ]
    assert parse_pytest_log(COLLECTED) == {"tests/test_bad.py": Outcome.ERROR}
