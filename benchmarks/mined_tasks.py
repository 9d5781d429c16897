"""Tasks mined from real libraries: yield and build time per library, and how the reference
agent does on them (solved, steps, peak context) next to the built-in ``easy`` split.

    .venv/bin/python benchmarks/mined_tasks.py [--build] [--libraries toolz==1.2.0 ...]
        [--out DIR] [--max-tasks 50] [--agent 4] [--easy 4] [--workers 1]

``--build`` runs (or resumes) ``ac-env tasks build`` first; otherwise the figures come from
the build directory's reports. ``--agent N`` runs the reference agent, full history (no
forced compaction), on the first N tasks of each library; ``--easy N`` on N built-in easy
tasks for comparison. Prints tables; no assertions.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

import gymnasium as gym

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.reference import ReferenceAgent
from ac_env.agents.rollout import RolloutJob, rollout_many
from ac_env.mining.build import BuildOptions, LibraryReport, build
from ac_env.tasks import load_tasks
from ac_env.tasks.git_repo import cache_root
from ac_env.tasks.model import Task
from ac_env.trajectory import Trajectory

LIBRARIES = ("toolz==1.2.0", "boltons==26.2.0", "more-itertools==11.2.1")


def yield_table(out: Path) -> None:
    reports = [
        LibraryReport.model_validate_json(path.read_text())
        for path in sorted(out.glob("*/report.json"))
    ]
    print(
        f"{'library':<24}{'status':<9}{'tests':>6}{'base s':>8}{'cands':>7}{'tried':>7}"
        f"{'kept':>6}{'dups':>6}{'tasks':>7}{'yield':>7}{'build s':>9}{'s/task':>8}"
    )
    for r in reports:
        if r.status != "built":
            print(f"{r.library:<24}{'skipped':<9}{r.reason}")
            continue
        kept = r.verdicts.get("kept", 0)
        rate = r.tasks / r.tried if r.tried else 0.0
        per_task = r.elapsed_s / r.tasks if r.tasks else float("nan")
        print(
            f"{r.library:<24}{'built':<9}{r.tests:>6}{r.baseline_s:>8.1f}{r.candidates:>7}"
            f"{r.tried:>7}{kept:>6}{r.duplicates:>6}{r.tasks:>7}{rate:>7.0%}"
            f"{r.elapsed_s:>9.0f}{per_task:>8.1f}"
        )
        others = {k: v for k, v in r.verdicts.items() if k != "kept"}
        if others or r.dropped or r.capped:
            print(
                f"{'':<24}rejected: {others}; dropped after keeping: {r.dropped}; "
                f"capped (function had its tasks): {r.capped}"
            )


def run_agent(source: str, tasks: list[Task], workers: int, max_steps: int) -> dict[str, Any]:
    ids = [task.instance_id for task in tasks]

    def make_env() -> gym.Env[Any, Any]:
        return gym.make(
            "AutoCompact-SWE-v0",
            task_source=source,
            split=None if source != "builtin" else "easy",
            task_ids=ids,
            forced_compaction_threshold=None,
            max_steps=max_steps,
        )

    jobs = [RolloutJob(options={"task_id": instance_id}) for instance_id in ids]
    trajectories = rollout_many(make_env, ReferenceAgent, jobs, workers=workers, progress=False)
    return figures(trajectories)


def figures(trajectories: list[Trajectory]) -> dict[str, Any]:
    peaks = [max((c.context_tokens for c in t.model_calls()), default=0) for t in trajectories]
    solved = sum(1 for t in trajectories if t.end is not None and t.end.reward == 1.0)
    return {
        "tasks": len(trajectories),
        "solved": solved,
        "median_steps": statistics.median(len(t.model_calls()) for t in trajectories),
        "median_peak": statistics.median(peaks),
        "max_peak": max(peaks),
        "infra": sum(1 for t in trajectories if t.end is not None and t.end.infra_error),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=cache_root() / "mined")
    parser.add_argument("--libraries", nargs="+", default=list(LIBRARIES))
    parser.add_argument("--build", action="store_true", help="build or resume first")
    parser.add_argument("--max-tasks", type=int, default=50)
    parser.add_argument("--agent", type=int, default=0, help="reference-agent tasks per library")
    parser.add_argument("--easy", type=int, default=0, help="built-in easy tasks to compare")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=50)
    args = parser.parse_args()
    if args.build:
        build(args.libraries, BuildOptions(out=args.out, max_tasks=args.max_tasks))
    yield_table(args.out)
    if not args.agent and not args.easy:
        return
    rows: list[tuple[str, dict[str, Any]]] = []
    task_file = args.out / "tasks.jsonl"
    if args.agent:
        by_library: dict[str, list[Task]] = {}
        for task in load_tasks(str(task_file)):
            by_library.setdefault(task.repo, []).append(task)
        for repo, tasks in sorted(by_library.items()):
            rows.append(
                (repo, run_agent(str(task_file), tasks[: args.agent], args.workers, args.max_steps))
            )
    if args.easy:
        easy = load_tasks("builtin", "easy")[: args.easy]
        rows.append(("built-in easy", run_agent("builtin", easy, args.workers, args.max_steps)))
    print(f"\nreference agent, full history, max_steps={args.max_steps}")
    print(
        f"{'tasks from':<22}{'tasks':>6}{'solved':>8}{'med steps':>10}"
        f"{'med peak':>10}{'max peak':>10}"
    )
    for name, r in rows:
        print(
            f"{name:<22}{r['tasks']:>6}{r['solved']:>8}{r['median_steps']:>10.1f}"
            f"{r['median_peak']:>10.0f}{r['max_peak']:>10.0f}"
            + (f"  (infra errors {r['infra']})" if r["infra"] else "")
        )


if __name__ == "__main__":
    main()
