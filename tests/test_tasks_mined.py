"""The task builder end to end, offline: a tiny sdist made here (packed with tar) goes through
unpack, git, baseline, mutation, validation, dedup and the task file; the tasks load with
``load_tasks`` and an episode with the gold patch earns reward 1. Broken libraries get one
line of reason. No task leaks its fix."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections import Counter
from pathlib import Path

import gymnasium as gym
import pytest
from mined_sdist import (
    STATS,
    failing_sdist,
    good_sdist,
    library_files,
    make_sdist,
    missing_dependency_sdist,
    no_tests_sdist,
)
from sandbox_task import diff_after

import ac_env  # noqa: F401  (registers the env ids)
from ac_env.agents.oracle import GoldPatchPolicy
from ac_env.agents.rollout import rollout
from ac_env.grading import grade
from ac_env.mining.build import BuildOptions, LibraryReport, build, build_library
from ac_env.mining.candidates import is_public, schedule
from ac_env.mining.layout import inspect_layout
from ac_env.mining.mutants import MutantResult
from ac_env.mining.sdist import parse_source, resolve_latest
from ac_env.mining.statement import Secret, write_statement
from ac_env.pytest_log import Failure, parse_failures
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks import load_tasks
from ac_env.tasks.model import Task
from ac_env.tasks.synthetic.mutations import find_mutations

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
SANDBOX = "local" if ISOLATION == "bwrap" else "unisolated"


class Built:
    def __init__(self, out: Path, reports: list[LibraryReport], sdists: dict[str, Path]):
        self.out = out
        self.reports = {report.library.split()[0]: report for report in reports}
        self.sdists = sdists
        self.task_file = out / "tasks.jsonl"
        self.tasks = load_tasks(str(self.task_file))
        self.library_dir = out / "minilib-0.1"

    def mutants(self) -> list[MutantResult]:
        lines = (self.library_dir / "mutants.jsonl").read_text().splitlines()
        return [MutantResult.model_validate_json(line) for line in lines]


def options(out: Path, **overrides: object) -> BuildOptions:
    settings: dict[str, object] = {"isolation": ISOLATION, "progress": False, "slow_test_s": 1.0}
    return BuildOptions.model_validate({"out": out, **settings, **overrides})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("sdists")
    sdists = {
        "notests": no_tests_sdist(root),
        "needsdeps": missing_dependency_sdist(root),
        "failing": failing_sdist(root),
        "minilib": good_sdist(root),
    }
    out = tmp_path_factory.mktemp("mined")
    # no cap on tasks per function: every candidate is tried
    reports = build([str(path) for path in sdists.values()], options(out, max_per_function=99))
    return Built(out, reports, sdists)


@pytest.mark.slow
def test_broken_libraries_get_one_line_of_reason_and_the_build_moves_on(built: Built):
    reasons = {name: report.reason for name, report in built.reports.items()}
    assert reasons["notests"] == "the sdist of notests 1.0 ships no tests"
    assert "'hypothesis_is_not_here'" in reasons["needsdeps"]
    assert reasons["failing"] == "2 of 2 tests fail at baseline"
    assert all("\n" not in reason for reason in reasons.values())
    assert built.reports["minilib"].status == "built" and built.reports["minilib"].tasks > 0


@pytest.mark.slow
def test_baseline_leaves_out_slow_tests_and_drops_the_projects_addopts(built: Built):
    baseline = json.loads((built.library_dir / "baseline.json").read_text())
    assert baseline["slow"] == ["tests/test_stats.py::test_slow"]
    assert "tests/test_stats.py::test_slow" not in baseline["tests"]
    # the project's addopts (--doctest-modules and an unknown option) are not used
    assert len(baseline["tests"]) == 5 and all("::test_" in t for t in baseline["tests"])


@pytest.mark.slow
def test_mutants_are_judged_by_the_suite(built: Built):
    assert len(built.mutants()) == 12  # every public candidate; _bump and _private untouched
    assert {r.mutation.file for r in built.mutants()} == {"minilib/stats.py"}
    survived = [r for r in built.mutants() if r.verdict == "survived"]
    # `x > 0` -> `x > 1` changes nothing the tests check
    assert [(r.mutation.original, r.mutation.replacement, r.mutation.line) for r in survived] == [
        ("0", "1", 6)
    ]
    kept = [r for r in built.mutants() if r.verdict == "kept"]
    assert all(len(r.fail_to_pass) >= 1 for r in kept)
    dropped_guard = [
        r for r in kept if r.mutation.function == "mean" and not r.mutation.replacement
    ]
    assert dropped_guard[0].fail_to_pass == ["tests/test_stats.py::test_mean_empty"]
    assert dropped_guard[0].failures["tests/test_stats.py::test_mean_empty"].exception == (
        "ZeroDivisionError"
    )


@pytest.mark.slow
def test_duplicate_behaviour_mutants_make_one_task(built: Built):
    kept = [r for r in built.mutants() if r.verdict == "kept"]
    behaviours = {r.behaviour() for r in kept}
    report = built.reports["minilib"]
    assert report.duplicates == len(kept) - len(behaviours) >= 2
    assert report.tasks == len(behaviours) == len(built.tasks)
    # sign(0) gives -1 after `x < 0` -> `x <= 0` or `x < 0` -> `x < 1`, and 1 after
    # `x > 0` -> `x >= 0` or `return 0` -> `return 1`: four mutants, two tasks
    zero = ["tests/test_stats.py::test_sign_zero"]
    assert sum(r.fail_to_pass == zero for r in kept) == 4
    assert sum(zero == t.FAIL_TO_PASS for t in built.tasks) == 2


@pytest.mark.slow
def test_task_file_is_swebench_format_with_relative_snapshots(built: Built):
    rows = [json.loads(line) for line in built.task_file.read_text().splitlines()]
    assert rows and all(not Path(row["snapshot_dir"]).is_absolute() for row in rows)
    for task in built.tasks:
        assert task.split == "real" and task.repo == "pypi/minilib" and task.version == "0.1"
        assert task.snapshot_dir is not None and task.snapshot_dir.is_dir()
        assert task.ground_truth is not None
        assert task.ground_truth.files == ["minilib/stats.py"]
        assert task.ground_truth.functions[0].startswith("minilib.stats:")
        assert set(task.FAIL_TO_PASS).isdisjoint(task.PASS_TO_PASS)
        assert len(task.FAIL_TO_PASS) + len(task.PASS_TO_PASS) == 5
        assert "tests/test_stats.py" in task.test_files and "-o addopts=" in task.test_command


@pytest.mark.slow
def test_snapshot_has_exactly_one_commit_and_no_other_object(built: Built):
    for task in built.tasks:
        repo = str(task.snapshot_dir)
        commits = subprocess.run(
            ["git", "-C", repo, "rev-list", "--all"], capture_output=True, text=True, check=True
        ).stdout.split()
        assert commits == [task.base_commit]
        unreachable = subprocess.run(
            ["git", "-C", repo, "fsck", "--unreachable", "--no-reflogs", "--no-progress"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert unreachable == ""
        status = subprocess.run(
            ["git", "-C", repo, "status", "--porcelain", "--ignored"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert status == ""


@pytest.mark.slow
def test_problem_statement_names_neither_the_file_nor_the_diff(built: Built):
    for task in built.tasks:
        statement = task.problem_statement
        assert "minilib/stats.py" not in statement and "stats.py" not in statement
        assert "minilib.stats" not in statement
        changed = [
            line[1:].strip()
            for line in task.patch.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---")) and line[1:].strip()
        ]
        assert changed and not any(line in statement for line in changed if len(line) >= 6)
        assert "`test_" in statement  # written from the failing test


def test_statement_leak_check_refuses_the_location_and_changed_lines():
    secret = Secret(
        file="pkg/core.py",
        module="pkg.core",
        patch="--- a/pkg/core.py\n+++ b/pkg/core.py\n-    return a - b\n+    return a + b\n",
    )
    assert secret.leaks("see pkg/core.py") and secret.leaks("in core.py")
    assert secret.leaks("from pkg.core import add") and secret.leaks("x = 1\nreturn a + b")
    assert not secret.leaks("from pkg import add\nprint(add(1, 2))  # expected: 3")


def test_statements_name_the_librarys_exceptions_by_class_not_by_module(tmp_path: Path):
    secret = Secret(
        file="pkg/core.py",
        module="pkg.core",
        patch="--- a/pkg/core.py\n+++ b/pkg/core.py\n-    return a - b\n+    return a + b\n",
    )
    test = "tests/test_core.py::test_remap"
    failure = Failure(statement="remap(data)", errors=["pkg.core.PathAccessError: no 'x'"])
    statement = write_statement("pkg", "1.0", tmp_path, [test], {test: failure}, secret, "s")
    assert statement is not None and "fails with PathAccessError" in statement
    assert "PathAccessError: no 'x'" in statement and "pkg.core" not in statement


@pytest.mark.slow
def test_gold_patch_episode_earns_reward_one(built: Built):
    task = built.tasks[0]
    env = gym.make(
        "AutoCompact-SWE-v0", task_source=str(built.task_file), sandbox=SANDBOX, max_steps=5
    )
    try:
        trajectory = rollout(env, GoldPatchPolicy(task), options={"task_id": task.instance_id})
    finally:
        env.close()
    assert trajectory.end is not None and trajectory.end.reward == 1.0


@pytest.mark.slow
def test_test_files_are_restored_before_grading(built: Built, tmp_path: Path):
    task = built.tasks[0]
    work = tmp_path / "work"
    shutil.copytree(str(task.snapshot_dir), work)
    # The F2P tests "fixed" by rewriting them: the rewrite is dropped, the bug still fails.
    tests = (work / "tests/test_stats.py").read_text()
    cheat = tests.replace("assert ", "assert True or ")
    cheating = diff_after(work, {"tests/test_stats.py": cheat})
    result = grade(task, cheating, LocalSandbox(isolation=ISOLATION))
    assert result.patch_applied and result.resolved is False and result.reward == 0.0
    # The same rewrite with the real fix: only the fix counts.
    both = diff_after(
        work,
        {"tests/test_stats.py": cheat, "minilib/stats.py": STATS},
    )
    assert grade(task, both, LocalSandbox(isolation=ISOLATION)).resolved is True


@pytest.mark.slow
def test_an_interrupted_build_resumes(built: Built, tmp_path: Path):
    """Interrupted while writing the 11th mutant's result and after the first task: the
    resumed build tests the missing mutants only and remakes the missing tasks."""
    out = tmp_path / "resumed"
    shutil.copytree(built.library_dir, out / "minilib-0.1", symlinks=True)
    directory = out / "minilib-0.1"
    mutants = (directory / "mutants.jsonl").read_text().splitlines()
    (directory / "mutants.jsonl").write_text("\n".join(mutants[:10]) + '\n{"key": "tr')
    made = (directory / "made.jsonl").read_text().splitlines()
    (directory / "made.jsonl").write_text(made[0] + "\n")
    for task in built.tasks[1:]:
        shutil.rmtree(directory / "snapshots" / task.instance_id)
    build([str(built.sdists["minilib"])], options(out, max_per_function=99))
    lines = (directory / "mutants.jsonl").read_text().splitlines()
    assert lines[:10] == mutants[:10] and len(lines) == len(mutants)
    assert {json.loads(line)["key"] for line in lines} == {json.loads(m)["key"] for m in mutants}
    resumed = load_tasks(str(out / "tasks.jsonl"))
    assert [t.instance_id for t in resumed] == [t.instance_id for t in built.tasks]
    assert all(t.snapshot_dir is not None and t.snapshot_dir.is_dir() for t in resumed)


@pytest.mark.slow
def test_tasks_are_spread_over_functions(built: Built, tmp_path: Path):
    per_function = Counter(t.ground_truth.functions[0] for t in built.tasks if t.ground_truth)
    assert per_function["minilib.stats:sign"] > 1  # uncapped
    (report,) = build([str(built.sdists["minilib"])], options(tmp_path, max_per_function=1))
    functions = [t.ground_truth.functions[0] for t in load_tasks(str(tmp_path / "tasks.jsonl"))]
    assert sorted(functions) == ["minilib.stats:mean", "minilib.stats:sign"]
    assert report.capped > 0 and report.tried + report.capped == report.candidates


def release(root: Path, version: str) -> Path:
    files = library_files()
    files["PKG-INFO"] = files["PKG-INFO"].replace("0.1", version)
    files["pyproject.toml"] = files["pyproject.toml"].replace('"0.1"', f'"{version}"')
    return make_sdist(root, "minilib", version, files)


@pytest.mark.slow
def test_a_bare_name_is_the_latest_version_resolved_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Offline: pip reads a folder of sdists (building their metadata with the venv's
    setuptools); a failed download leaves no folder behind."""
    links = tmp_path / "links"
    release(links, "0.1")
    release(links, "0.2")
    for name, value in {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(links),
        "PIP_NO_BUILD_ISOLATION": "false",
    }.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "out"
    out.mkdir()
    assert resolve_latest("minilib", out) == "minilib==0.2"
    assert (out / "minilib-0.2" / "sdist" / "minilib-0.2.tar.gz").is_file()
    release(links, "0.3")  # a later release does not move the build
    assert resolve_latest("minilib", out) == "minilib==0.2"
    assert json.loads((out / "versions.json").read_text()) == {"minilib": "0.2"}
    report, _ = build_library("no-such-library==1.0", options(out))
    assert report.status == "skipped" and report.reason.startswith("pip download failed")
    assert not (out / "no-such-library-1.0").exists()


def test_the_report_line_names_test_files_that_do_not_collect():
    report = LibraryReport(
        library="x 1.0", status="built", tests=3, ignored_files=2, collection_error="E: no"
    )
    assert "3 tests (test files that do not collect: 2, first: E: no), baseline" in report.line()


def test_library_specs_parse():
    assert parse_source("more-itertools==11.2.1").slug == "more-itertools-11.2.1"
    assert parse_source("/x/boltons-26.2.0.tar.gz").version == "26.2.0"
    with pytest.raises(ValueError, match="NAME==VERSION"):
        parse_source("toolz")


@pytest.mark.slow
def test_task_file_row_validates_against_the_task_model(built: Built):
    row = json.loads(built.task_file.read_text().splitlines()[0])
    row["snapshot_dir"] = str(built.task_file.parent / row["snapshot_dir"])
    assert Task.model_validate(row).instance_id == built.tasks[0].instance_id


def test_failures_are_read_from_a_real_pytest_log(tmp_path: Path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "import pytest\n\n\n"
        "def helper(x):\n    return int(x)\n\n\n"
        "def test_value():\n    assert [1, 2] == [1, 3]\n\n\n"
        "class TestGroup:\n    def test_raises(self):\n        assert helper('x') == 1\n\n\n"
        "@pytest.mark.parametrize('n', [1, 2])\ndef test_param(n):\n    assert n == 1\n"
    )
    log = subprocess.run(
        ["/usr/bin/python3", "-m", "pytest", "-rA", "--tb=short", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    ).stdout
    failing = [
        "tests/test_x.py::test_value",
        "tests/test_x.py::TestGroup::test_raises",
        "tests/test_x.py::test_param[2]",
    ]
    found = parse_failures(log, failing)
    assert found[failing[0]].statement == "assert [1, 2] == [1, 3]"
    assert found[failing[0]].errors[0].endswith("assert [1, 2] == [1, 3]")
    assert found[failing[1]].statement == "assert helper('x') == 1"
    assert found[failing[1]].exception == "ValueError"
    assert found[failing[2]].errors == ["assert 2 == 1"]


def test_layout_finds_tests_and_public_modules(tmp_path: Path):
    for path in [
        "pkg/__init__.py",
        "pkg/core.py",
        "pkg/_impl.py",
        "pkg/tests/test_core.py",
        "pkg/tests/data.txt",
        "tests/conftest.py",
        "docs/conf.py",
        "setup.py",
    ]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    layout = inspect_layout(tmp_path)
    assert layout.source_modules == ["pkg/__init__.py", "pkg/core.py"]
    assert layout.test_files == [
        "pkg/tests/data.txt",
        "pkg/tests/test_core.py",
        "tests/conftest.py",
    ]
    assert layout.python_path is None and layout.module_name("pkg/core.py") == "pkg.core"


def test_candidates_are_public_and_spread_over_functions():
    mutations = find_mutations("minilib/stats.py", STATS)
    public = [m for m in mutations if is_public(m.function)]
    assert {m.function for m in mutations} - {m.function for m in public} == {"_bump"}
    ordered = schedule(public)
    assert sorted(m.key() for m in ordered) == sorted(m.key() for m in public)
    assert {m.function for m in ordered[:2]} == {"sign", "mean"}
    assert is_public("Cls.__init__") and not is_public("_Cls.method")


@pytest.mark.slow
def test_mined_task_grades_agree_with_swebench(built: Built, tmp_path: Path):
    from swebench_verdict import swebench_resolved

    task = built.tasks[0]
    for patch, resolved in ((task.patch, True), ("", False)):
        result = grade(task, patch, LocalSandbox(isolation=ISOLATION))
        assert result.resolved is resolved
        assert swebench_resolved(task, result, tmp_path) is resolved


@pytest.mark.slow
def test_a_real_sdist_from_pypi(tmp_path: Path):
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        pytest.skip("PyPI is not reachable")
    (report,) = build(["toolz==1.2.0"], options(tmp_path, max_candidates=2, slow_test_s=0.25))
    assert report.status == "built", report.reason
    assert report.tests > 150 and report.tried == 2
    assert (tmp_path / "toolz-1.2.0" / "sdist" / "toolz-1.2.0.tar.gz").is_file()
    for task in load_tasks(str(tmp_path / "tasks.jsonl")):
        assert task.repo == "pypi/toolz" and task.FAIL_TO_PASS
