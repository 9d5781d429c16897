"""The built-in suite: counts, held-out evaluation set, determinism, leaks, sizes."""

import ast
import dataclasses
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from ac_env.tasks import git_repo
from ac_env.tasks.synthetic.catalog import calls_bug_directly, single_id
from ac_env.tasks.synthetic.profiles import EVAL_SEED_OFFSET, PROFILES
from ac_env.tasks.synthetic.suite import (
    build_task,
    builtin_tasks,
    location_of,
    plan_suite,
    task_subset,
)


def sample_plans():
    """Of every split, the first train task with a deprecated copy of the buggy module and the
    first eval task without one."""
    chosen = {}
    for plan in plan_suite():
        if plan.bug_copy == (plan.subset == "train"):
            chosen.setdefault((plan.split, plan.subset), plan)
    return list(chosen.values())


@pytest.fixture(scope="module")
def sample_tasks(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUTOCOMPACT_CACHE", str(tmp_path_factory.mktemp("cache")))
        return builtin_tasks(sample_plans())


def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)


def repo_files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def test_suite_has_configured_counts_per_split_and_subset():
    counts = Counter((plan.split, plan.subset) for plan in plan_suite())
    for name, profile in PROFILES.items():
        assert counts[(name, "train")] == profile.train_tasks
        assert counts[(name, "eval")] == profile.eval_tasks
    assert sum(counts.values()) >= 200


def test_tasks_are_distinct():
    plans = plan_suite()
    assert len({p.instance_id for p in plans}) == len(plans)
    assert len({(p.split, p.entry.id) for p in plans}) == len(plans)
    assert len({p.entry.id for p in plans}) >= 150


def test_train_and_eval_never_share_seeds_or_bugs():
    plans = plan_suite()
    train = [p for p in plans if p.subset == "train"]
    held_out = [p for p in plans if p.subset == "eval"]
    assert max(p.seed for p in train) < EVAL_SEED_OFFSET <= min(p.seed for p in held_out)

    def bugs(plans):
        return {single_id(p.entry.domain, m) for p in plans for m in p.entry.mutations}

    assert not bugs(train) & bugs(held_out)


def test_two_bug_tasks_report_both_symptoms():
    for name, profile in PROFILES.items():
        for subset in ("train", "eval"):
            plans = [p for p in plan_suite() if p.split == name and p.subset == subset]
            two_bug = [p for p in plans if len(p.entry.mutations) == 2]
            assert len(two_bug) <= round(len(plans) * profile.two_bug_share)
            if subset == "train":
                assert bool(two_bug) == (profile.two_bug_share > 0)
            for plan in two_bug:
                first, second = plan.entry.mutations
                assert (first.file, first.function) != (second.file, second.function)
                assert plan.problem_statement.count("```python") == 2


def test_statements_never_name_the_bug_location_or_show_the_fix():
    for plan in plan_suite():
        statement = plan.problem_statement
        assert not location_of(plan.entry).leaks(statement), plan.instance_id
        assert "diff --git" not in statement
        for mutation in plan.entry.mutations:
            assert mutation.file not in statement
            assert not re.search(rf"\b{re.escape(mutation.function.split('.')[-1])}\b", statement)


def test_report_test_reaches_the_bug_through_another_function():
    for plan in plan_suite():
        assert plan.report_test in plan.entry.fail_to_pass
        assert not calls_bug_directly(plan.entry, plan.report_test), plan.instance_id
        if not PROFILES[plan.split].allow_direct:
            assert not any(calls_bug_directly(plan.entry, t) for t in plan.entry.fail_to_pass)


def test_same_plan_renders_identical_snapshots_and_tasks(tmp_path):
    plan = sample_plans()[0]
    first = build_task(plan, tmp_path / "one")
    second = build_task(plan, tmp_path / "two")
    assert repo_files(first.snapshot_dir) == repo_files(second.snapshot_dir)
    assert first.model_dump(exclude={"snapshot_dir"}) == second.model_dump(exclude={"snapshot_dir"})


def test_snapshot_is_one_clean_commit_without_the_fix(sample_tasks):
    for task in sample_tasks:
        repo = task.snapshot_dir
        assert git(repo, "rev-list", "--count", "HEAD").stdout.strip() == "1"
        assert git(repo, "rev-parse", "HEAD").stdout.strip() == task.base_commit
        assert git(repo, "status", "--porcelain").stdout == ""
        check = subprocess.run(
            ["git", "apply", "--check", "-"],
            cwd=repo,
            input=task.patch,
            text=True,
            capture_output=True,
        )
        assert check.returncode == 0, check.stderr
        already = subprocess.run(
            ["git", "apply", "--check", "-R", "-"],
            cwd=repo,
            input=task.patch,
            text=True,
            capture_output=True,
        )
        assert already.returncode != 0
        contents = repo_files(repo)
        for path, data in contents.items():
            assert not re.search(r"gold|patch|mutant|mutation", path), path
            assert b"diff --git" not in data
        assert all(task.instance_id not in data.decode() for data in contents.values())


def test_ground_truth_matches_the_gold_patch(sample_tasks):
    for task in sample_tasks:
        changed = re.findall(r"^diff --git a/(\S+) ", task.patch, re.M)
        assert task.ground_truth.files == sorted(changed)
        for qualified in task.ground_truth.functions:
            module, function = qualified.split(":")
            source = (task.snapshot_dir / (module.replace(".", "/") + ".py")).read_text()
            names = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
            assert function.split(".")[-1] in names


def test_fail_to_pass_visibility_per_split(sample_tasks):
    for task in sample_tasks:
        for test in task.FAIL_TO_PASS:
            path, name = test.split("::")
            in_snapshot = f"def {name}(" in (task.snapshot_dir / path).read_text()
            if task.split == "hard":
                assert not in_snapshot
                assert f"+def {name}(" in task.test_patch
            else:
                assert in_snapshot
                assert task.test_patch == ""
        assert set(task.test_files) >= {t.split("::")[0] for t in task.FAIL_TO_PASS}


def test_hard_test_patch_applies_to_the_snapshot(sample_tasks):
    for task in (t for t in sample_tasks if t.split == "hard"):
        result = subprocess.run(
            ["git", "apply", "--check", "-"],
            cwd=task.snapshot_dir,
            input=task.test_patch,
            text=True,
            capture_output=True,
        )
        assert result.returncode == 0, result.stderr


def size_facts(task):
    root = task.snapshot_dir
    files = repo_files(root)
    package = task.repo.split("/")[1]
    modules = [p for p in files if p.startswith(f"{package}/") and p.endswith(".py")]
    lines = sum(data.count(b"\n") for data in files.values())
    return len(modules), lines


def test_sizes_per_split(sample_tasks):
    facts = {}
    for task in sample_tasks:
        modules, lines = size_facts(task)
        assert 10 <= modules <= 60, (task.instance_id, modules)
        assert 1_000 <= lines <= 20_000, (task.instance_id, lines)
        facts.setdefault(task.split, []).append(lines)
    assert min(facts["context-stress"]) > 3 * max(facts["easy"])


def test_context_stress_is_noisy(sample_tasks):
    for task in (t for t in sample_tasks if t.split == "context-stress"):
        assert 'log_level = "DEBUG"' in (task.snapshot_dir / "pyproject.toml").read_text()
        assert list((task.snapshot_dir / "logs").glob("*.log"))
        assert "_log_test_setup" in (task.snapshot_dir / "tests" / "conftest.py").read_text()


def test_at_most_a_quarter_of_each_split_keeps_a_copy_of_the_buggy_module():
    for name in PROFILES:
        for subset in ("train", "eval"):
            plans = [p for p in plan_suite() if p.split == name and p.subset == subset]
            copies = sum(p.bug_copy for p in plans)
            assert 0 < copies <= len(plans) // 4, (name, subset, copies)


def legacy_copies(task):
    return sorted(p.name for p in task.snapshot_dir.rglob("legacy/*_v1.py"))


def test_deprecated_copies_hold_the_buggy_function_only_where_planned(sample_tasks):
    for plan, task in zip(sample_plans(), sample_tasks, strict=True):
        bug_files = {Path(m.file).stem for m in plan.entry.mutations}
        copied = {name.removesuffix("_v1.py") for name in legacy_copies(task)}
        assert copied & bug_files == (bug_files if plan.bug_copy else set()), task.instance_id
        name = task.ground_truth.functions[0].split(":")[1].split(".")[-1]
        hits = [
            p
            for p in task.snapshot_dir.rglob("*.py")
            if re.search(rf"def {re.escape(name)}\(", p.read_text())
        ]
        if plan.bug_copy:
            assert len(hits) >= 2, task.instance_id


def test_tasks_with_and_without_a_copy_keep_as_many_deprecated_modules(sample_tasks):
    for plan, task in zip(sample_plans(), sample_tasks, strict=True):
        bugs = len({m.file for m in plan.entry.mutations})
        wanted = max(PROFILES[plan.split].legacy_modules, bugs)
        assert len(legacy_copies(task)) == wanted, task.instance_id


def test_deprecated_copy_predates_the_bug_and_has_slips_of_its_own(sample_tasks):
    for plan, task in zip(sample_plans(), sample_tasks, strict=True):
        if not plan.bug_copy:
            continue
        for section in task.patch.split("diff --git a/")[1:]:
            path = section.split(" ", 1)[0]
            lines = section.splitlines()
            restored = [line[1:] for line in lines if line[:1] == "+" and line[:3] != "+++"]
            legacy = next(task.snapshot_dir.rglob(f"legacy/{Path(path).stem}_v1.py"))
            copy = legacy.read_text().splitlines()
            assert all(line in copy for line in restored), (task.instance_id, path)
            current = set((task.snapshot_dir / path).read_text().splitlines())
            body = copy[copy.index('"""', 1) + 1 :]  # after the deprecation docstring
            differing = [line for line in body if line not in current]
            assert len(differing) > len(restored), task.instance_id  # the copy's own slips


def test_task_subset_reads_the_instance_id(sample_tasks):
    assert {task_subset(t) for t in sample_tasks} == {"train", "eval"}


def test_cached_tasks_are_reused(sample_tasks, monkeypatch):
    cache = sample_tasks[0].snapshot_dir.parent.parent.parent
    monkeypatch.setenv("AUTOCOMPACT_CACHE", str(cache))

    def refuse(*args, **kwargs):
        raise AssertionError("a cached task was built again")

    monkeypatch.setattr("ac_env.tasks.synthetic.suite.write_repo", refuse)
    again = builtin_tasks(sample_plans())
    assert [t.model_dump() for t in again] == [t.model_dump() for t in sample_tasks]


def test_interrupted_snapshot_leaves_nothing(tmp_path, monkeypatch):
    def explode(root):
        (root / "half.py").write_text("x = 1\n")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        git_repo.write_repo(tmp_path / "task", "msg", explode)
    assert list(tmp_path.iterdir()) == []


def test_profile_knobs_change_repository_size(tmp_path):
    plan = sample_plans()[0]
    profile = PROFILES[plan.split]
    small = build_task(plan, tmp_path / "small")
    big = build_task(
        plan, tmp_path / "big", dataclasses.replace(profile, data_rows=5_000, contrib_modules=12)
    )
    small_modules, small_lines = size_facts(small)
    big_modules, big_lines = size_facts(big)
    assert big_modules == small_modules + 12 - profile.contrib_modules
    assert big_lines > small_lines + 5_000 - profile.data_rows
