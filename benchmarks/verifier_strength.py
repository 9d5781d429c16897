"""How often a shipped task's tests accept a wrong patch: every task's generated wrong patches
(``ac_env.tasks.wrong_patches``: near misses at the bug site, gold minus one hunk) graded
by the env's grader, per split, beside public audits of other benchmarks.

    nice -n 10 .venv/bin/python benchmarks/verifier_strength.py [--sources builtin real]
        [--sample N] [--cap SPLIT=N ...] [--recorded] [--out runs/verifier_strength.jsonl]
        [--report-only] [--strengthen] [--symptom] [--ids ID ...]

Each wrong patch is graded first against the task's FAIL_TO_PASS tests alone (a patch that
fails one of them is rejected by the full grading too) and, when it passes them, by the full
grading (FAIL_TO_PASS and PASS_TO_PASS in the suite's order). One JSON line per (task version,
wrong patch) goes to ``--out`` as it is graded, so an interrupted run resumes where it stopped;
a task whose tests change (strengthened) is graded afresh. ``--sample N`` grades the first N
tasks of each split in a fixed hashed order (a stratified sample; ``--cap long=10`` takes
another number from one split); ``--recorded`` grades only the tasks that record their
figures. ``--strengthen`` rewrites the shipped real-code suite from the file (each measured
task records its figures; one that accepts a wrong patch is strengthened or dropped).
``--ids`` grades these tasks as well as the sample. ``--symptom`` grades the wrong patches
that only make the reported symptom go away instead (``ac_env.tasks.symptom_patches``: the
named crash silenced, the first failing input special-cased), into ``--out`` (default
``runs/verifier_strength_symptom.jsonl``).

Prints, per split, for the tasks as first graded ("before": every task id's first version in
the file, dropped tasks included) and for the shipped tasks graded in their shipped version
("after"): tasks, wrong
patches, patches accepted, tasks that accept at least one non-equivalent wrong patch (the
audits' figure), and accepted patches that are provably equivalent (same AST as the gold).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ac_env.grading import grade  # noqa: E402
from ac_env.mining.pack import write_rows  # noqa: E402
from ac_env.mining.strengthen import strengthen  # noqa: E402
from ac_env.sandbox.local import LocalSandbox  # noqa: E402
from ac_env.tasks import load_tasks  # noqa: E402
from ac_env.tasks.model import Task  # noqa: E402
from ac_env.tasks.real.suite import DATA_DIR, read_manifest, read_rows, real_tasks  # noqa: E402
from ac_env.tasks.symptom_patches import symptom_patches  # noqa: E402
from ac_env.tasks.wrong_patches import WrongPatch, wrong_patches  # noqa: E402

AUDITS = (
    ("SWE-bench Verified (49-task audit sample)", 28.5),
    ("R2E-Gym (20-task audit sample)", 25.0),
)
SOURCES = ("builtin", "real")


def tests_digest(task: Task) -> str:
    """What the verdict depends on besides the patch: the task's tests and base."""
    text = json.dumps(
        [task.base_commit, task.FAIL_TO_PASS, task.PASS_TO_PASS, task.test_patch, task.patch]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _sample(tasks: list[Task], per_split: int | None, caps: dict[str, int]) -> list[Task]:
    if per_split is None and not caps:
        return tasks
    by_split: dict[str, list[Task]] = defaultdict(list)
    for task in sorted(tasks, key=lambda t: hashlib.sha256(t.instance_id.encode()).hexdigest()):
        by_split[task.split].append(task)
    return [
        task for split, group in by_split.items() for task in group[: caps.get(split, per_split)]
    ]


def grade_wrong_patch(task: Task, patch: str) -> tuple[float | None, str]:
    """The grader's reward for ``patch`` and the stage that decided it."""
    quick = task.model_copy(update={"PASS_TO_PASS": [], "test_order": []})
    first = grade(quick, patch, LocalSandbox())
    if first.reward != 1.0:
        return first.reward, "fail_to_pass"
    full = grade(task, patch, LocalSandbox())
    return full.reward, "full"


def run(
    tasks: list[tuple[str, Task]],
    out: Path,
    generate: Callable[[Task], list[WrongPatch]] = wrong_patches,
) -> None:
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            record = json.loads(line)
            done.add((record["instance_id"], record["tests"], record["key"]))
    jobs = []
    for source, task in tqdm(tasks, desc="wrong patches", unit="task", leave=False):
        digest = tests_digest(task)
        for wrong in generate(task):
            if (task.instance_id, digest, wrong.key) not in done:
                jobs.append((source, task, digest, wrong))
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as handle:
        for source, task, digest, wrong in tqdm(jobs, desc="grading", unit="patch"):
            reward, stage = grade_wrong_patch(task, wrong.patch)
            record = {
                "source": source,
                "split": task.split,
                "instance_id": task.instance_id,
                "tests": digest,
                "key": wrong.key,
                "family": wrong.family,
                "operator": wrong.operator,
                "description": wrong.description,
                "equivalent": wrong.equivalent,
                "reward": reward,
                "stage": stage,
            }
            handle.write(json.dumps(record) + "\n")
            handle.flush()


def _rows(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    table: dict[tuple[str, str], dict[str, Any]] = {}
    tasks_accepting: dict[tuple[str, str], set[str]] = defaultdict(set)
    tasks: dict[tuple[str, str], set[str]] = defaultdict(set)
    for record in records:
        split = (record["source"], record["split"])
        row = table.setdefault(split, {"patches": 0, "accepted": 0, "equivalent": 0, "infra": 0})
        tasks[split].add(record["instance_id"])
        row["patches"] += 1
        if record["reward"] is None:
            row["infra"] += 1
        elif record["reward"] == 1.0:
            row["accepted"] += 1
            if record["equivalent"]:
                row["equivalent"] += 1
            else:
                tasks_accepting[split].add(record["instance_id"])
    for split, row in table.items():
        row["tasks"] = len(tasks[split])
        row["weak_tasks"] = len(tasks_accepting[split])
    return table


def report(out: Path, shipped: dict[str, str]) -> None:
    """Print the before/after table from ``out``; ``shipped`` maps each shipped task id to
    its current tests digest ("after" covers the shipped tasks graded in that version)."""
    records = [json.loads(line) for line in out.read_text().splitlines()]
    first: dict[str, str] = {}
    for record in records:
        first.setdefault(record["instance_id"], record["tests"])
    before = [r for r in records if first[r["instance_id"]] == r["tests"]]
    after = [r for r in records if shipped.get(r["instance_id"]) == r["tests"]]
    header = (
        f"{'':6} {'source/split':24} {'tasks':>5} {'patches':>7} {'accepted':>8} "
        f"{'equiv.':>6} {'infra':>5} {'weak tasks':>14}"
    )
    print(header)
    for label, rows in (("before", _rows(before)), ("after", _rows(after))):
        for (source, split), row in sorted(rows.items()):
            share = 100 * row["weak_tasks"] / row["tasks"] if row["tasks"] else 0.0
            print(
                f"{label:6} {source + '/' + split:24} {row['tasks']:>5} {row['patches']:>7} "
                f"{row['accepted']:>8} {row['equivalent']:>6} {row['infra']:>5} "
                f"{row['weak_tasks']:>5} ({share:4.1f}%)"
            )
    graded = {(r["instance_id"], r["tests"]) for r in records}
    unmeasured = [task_id for task_id, digest in shipped.items() if (task_id, digest) not in graded]
    print(f"shipped tasks not graded in their shipped version: {len(unmeasured)} of {len(shipped)}")
    for name, share in AUDITS:
        print(f"audit: {name}: {share:.1f}% of tasks accept a verified-incorrect patch")


def strengthen_real_suite(out: Path, data_dir: Path = DATA_DIR) -> None:
    """Rewrite the shipped real-code suite from the graded records: each task whose every
    wrong patch was graded records how many its tests reject (the others record None); one
    whose tests accept a non-equivalent wrong patch is strengthened with the library's own
    tests or dropped (``ac_env.mining.strengthen``); what was done goes to
    ``runs/strengthened.jsonl``."""
    records = [json.loads(line) for line in out.read_text().splitlines()]
    manifest = read_manifest(data_dir)
    rows = read_rows(data_dir)
    tasks = real_tasks(data_dir=data_dir)
    log = out.with_name("strengthened.jsonl")
    kept = []
    for row, task in zip(tqdm(rows, desc="strengthening", unit="task"), tasks, strict=True):
        digest = tests_digest(task)
        mine = [r for r in records if r["instance_id"] == task.instance_id and r["tests"] == digest]
        complete = (
            {r["key"] for r in mine} >= {w.key for w in wrong_patches(task)} if mine else False
        )
        if not complete or any(r["reward"] is None for r in mine):
            unmeasured = {"wrong_patches_rejected": None, "wrong_patches_accepted": None}
            kept.append(row.model_copy(update={"task": row.task.model_copy(update=unmeasured)}))
            continue
        rejected = sum(r["reward"] == 0.0 for r in mine)
        accepted = {r["key"] for r in mine if r["reward"] == 1.0 and not r["equivalent"]}
        if accepted:
            wrong = [w for w in wrong_patches(task) if w.key in accepted]
            result = strengthen(task, wrong, LocalSandbox)
            entry = {
                "instance_id": task.instance_id,
                "kept": result.task is not None,
                "added": result.added,
                "undecided": result.undecided,
                "reason": result.reason,
            }
            with log.open("a") as handle:
                handle.write(json.dumps(entry) + "\n")
            if result.task is None:
                continue
            task, rejected = result.task, rejected + len(accepted)
        update = {"wrong_patches_rejected": rejected, "wrong_patches_accepted": 0}
        kept.append(
            row.model_copy(
                update={"task": task.model_copy(update={**update, "snapshot_dir": None})}
            )
        )
    write_rows(data_dir, kept, manifest.libraries)
    print(f"real-code suite rewritten: {len(kept)} tasks of {len(rows)} kept")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", nargs="+", choices=SOURCES, default=list(SOURCES))
    parser.add_argument("--sample", type=int, default=None, help="tasks per split")
    parser.add_argument(
        "--cap",
        nargs="*",
        default=[],
        metavar="SPLIT=N",
        help="tasks of these splits (overrides --sample for them)",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--ids", nargs="*", default=[], help="tasks graded besides the sample")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument(
        "--recorded",
        action="store_true",
        help="grade only the tasks that record their figures (after --strengthen)",
    )
    parser.add_argument(
        "--strengthen",
        action="store_true",
        help="rewrite the shipped real-code suite: record each measured task's figures, "
        "strengthen or drop the tasks that accept a wrong patch",
    )
    parser.add_argument(
        "--symptom",
        action="store_true",
        help="grade the symptom-only wrong patches (silenced crash, special-cased input)",
    )
    args = parser.parse_args()
    name = "verifier_strength_symptom.jsonl" if args.symptom else "verifier_strength.jsonl"
    args.out = args.out or ROOT / "runs" / name
    if args.strengthen:
        strengthen_real_suite(args.out)
        return
    shipped = [(source, task) for source in args.sources for task in load_tasks(source)]
    caps = {split: int(count) for split, count in (cap.split("=", 1) for cap in args.cap)}
    chosen = _sample([task for _, task in shipped], args.sample, caps)
    if args.recorded:
        chosen = [task for task in chosen if task.wrong_patches_accepted is not None]
    kept = {task.instance_id for task in chosen} | set(args.ids)
    if not args.report_only:
        generate = symptom_patches if args.symptom else wrong_patches
        chosen_tasks = [(source, task) for source, task in shipped if task.instance_id in kept]
        run(chosen_tasks, args.out, generate)
    report(args.out, {task.instance_id: tests_digest(task) for _, task in shipped})


if __name__ == "__main__":
    main()
