"""What the hardened grader costs: grading time of the gold patch on built-in tasks, with
``ac_env/grading.py`` at a git revision from before the hardening and with the working tree's,
interleaved task by task so that machine load hits both alike.

    .venv/bin/python benchmarks/grading_hardening.py --before REV [--tasks 12]
        [--backend local|docker] [--rounds 2]

Tasks: the first ``--tasks`` of the built-in suite taken evenly across its splits. Prints
per-split and overall mean and median seconds, and the ratio after / before.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

from reward_hacking import grader, sandbox_factory

from ac_env.tasks import load_tasks
from ac_env.tasks.model import Task


def spread(tasks: list[Task], count: int) -> list[Task]:
    by_split: dict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        by_split[task.split].append(task)
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
    parser.add_argument("--backend", default="local", choices=["local", "docker"])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    graders = {"before": grader(args.before), "after": grader(None)}
    make = sandbox_factory(args.backend)
    tasks = spread(load_tasks(), args.tasks)
    seconds: dict[tuple[str, str], list[float]] = defaultdict(list)
    for _ in range(args.rounds):
        for task in tasks:
            for name, grade in graders.items():
                started = time.monotonic()
                result = grade(task, task.patch, make(), 300)
                seconds[(name, task.split)].append(time.monotonic() - started)
                assert result.reward == 1.0, f"{name} {task.instance_id}: {result.reason}"
    print(f"gold patch on {len(tasks)} built-in tasks x {args.rounds} rounds, {args.backend}")
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
    before = statistics.mean(s for (n, _), t in seconds.items() if n == "before" for s in t)
    after = statistics.mean(s for (n, _), t in seconds.items() if n == "after" for s in t)
    print(f"ratio after / before (means): {after / before:.2f}")


if __name__ == "__main__":
    main()
