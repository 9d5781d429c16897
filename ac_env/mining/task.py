"""A kept mutant becomes a task: its own one-commit snapshot holding the bug, the gold patch
(the mutation's inverse, as ``git diff`` writes it), the problem statement, and a check with
the environment's own grader that the gold patch resolves it.

The snapshot's history is one commit: the gold patch is computed in a scratch repository
whose ``.git`` is deleted before the snapshot's single commit is made, so no object of the
fixed file is left behind.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ac_env.grading import grade
from ac_env.mining.baseline import Baseline
from ac_env.mining.library import Library
from ac_env.mining.mutants import MutantResult
from ac_env.mining.runner import test_command
from ac_env.mining.sdist import commit_tree, copy_tree, git
from ac_env.mining.statement import Secret, write_statement
from ac_env.paths import safe_child
from ac_env.sandbox.local import Isolation, LocalSandbox
from ac_env.tasks.model import GroundTruth, Task
from ac_env.tasks.synthetic.mutations import apply_mutations

GRADING_TIMEOUT_S = 300.0


class TaskRejected(RuntimeError):
    """The mutant cannot become a valid task; the message says why."""


def instance_id(library: Library, result: MutantResult) -> str:
    """``<name>-<version>__<mutation key>``: says nothing about where the bug is."""
    return f"{library.source.slug}__{result.key}"


def _write_task_repo(library: Library, result: MutantResult, target: Path) -> tuple[str, str]:
    """Create ``target`` (the buggy repo, one commit); return (gold patch, commit)."""
    mutation = result.mutation
    original = (library.repo / mutation.file).read_text(encoding="utf-8")
    mutated = apply_mutations(original, [mutation])
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{target.name}-", dir=target.parent) as scratch:
        staging = Path(scratch) / "repo"
        copy_tree(library.repo, staging)
        (staging / mutation.file).write_text(mutated, encoding="utf-8")
        commit_tree(staging, "scratch")
        (staging / mutation.file).write_text(original, encoding="utf-8")
        patch = git(staging, "diff", "--no-color", "--no-ext-diff", "HEAD")
        (staging / mutation.file).write_text(mutated, encoding="utf-8")
        shutil.rmtree(staging / ".git")
        commit = commit_tree(staging, library.commit_message)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return patch, commit


def make_task(
    library: Library,
    baseline: Baseline,
    result: MutantResult,
    isolation: Isolation = "bwrap",
) -> Task:
    """The task of a kept mutant, validated by grading; ``TaskRejected`` if it is not valid."""
    mutation = result.mutation
    layout = library.layout
    module = layout.module_name(mutation.file)
    iid = instance_id(library, result)
    snapshot = safe_child(library.directory, "snapshots", iid)
    patch, commit = _write_task_repo(library, result, snapshot)
    statement = write_statement(
        library.source.name,
        library.source.version,
        snapshot,
        result.fail_to_pass,
        result.failures,
        Secret(file=mutation.file, module=module, patch=patch),
        seed=iid,
    )
    if statement is None:
        shutil.rmtree(snapshot)
        raise TaskRejected("no failing test gives a statement free of the bug's location")
    failing = set(result.fail_to_pass)
    task = Task(
        instance_id=iid,
        repo=f"pypi/{library.source.name}",
        problem_statement=statement,
        patch=patch,
        FAIL_TO_PASS=result.fail_to_pass,
        PASS_TO_PASS=[test for test in baseline.tests if test not in failing],
        test_order=baseline.tests,
        base_commit=commit,
        version=library.source.version,
        split="real",
        snapshot_dir=snapshot,
        test_files=layout.test_files,
        test_command=test_command(layout.python_path),
        ground_truth=GroundTruth(
            files=[mutation.file],
            functions=[f"{module}:{mutation.function}"],
            operators=[mutation.operator],
        ),
    )
    problem = check_by_grading(task, isolation)
    if problem is not None:
        shutil.rmtree(snapshot)
        raise TaskRejected(problem)
    return task


def check_by_grading(task: Task, isolation: Isolation = "bwrap") -> str | None:
    """None when the environment's grader resolves the gold patch, else why not. (That the
    bug fails FAIL_TO_PASS and keeps PASS_TO_PASS passing was seen twice by the mutant's
    runs, the second time with the failing tests run by id, as grading runs them.)"""
    fixed = grade(task, task.patch, LocalSandbox(isolation=isolation), GRADING_TIMEOUT_S)
    if fixed.resolved is not True:
        return f"the gold patch does not resolve the task: {fixed.reason}"
    return None
