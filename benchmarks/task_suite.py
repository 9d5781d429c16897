"""Figures for the built-in task suite: per split, tasks, repository size, generation time
(cold cache and cached), and optionally validation time and test-output size.

    python benchmarks/task_suite.py [--validate N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from ac_env.tasks import load_tasks
from ac_env.tasks.synthetic.profiles import PROFILES
from ac_env.tasks.synthetic.pytest_runs import run_pytest
from ac_env.tasks.synthetic.suite import plan_suite
from ac_env.tasks.synthetic.validation import validate_task


def repo_size(root: Path, package: str) -> tuple[int, int, int]:
    """(files, package modules, lines) of a snapshot, .git excluded."""
    files = [p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts]
    modules = [p for p in files if p.suffix == ".py" and p.relative_to(root).parts[0] == package]
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    return len(files), len(modules), lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--validate",
        type=int,
        default=0,
        help="validate this many tasks per split (3 runs each way)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    plan_suite()
    print(f"planning the suite: {time.perf_counter() - started:.2f} s")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["AUTOCOMPACT_CACHE"] = cache
        print(
            f"{'split':<15} {'tasks':>5} {'train':>5} {'eval':>5} {'files':>11} "
            f"{'modules':>9} {'lines':>13} {'cold s':>7} {'cached s':>8} {'F2P':>5}"
        )
        for split in PROFILES:
            started = time.perf_counter()
            tasks = load_tasks(split=split)
            cold = time.perf_counter() - started
            started = time.perf_counter()
            load_tasks(split=split)
            cached = time.perf_counter() - started
            sizes = [repo_size(t.snapshot_dir, t.repo.split("/")[1]) for t in tasks]
            files, modules, lines = zip(*sizes, strict=True)
            subsets = [t.instance_id.rsplit("-", 2)[1] for t in tasks]
            print(
                f"{split:<15} {len(tasks):>5} {subsets.count('train'):>5} "
                f"{subsets.count('eval'):>5} {min(files):>5}-{max(files):<5} "
                f"{min(modules):>4}-{max(modules):<4} {min(lines):>6}-{max(lines):<6} "
                f"{cold:>7.1f} {cached:>8.2f} "
                f"{statistics.mean(len(t.FAIL_TO_PASS) for t in tasks):>5.1f}"
            )
            for task in tasks[: args.validate]:
                report = validate_task(task)
                run = run_pytest(task.snapshot_dir)
                print(
                    f"  validate {task.instance_id}: ok={report.ok} "
                    f"tests {report.duration_s:.1f} s; full pytest -rA output "
                    f"{len(run.output)} chars (~{len(run.output) // 4} tokens)"
                )


if __name__ == "__main__":
    main()
