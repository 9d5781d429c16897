"""The pytest -rA log parser."""

from __future__ import annotations

from ac_env.test_log import Outcome, parse_pytest_log

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


def test_a_log_without_outcomes_is_empty():
    assert parse_pytest_log("ModuleNotFoundError: No module named 'pytest'\n") == {}
