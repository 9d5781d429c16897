"""The built-in task suite: which catalogued bug goes into which task, and the tasks
themselves, generated on first use and cached on disk.

Instance ids read ``synthetic__<domain>-<split>-<subset>-<seed>``. ``subset`` is ``train`` or
``eval``: the two never share a seed (evaluation seeds are offset by ``EVAL_SEED_OFFSET``)
nor a bug (each bug belongs to one subset, by a hash of its id; two-bug entries are made
of bugs of one subset), so the evaluation tasks are held out in both repository and bug.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from tqdm import tqdm

from ac_env.paths import safe_child
from ac_env.tasks.git_repo import cache_root, write_repo
from ac_env.tasks.impossible import SPLIT as IMPOSSIBLE_SPLIT
from ac_env.tasks.model import GroundTruth, Task
from ac_env.tasks.selection import check_choice, choose_ids
from ac_env.tasks.synthetic.catalog import (
    CATALOG_PATH,
    Catalog,
    CatalogEntry,
    calls_bug_directly,
    load_catalog,
)
from ac_env.tasks.synthetic.distractors import module_name
from ac_env.tasks.synthetic.domain import load_domain, write_files
from ac_env.tasks.synthetic.profiles import (
    BUG_COPY_SHARE,
    EVAL_SEED_OFFSET,
    PROFILES,
    SUBSETS,
    SplitProfile,
)
from ac_env.tasks.synthetic.project import render_project
from ac_env.tasks.synthetic.statements import BugLocation, Symptom, describe_failure, render_report

PACKAGE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class TaskPlan:
    """Everything that decides one task; rendering it is deterministic. ``bug_copy``: the
    repository keeps a deprecated copy of the buggy module (``BUG_COPY_SHARE``)."""

    instance_id: str
    split: str
    subset: str
    seed: int
    entry: CatalogEntry
    report_test: str
    problem_statement: str
    bug_copy: bool


def _stable_hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)


@cache
def suite_version() -> str:
    """Hash of everything that shapes the tasks: generator code, domains, catalogue."""
    digest = hashlib.sha256()
    paths = [
        *PACKAGE_DIR.glob("*.py"),
        *PACKAGE_DIR.rglob("*.txt"),
        *PACKAGE_DIR.rglob("*.json"),
        CATALOG_PATH,
    ]
    for path in sorted(set(paths)):
        if path.exists():
            digest.update(path.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def location_of(entry: CatalogEntry) -> BugLocation:
    return BugLocation(
        files=sorted({m.file for m in entry.mutations}),
        functions=sorted({m.function for m in entry.mutations}),
    )


def _write_report(catalog: Catalog, entry: CatalogEntry, seed: int) -> tuple[str, str] | None:
    """(report test, problem statement) for an entry, or None if none can be written.

    Each bug gets one symptom, from a test that its own single mutant breaks; the failure
    text comes from the entry's run (all of its bugs together).
    """
    domain = load_domain(entry.domain)
    rng = random.Random(f"report:{seed}")
    location = location_of(entry)
    chosen: list[tuple[str, Symptom]] = []
    for mutation in entry.mutations:
        own_tests = catalog.single(entry.domain, mutation).fail_to_pass
        candidates = sorted(own_tests)
        rng.shuffle(candidates)
        for test in candidates:
            path = test.split("::", 1)[0]
            symptom = describe_failure(
                test,
                domain.files[path],
                domain.files.get("tests/conftest.py", ""),
                entry.failing_statements.get(test, ""),
                entry.failure_messages.get(test, ""),
            )
            if symptom is not None and not location.leaks(symptom.snippet + symptom.observed):
                chosen.append((test, symptom))
                break
        else:
            return None
    statement = render_report(
        rng,
        [symptom for _, symptom in chosen],
        domain.package,
        domain.version,
        domain.user_roles,
        location,
    )
    return None if statement is None else (chosen[0][0], statement)


def _candidates(
    catalog: Catalog, profile: SplitProfile, subset: str, bugs: int
) -> list[CatalogEntry]:
    """Eligible entries with ``bugs`` bugs, ordered by a split-specific hash and interleaved
    across domains. An entry whose tests accept a generated wrong patch is never eligible."""
    by_domain: dict[str, list[CatalogEntry]] = {}
    for entry in catalog.entries:
        if len(entry.mutations) != bugs or entry.subset() != subset:
            continue
        if entry.wrong_patches_accepted != 0:
            continue
        if len(entry.fail_to_pass) > profile.max_fail_to_pass * bugs:
            continue
        if not profile.allow_direct and any(
            calls_bug_directly(entry, t) for t in entry.fail_to_pass
        ):
            continue
        by_domain.setdefault(entry.domain, []).append(entry)
    for entries in by_domain.values():
        entries.sort(key=lambda e: _stable_hash(f"{profile.name}:{e.id}"))
    ordered: list[CatalogEntry] = []
    for index in range(max((len(v) for v in by_domain.values()), default=0)):
        ordered.extend(v[index] for _, v in sorted(by_domain.items()) if index < len(v))
    return ordered


def _with_bug_copies(plans: list[TaskPlan]) -> list[TaskPlan]:
    """``plans`` (one split's subset), the ``BUG_COPY_SHARE`` of them first by a hash of their
    id (rounded down) marked to keep a deprecated copy of the buggy module."""
    ranked = sorted(plans, key=lambda plan: _stable_hash(f"bug-copy:{plan.instance_id}"))
    marked = {plan.instance_id for plan in ranked[: int(len(plans) * BUG_COPY_SHARE)]}
    return [replace(plan, bug_copy=plan.instance_id in marked) for plan in plans]


@cache
def plan_suite() -> tuple[TaskPlan, ...]:
    """Every built-in task, ordered by split, then subset, then seed."""
    catalog = load_catalog()
    plans: list[TaskPlan] = []
    used: set[str] = set()
    for profile in PROFILES.values():
        for subset in SUBSETS:
            wanted = profile.train_tasks if subset == "train" else profile.eval_tasks
            base = profile.seed_base + (EVAL_SEED_OFFSET if subset == "eval" else 0)
            two_bug_tasks = round(wanted * profile.two_bug_share)
            made: list[TaskPlan] = []
            for bugs in (2, 1):
                # Single-bug tasks fill whatever the catalogue's two-bug entries could not.
                count = two_bug_tasks if bugs == 2 else wanted - len(made)
                candidates = _candidates(catalog, profile, subset, bugs)
                # Bugs no earlier split used come first, so the suite holds as many as it can.
                candidates.sort(key=lambda entry: entry.id in used)
                chosen = 0
                for entry in candidates:
                    if chosen == count:
                        break
                    seed = base + len(made)
                    report = _write_report(catalog, entry, seed)
                    if report is None:
                        continue
                    instance_id = f"synthetic__{entry.domain}-{profile.name}-{subset}-{seed}"
                    made.append(
                        TaskPlan(instance_id, profile.name, subset, seed, entry, *report, False)
                    )
                    used.add(entry.id)
                    chosen += 1
            plans.extend(_with_bug_copies(made))
    return tuple(plans)


def task_subset(task: Task) -> str:
    """``train`` or ``eval`` for a built-in task."""
    return task.instance_id.rsplit("-", 2)[1]


def suite_dir() -> Path:
    return cache_root() / "tasks" / suite_version()


def build_task(
    plan: TaskPlan, directory: Path | None = None, profile: SplitProfile | None = None
) -> Task:
    """Render, snapshot and describe one task (no cache lookup). ``profile`` overrides the
    split's size and noise knobs (keep ``hide_fail_to_pass`` as the split has it)."""
    directory = directory or suite_dir()
    catalog = load_catalog()
    entry = plan.entry
    domain = load_domain(entry.domain)
    profile = profile or PROFILES[plan.split]
    project = render_project(
        domain, entry, profile, random.Random(plan.instance_id), plan.report_test, plan.bug_copy
    )
    snapshot = safe_child(directory, plan.instance_id)
    commit = write_repo(
        snapshot,
        f"Import {domain.package} {domain.version}",
        lambda staging: write_files(project.files, staging),
    )
    return Task(
        instance_id=plan.instance_id,
        repo=f"autocompact-synthetic/{domain.package}",
        problem_statement=plan.problem_statement,
        patch=project.gold_patch,
        test_patch=project.test_patch,
        FAIL_TO_PASS=entry.fail_to_pass,
        PASS_TO_PASS=catalog.pass_to_pass(entry),
        base_commit=commit,
        version=domain.version,
        split=plan.split,
        snapshot_dir=snapshot,
        test_files=domain.test_files(),
        ground_truth=GroundTruth(
            files=sorted({m.file for m in entry.mutations}),
            functions=[f"{module_name(m.file)}:{m.function}" for m in entry.mutations],
            operators=[m.operator for m in entry.mutations],
        ),
        wrong_patches_rejected=entry.wrong_patches_rejected,
        wrong_patches_accepted=entry.wrong_patches_accepted,
    )


def load_or_build(plan: TaskPlan, directory: Path) -> Task:
    """The cached task when its record and snapshot exist, else a freshly built one."""
    record = safe_child(directory, f"{plan.instance_id}.json")
    snapshot = safe_child(directory, plan.instance_id)
    if record.exists() and snapshot.exists():
        task = Task.model_validate_json(record.read_text())
        return task.model_copy(update={"snapshot_dir": snapshot})
    task = build_task(plan, directory)
    staging = record.with_name(f".{record.name}.{os.getpid()}")
    staging.write_text(task.model_dump_json(indent=1))
    staging.replace(record)
    return task


def builtin_tasks(plans: Sequence[TaskPlan]) -> list[Task]:
    """Tasks for ``plans``, in order, generating the missing ones (with a progress bar)."""
    directory = suite_dir()
    missing = sum(not (directory / f"{p.instance_id}.json").exists() for p in plans)
    with tqdm(total=len(plans), desc="built-in tasks", unit="task", disable=missing < 5) as bar:
        tasks = []
        for plan in plans:
            tasks.append(load_or_build(plan, directory))
            bar.update()
    return tasks


def suite_tasks(
    split: str | None = None, subset: str | None = None, task_ids: Sequence[str] | None = None
) -> list[Task]:
    """The suite's tasks, ordered by split, subset and seed (``split``: a ``PROFILES`` name;
    ``subset``: ``"train"`` or ``"eval"``; ``task_ids``: those, in the order given), their
    repositories ready. Unknown values raise ``ValueError`` listing the valid ones."""
    plans = list(plan_suite())
    if split is not None:
        check_choice("split", split, [*PROFILES, IMPOSSIBLE_SPLIT])
        plans = [plan for plan in plans if plan.split == split]
    if subset is not None:
        check_choice("subset", subset, SUBSETS)
        plans = [plan for plan in plans if plan.subset == subset]
    if task_ids is not None:
        ids = [plan.instance_id for plan in plans]
        plans = [plans[position] for position in choose_ids(ids, task_ids)]
    return builtin_tasks(plans)
