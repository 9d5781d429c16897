"""The miner's baseline and mutant runs on tiny repos in the real sandbox: skipped tests are
left out by id, a file that does not collect is ignored (and a suite of which nothing collects
is refused naming the import error), and the kept tests keep the suite's order."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ac_env.mining.baseline import BaselineError, run_baseline
from ac_env.mining.mutants import evaluate_mutant
from ac_env.mining.runner import SuiteRunner, base_task
from ac_env.mining.sdist import commit_tree
from ac_env.tasks.synthetic.mutations import find_mutations

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
CORE = """def double(x):
    return x * 2


def triple(x):
    return x * 3
"""
TESTS = """import pytest

from pkg.core import double, triple


def test_triple():
    assert triple(2) == 6


def test_skipped_while_double_works():
    if double(2) == 4:
        pytest.skip("double works")
    assert double(2) == 4


def test_double():
    assert double(2) == 4


def test_a_last():
    assert triple(1) == 3
"""
T = "tests/test_core.py::"


def repo_with(root: Path, files: dict[str, str]) -> Path:
    repo = root / "repo"
    for path, text in {"pkg/__init__.py": "", "pkg/core.py": CORE, **files}.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    commit_tree(repo, "base")
    return repo


@pytest.fixture
def runner_for(tmp_path: Path) -> Iterator[object]:
    runners: list[SuiteRunner] = []

    def make(files: dict[str, str]) -> SuiteRunner:
        repo = repo_with(tmp_path, files)
        tests = [path for path in files if path.startswith("tests/")]
        runners.append(SuiteRunner(base_task("pkg-0.1", repo, tests), None, ISOLATION))
        return runners[-1]

    yield make
    for runner in runners:
        runner.close()


def test_skipped_tests_are_left_out_and_do_not_count_towards_maxfail(runner_for):
    runner = runner_for({"tests/__init__.py": "", "tests/test_core.py": TESTS})
    baseline = run_baseline(runner, slow_test_s=5.0, timeout_s=60)
    assert baseline.tests == [f"{T}test_triple", f"{T}test_double", f"{T}test_a_last"]
    assert baseline.deselected == [f"{T}test_skipped_while_double_works"]
    # `x * 2` -> `x / 2` fails test_double, and the test skipped at baseline would fail
    # too: with it deselected, --maxfail=2 does not stop the run before test_a_last
    (mutation,) = [
        m
        for m in find_mutations("pkg/core.py", CORE)
        if m.function == "double" and m.operator == "arithmetic_swap"
    ]
    result = evaluate_mutant(runner, baseline, mutation, CORE, max_failing=1, timeout_s=60)
    assert result.verdict == "kept" and result.fail_to_pass == [f"{T}test_double"]


def test_a_file_that_does_not_collect_is_ignored(runner_for):
    runner = runner_for(
        {
            "tests/__init__.py": "",
            "tests/test_core.py": TESTS,
            "tests/test_broken.py": "import not_installed_anywhere\n",
        }
    )
    baseline = run_baseline(runner, slow_test_s=5.0, timeout_s=60)
    assert baseline.ignored_files == ["tests/test_broken.py"]
    assert baseline.collection_error == (
        "ModuleNotFoundError: No module named 'not_installed_anywhere'"
    )
    assert baseline.tests == [f"{T}test_triple", f"{T}test_double", f"{T}test_a_last"]


def test_a_suite_that_does_not_collect_is_refused_naming_the_import_error(runner_for):
    test = "from tests import helper\n\n\ndef test_x():\n    assert helper\n"
    runner = runner_for({"tests/test_core.py": test})
    with pytest.raises(BaselineError) as refused:
        run_baseline(runner, timeout_s=60)
    assert str(refused.value).startswith(
        "tests do not collect: ImportError: cannot import name 'helper' from 'tests'"
    )
