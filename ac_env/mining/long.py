"""``ac-env tasks long``: long-horizon tasks, each several independent mined bugs at once.

From a built library (``<build>/<slug>/``: ``repo/``, ``baseline.json``, ``tasks.jsonl``),
groups of single-bug tasks are drawn, deterministically from the seed: bugs in different
functions (at most ``per_file`` in one file) whose failing tests are disjoint, each bug used
as evenly as the groups allow (with ``solved_alone``, only bugs ``<slug>/solo.jsonl`` records
the reference agent fixing alone). A group becomes a task when the combined mutant (every
bug's gold patch reversed, one after another) fails exactly the union
of the bugs' failing tests and passes the rest of the baseline's tests (bugs can interact),
when its statement lists each bug's symptom without naming any bug's place, and when the
environment's grader resolves the combined gold patch and does not resolve the empty one.

A long task is an ordinary ``Task`` with ``split="long"``: its ``patch`` is the combined gold
patch against the library's unmutated ``repo/`` (so ``repo/`` plus the reversed patch is the
buggy snapshot, ``<slug>/long/<instance_id>/``, one commit), FAIL_TO_PASS the union of the
bugs' failing tests, PASS_TO_PASS the rest, and the ground truth every bug's file, function
and operator. ``<slug>/long.jsonl`` is the library's task file, ``<build>/long.jsonl`` every
library's. Each group's outcome is appended to ``<slug>/long_made.jsonl`` as it is known, so
an interrupted run resumes.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ac_env.grading import grade
from ac_env.mining.baseline import Baseline
from ac_env.mining.build import write_task_file
from ac_env.mining.layout import Layout, inspect_layout
from ac_env.mining.runner import SuiteRun, SuiteRunner, base_task
from ac_env.mining.sdist import SourceError, commit_tree, copy_tree, git
from ac_env.mining.statement import Secret, by_class_name, display_name, symptom_bodies
from ac_env.mining.task import GRADING_TIMEOUT_S, TaskRejected
from ac_env.paths import safe_child
from ac_env.pytest_log import Outcome
from ac_env.records import append_jsonl, read_jsonl
from ac_env.sandbox.local import Isolation, LocalSandbox
from ac_env.tasks.model import GroundTruth, Task
from ac_env.tasks.swebench_file import read_task_file
from ac_env.tasks.synthetic.statements import CLOSINGS

MAX_GROUPS_TRIED = 8
"""Groups tried per task wanted: composing stops after ``MAX_GROUPS_TRIED * per_library``."""


SUITE_TIMEOUT_S = 120.0
"""The least time a combined mutant's suite run gets (a loaded machine runs slowly)."""

SOLO_FILE = "solo.jsonl"
"""``<slug>/solo.jsonl``: the reference agent's run on each single-bug task, alone
(written by ``python -m ac_env.bench.solo``)."""


class LongOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    build_dir: Path
    per_library: int = Field(default=16, ge=1, description="long tasks per library")
    min_bugs: int = Field(default=2, ge=2, description="fewest bugs in a task")
    max_bugs: int = Field(default=4, ge=2, description="most bugs in a task")
    per_file: int = Field(
        default=1, ge=1, description="most bugs from one file (each in its own functions)"
    )
    max_failing: int | None = Field(
        default=None,
        ge=1,
        description="most failing tests in a task, all bugs together: every test run of the "
        "agent's, before the last bug is fixed, lists the failures of the bugs still left",
    )
    seed: int = Field(default=0, description="which groups of bugs are drawn")
    isolation: Isolation = "bwrap"
    solved_alone: bool = Field(
        default=False, description=f"draw only bugs the reference agent fixed alone ({SOLO_FILE})"
    )
    solo_peak_at_most: int | None = Field(
        default=None,
        gt=0,
        description="with solved_alone: only bugs whose solo run's context peaked at most this "
        "many tokens (so that each bug's own repair fits a window compacted after each fix)",
    )

    @model_validator(mode="after")
    def _bug_range(self) -> LongOptions:
        if self.min_bugs > self.max_bugs:
            raise ValueError(f"bugs: {self.min_bugs}-{self.max_bugs} is not a range")
        if self.solo_peak_at_most is not None and not self.solved_alone:
            raise ValueError("solo_peak_at_most filters the solo runs: it needs solved_alone")
        return self


class LongMade(BaseModel):
    """One line of ``long_made.jsonl``: a group's task, or why it did not become one."""

    key: str
    members: list[str]
    task: Task | None = None
    reason: str = ""


class SoloRun(BaseModel):
    """One line of ``solo.jsonl``: the reference agent on one single-bug task, alone."""

    model_config = ConfigDict(extra="forbid")

    instance_id: str
    solved: bool
    steps: int
    peak_context: int
    exit_reason: str


def solved_alone(
    directory: Path, singles: list[Task], peak_at_most: int | None = None
) -> list[Task]:
    """The tasks of ``singles`` that ``directory/solo.jsonl`` records as solved alone (with a
    context peak of at most ``peak_at_most`` tokens); every task must have a record there (a
    partial file would silently shrink the pool)."""
    path = directory / SOLO_FILE
    runs = {run.instance_id: run for run in read_jsonl(path, SoloRun)}
    missing = [task.instance_id for task in singles if task.instance_id not in runs]
    if missing:
        raise FileNotFoundError(
            f"{path}: no solo run of {len(missing)} task(s) (first {missing[0]}); run "
            f"`python -m ac_env.bench.solo {directory.parent} --libraries {directory.name}`"
        )
    limit = peak_at_most if peak_at_most is not None else float("inf")
    return [
        task
        for task in singles
        if runs[task.instance_id].solved and runs[task.instance_id].peak_context <= limit
    ]


def parse_bug_range(text: str) -> tuple[int, int]:
    """``"2-4"`` -> (2, 4); ``"3"`` -> (3, 3)."""
    low, _, high = text.partition("-")
    try:
        return int(low), int(high or low)
    except ValueError:
        raise ValueError(f"--bugs: {text!r} is not N or N-M") from None


def _file(task: Task) -> str:
    if task.ground_truth is None or len(task.ground_truth.files) != 1:
        raise ValueError(f"{task.instance_id}: a single-bug task names exactly one file")
    return task.ground_truth.files[0]


def group_key(members: list[Task]) -> str:
    ids = "\n".join(sorted(task.instance_id for task in members))
    return hashlib.sha256(ids.encode()).hexdigest()[:10]


def draw_groups(tasks: list[Task], options: LongOptions, salt: str) -> Iterator[list[Task]]:
    """Groups of bugs in different functions with disjoint failing tests, at most
    ``options.per_file`` from one file, each group new and drawn from the least used bugs
    first; deterministic for a seed and a task list. ``options.max_failing`` filters the
    groups drawn (the draws stay those of the uncapped run, so a cap keeps its groups that fit
    under it)."""
    rng = random.Random(f"{options.seed}:{salt}")
    used: Counter[str] = Counter()
    seen: set[str] = set()
    for _ in range(MAX_GROUPS_TRIED * options.per_library):
        size = rng.randint(options.min_bugs, options.max_bugs)
        ranked = sorted(tasks, key=lambda t: (used[t.instance_id], rng.random()))
        group: list[Task] = []
        for task in ranked:
            files = Counter(_file(member) for member in group)
            functions = {name for member in group for name in _truth(member).functions}
            failing = {test for member in group for test in member.FAIL_TO_PASS}
            if (
                files[_file(task)] < options.per_file
                and functions.isdisjoint(_truth(task).functions)
                and failing.isdisjoint(task.FAIL_TO_PASS)
            ):
                group.append(task)
            if len(group) == size:
                break
        if len(group) < options.min_bugs:
            return  # too few files or too many shared tests for even the smallest group
        key = group_key(group)
        if key in seen:
            continue
        seen.add(key)
        used.update(task.instance_id for task in group)
        failing_count = sum(len(task.FAIL_TO_PASS) for task in group)
        if options.max_failing is None or failing_count <= options.max_failing:
            yield group


class _Library:
    """A built library's base repo, baseline and layout, and a runner holding its repo."""

    def __init__(self, directory: Path, isolation: Isolation) -> None:
        self.directory = directory
        self.repo = directory / "repo"
        self.baseline = Baseline.model_validate_json((directory / "baseline.json").read_text())
        self.layout: Layout = inspect_layout(self.repo)
        self.isolation = isolation
        self.timeout_s = max(SUITE_TIMEOUT_S, 8 * self.baseline.duration_s)
        self._runner: SuiteRunner | None = None

    def run(self, files: dict[str, str]) -> SuiteRun:
        if self._runner is None:
            base = base_task(self.directory.name, self.repo, self.layout.test_files)
            self._runner = SuiteRunner(base, self.layout.python_path, self.isolation)
        return self._runner.run(
            files,
            deselect=self.baseline.deselected,
            ignore=self.baseline.ignored_files,
            timeout_s=self.timeout_s,
        )

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()


def _write_long_repo(
    library: _Library, members: list[Task], target: Path, message: str
) -> tuple[dict[str, str], str, str]:
    """Create ``target``, the base repo with every member's gold patch reversed, as one
    commit; return (the mutated files' texts, the combined gold patch, the commit)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{target.name}-", dir=target.parent) as scratch:
        staging = Path(scratch) / "repo"
        copy_tree(library.repo, staging)
        for index, member in enumerate(members):
            patch_file = Path(scratch) / f"{index}.diff"
            patch_file.write_text(member.patch, encoding="utf-8")
            try:
                git(staging, "apply", "-R", str(patch_file))
            except SourceError as error:  # two bugs of one file too close together
                raise TaskRejected(f"the bugs' patches overlap: {error}") from None
        paths = list(dict.fromkeys(_file(member) for member in members))
        mutated = {path: (staging / path).read_text(encoding="utf-8") for path in paths}
        commit_tree(staging, "scratch")
        for path in paths:
            shutil.copyfile(library.repo / path, staging / path)
        patch = git(staging, "diff", "--no-color", "--no-ext-diff", "HEAD")
        for path, text in mutated.items():
            (staging / path).write_text(text, encoding="utf-8")
        shutil.rmtree(staging / ".git")
        commit = commit_tree(staging, message)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return mutated, patch, commit


def _check_combined(run: SuiteRun, baseline: Baseline, union: set[str]) -> str | None:
    """None when the combined mutant fails exactly ``union`` and passes the rest."""
    if run.timed_out:
        return "the combined mutant's run timed out"
    if run.collection_errors():
        return "the combined mutant breaks collection"
    failing = set(run.failing(baseline.tests))
    if failing != union:
        return (
            f"the bugs interact: {len(union - failing)} of their failing tests pass and "
            f"{len(failing - union)} other tests fail together"
        )
    if any(
        run.outcomes.get(test) != Outcome.PASSED for test in baseline.tests if test not in union
    ):
        return "the combined mutant changes other tests' outcomes"
    return None


def _secret(library: _Library, member: Task) -> Secret:
    path = _file(member)
    return Secret(file=path, module=library.layout.module_name(path), patch=member.patch)


def long_statement(
    package: str,
    version: str,
    repo: Path,
    members: list[Task],
    run: SuiteRun,
    secrets: list[Secret],
    seed: str,
) -> str | None:
    """A report listing each bug's symptom (its first failing test that gives a text naming
    no bug's place) and its other failing tests; None when some bug has no such text."""
    rng = random.Random(seed)
    total = sum(len(member.FAIL_TO_PASS) for member in members)
    parts = [
        f"### {total} failing tests in {package} {version}",
        f"On a checkout of {package} {version}, running the test suite gives {total} failing "
        "tests. They fail in different ways; each problem below lists one failing test in "
        "detail and the tests that fail along with it.",
    ]
    for number, member in enumerate(members, start=1):
        body = _symptom(repo, member, run, secrets)
        if body is None:
            return None
        test, text = body
        parts += [f"#### Problem {number}", text]
        others = [display_name(t) for t in member.FAIL_TO_PASS if t != test]
        if others:
            parts.append("Also failing: " + ", ".join(f"`{name}`" for name in others) + ".")
    parts.append("Expected: all of these tests pass, without changing the tests.")
    closing = rng.choice(CLOSINGS)
    if closing:
        parts.append(closing)
    statement = "\n\n".join(parts) + "\n"
    return None if any(secret.leaks(statement) for secret in secrets) else statement


def _symptom(
    repo: Path, member: Task, run: SuiteRun, secrets: list[Secret]
) -> tuple[str, str] | None:
    for test in member.FAIL_TO_PASS:
        failure = run.failures.get(test)
        if failure is None:
            continue
        for body in symptom_bodies(repo, test, by_class_name(failure)):
            if not any(secret.leaks(body) for secret in secrets):
                return test, body
    return None


def make_long_task(library: _Library, members: list[Task], key: str) -> Task:
    """The long task of ``members``, validated; ``TaskRejected`` says why it is not one."""
    first = members[0]
    package = first.repo.removeprefix("pypi/")
    iid = f"{library.directory.name}__long-{key}"
    snapshot = safe_child(library.directory, "long", iid)
    message = f"Import {package} {first.version}"
    mutated, patch, commit = _write_long_repo(library, members, snapshot, message)
    try:
        return _validated(library, members, iid, snapshot, mutated, patch, commit)
    except TaskRejected:
        shutil.rmtree(snapshot)
        raise


def _validated(
    library: _Library,
    members: list[Task],
    iid: str,
    snapshot: Path,
    mutated: dict[str, str],
    patch: str,
    commit: str,
) -> Task:
    baseline = library.baseline
    union = {test for member in members for test in member.FAIL_TO_PASS}
    run = library.run(mutated)
    problem = _check_combined(run, baseline, union)
    if problem is not None:
        raise TaskRejected(problem)
    first = members[0]
    secrets = [_secret(library, member) for member in members]
    statement = long_statement(
        first.repo.removeprefix("pypi/"), first.version, snapshot, members, run, secrets, iid
    )
    if statement is None:
        raise TaskRejected("some bug has no failing test giving a statement free of the places")
    task = Task(
        instance_id=iid,
        repo=first.repo,
        problem_statement=statement,
        patch=patch,
        FAIL_TO_PASS=[test for test in baseline.tests if test in union],
        PASS_TO_PASS=[test for test in baseline.tests if test not in union],
        base_commit=commit,
        version=first.version,
        split="long",
        snapshot_dir=snapshot,
        test_files=first.test_files,
        test_command=first.test_command,
        ground_truth=GroundTruth(
            files=list(dict.fromkeys(_file(member) for member in members)),
            functions=[f for member in members for f in _truth(member).functions],
            operators=[o for member in members for o in _truth(member).operators],
        ),
    )
    fixed = grade(task, task.patch, LocalSandbox(isolation=library.isolation), GRADING_TIMEOUT_S)
    if fixed.resolved is not True:
        raise TaskRejected(f"the gold patch does not resolve the task: {fixed.reason}")
    empty = grade(task, "", LocalSandbox(isolation=library.isolation), GRADING_TIMEOUT_S)
    if empty.resolved is not False:
        raise TaskRejected(f"the empty patch is not graded unresolved: {empty.reason}")
    return task


def _truth(task: Task) -> GroundTruth:
    assert task.ground_truth is not None  # checked by _file when the group was drawn
    return task.ground_truth


def compose_library(directory: Path, options: LongOptions) -> list[Task]:
    """Up to ``options.per_library`` long tasks of the library built in ``directory``."""
    singles = [task for task in read_task_file(directory / "tasks.jsonl") if task.split != "long"]
    if options.solved_alone:
        singles = solved_alone(directory, singles, options.solo_peak_at_most)
    made_path = directory / "long_made.jsonl"
    made = {record.key: record for record in read_jsonl(made_path, LongMade)}
    library = _Library(directory, options.isolation)
    tasks: list[Task] = []
    try:
        for members in draw_groups(singles, options, directory.name):
            if len(tasks) >= options.per_library:
                break
            key = group_key(members)
            record = made.get(key)
            if record is not None and record.task is not None:
                snapshot = safe_child(directory, "long", record.task.instance_id)
                if (snapshot / ".git").is_dir():
                    tasks.append(record.task.model_copy(update={"snapshot_dir": snapshot}))
                    continue
            elif record is not None:
                continue
            ids = [member.instance_id for member in members]
            try:
                record = LongMade(key=key, members=ids, task=make_long_task(library, members, key))
                tasks.append(record.task)  # type: ignore[arg-type]
            except TaskRejected as error:
                record = LongMade(key=key, members=ids, reason=str(error))
            made[key] = record
            append_jsonl(made_path, record)
    finally:
        library.close()
    write_task_file(directory / "long.jsonl", tasks)
    return tasks


def compose(options: LongOptions, libraries: list[str] | None = None) -> list[Task]:
    """Long tasks for every library built under ``options.build_dir`` (or the named slugs),
    one line per library, and ``<build_dir>/long.jsonl`` with all of them."""
    directories = sorted(path.parent for path in options.build_dir.glob("*/tasks.jsonl"))
    if libraries is not None:
        directories = [safe_child(options.build_dir, slug) for slug in libraries]
    for directory in directories:
        if not (directory / "tasks.jsonl").is_file():
            raise FileNotFoundError(f"{directory}: no tasks.jsonl (build the library first)")
    for directory in directories:
        tasks = compose_library(directory, options)
        bugs = Counter(len(task.ground_truth.functions) for task in tasks if task.ground_truth)
        shape = ", ".join(f"{count} with {size} bugs" for size, count in sorted(bugs.items()))
        print(f"{directory.name}: {len(tasks)} long tasks ({shape or 'none'})", flush=True)
    every = [
        task
        for path in sorted(options.build_dir.glob("*/long.jsonl"))
        for task in read_task_file(path)
    ]
    write_task_file(options.build_dir / "long.jsonl", every)
    print(f"{len(every)} long tasks in {options.build_dir / 'long.jsonl'}", flush=True)
    return every
