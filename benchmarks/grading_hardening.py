"""What the hardened grader costs: grading time of the gold patch, with the grader (``ac_env``)
at a git revision from before the hardening (in a subprocess importing that revision's tree)
and with the working tree's, interleaved task by task so that machine load hits both alike.

    .venv/bin/python benchmarks/grading_hardening.py --before REV [--tasks 12]
        [--source builtin|real] [--backend local|docker] [--rounds 2]

Tasks: ``--tasks`` of the built-in suite or of the real-code (mined) suite, taken evenly
across its splits (the real suite: across its libraries). Prints per-split and overall mean
and median seconds, and the ratio after / before.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

from reward_hacking import Before, sandbox_factory

from ac_env.grading import grade
from ac_env.tasks import load_tasks
from ac_env.tasks.model import Task


def spread(tasks: list[Task], count: int, group=None) -> list[Task]:  # type: ignore[no-untyped-def]
    by_split: dict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        by_split[group(task) if group else task.split].append(task)
    chosen: list[Task] = []
    while len(chosen) < count and any(by_split.values()):
        for split in list(by_split):
            if by_split[split] and len(chosen) < count:
                chosen.append(by_split[split].pop(0))
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, metavar="REV")
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--source", default="builtin", choices=["builtin", "real"])
    parser.add_argument("--backend", default="local", choices=["local", "docker"])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    before = Before(args.before)
    make = sandbox_factory(args.backend)
    group = (lambda t: t.instance_id.split("__")[0]) if args.source == "real" else None
    tasks = spread(load_tasks(args.source, split=None), args.tasks, group)
    seconds: dict[tuple[str, str], list[float]] = defaultdict(list)
    graders = ("before", "after")
    for _ in range(args.rounds):
        for task in tasks:
            key = group(task) if group else task.split
            old = before.grade(task, task.patch, args.backend)
            assert old["reward"] == 1.0, f"before {task.instance_id}: {old['reason']}"
            seconds[("before", key)].append(old["seconds"])
            started = time.monotonic()
            result = grade(task, task.patch, make(), 300)
            seconds[("after", key)].append(time.monotonic() - started)
            assert result.reward == 1.0, f"after {task.instance_id}: {result.reason}"
    print(f"gold patch on {len(tasks)} {args.source} tasks x {args.rounds} rounds, {args.backend}")
    print(f"{'split':<16}{'before mean':>12}{'after mean':>12}{'before med':>12}{'after med':>12}")
    splits = sorted({split for _, split in seconds})
    for split in [*splits, "all"]:
        values = {
            name: [
                s for (n, sp), times in seconds.items() for s in times
                if n == name and split in (sp, "all")
            ]
            for name in graders
        }  # fmt: skip
        print(
            f"{split:<16}{statistics.mean(values['before']):>12.2f}"
            f"{statistics.mean(values['after']):>12.2f}"
            f"{statistics.median(values['before']):>12.2f}"
            f"{statistics.median(values['after']):>12.2f}"
        )
    old_mean = statistics.mean(s for (n, _), t in seconds.items() if n == "before" for s in t)
    new_mean = statistics.mean(s for (n, _), t in seconds.items() if n == "after" for s in t)
    print(f"ratio after / before (means): {new_mean / old_mean:.2f}")


if __name__ == "__main__":
    main()
