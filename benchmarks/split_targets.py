"""The reference agent on every split, under the long split's targets.

Four settings per split, no budget, ``--max-steps`` (default 100) turns:

- ``full128``: full history, a 128K window (``context_window=131072``);
- ``full32``: full history, a 32K window (the method's RL context cap): it ends at overflow;
- ``fix32``: a 32K window, the agent compacting after each kept partial fix
  (``compact_when="after_fix"``);
- ``fix32fb``: ``fix32`` with the env's length fallback at 3/4 of the window
  (``forced_compaction_threshold=24576``): a bug whose own search passes 24K tokens before it
  is fixed (every test run lists the failures of the bugs still left) gets one more summary.

No forced compaction in the others. Per split and setting it prints the tasks, solved %,
median and max peak context (tokens), median steps, overflow % and compactions, then checks
the long split against its targets: full128 solves at least 70% with a median peak of at
least 40K tokens; full32 overflows on at least 60%; fix32 (after-fix compaction alone) and
fix32fb (with the length fallback) each solve at least as many as full128.

    nice -n 10 .venv/bin/python benchmarks/split_targets.py --long BUILD/long.jsonl \\
        [--real BUILD/tasks.jsonl] [--builtin easy medium hard context-stress] [--limit 8] \\
        [--settings full128 full32 fix32 fix32fb] [--workers 1] [--max-steps 100] \\
        [--command-cache DIR]

``--long`` and ``--real`` take a task source, as ``load_tasks(source, split)`` does: a task
file, or the name of a packaged suite; ``--long-split``/``--real-split`` name the split
(``long``/``real``; ``none``: the whole file). ``--limit`` caps each split's tasks (the first
N, in the source's order). Prints tables; no assertions.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.reference import CompactWhen, ReferenceAgent
from ac_env.agents.rollout import RolloutJob, rollout_many
from ac_env.tasks import load_tasks
from ac_env.trajectory import Trajectory

BUILTIN_SPLITS = ("easy", "medium", "hard", "context-stress")


@dataclass(frozen=True)
class Setting:
    name: str
    window: int
    compact_when: CompactWhen
    forced_threshold: int | None = None


SETTINGS = {
    "full128": Setting("full128", 131_072, "never"),
    "full32": Setting("full32", 32_768, "never"),
    "fix32": Setting("fix32", 32_768, "after_fix"),
    "fix32fb": Setting("fix32fb", 32_768, "after_fix", forced_threshold=24_576),
}


@dataclass(frozen=True)
class Split:
    label: str
    source: str
    split: str | None


def figures(trajectories: list[Trajectory]) -> dict[str, Any]:
    ends = [t.end for t in trajectories if t.end is not None]
    peaks = [max((c.context_tokens for c in t.model_calls()), default=0) for t in trajectories]
    count = len(trajectories)
    return {
        "tasks": count,
        "solved": sum(1 for e in ends if e.reward == 1.0),
        "median_peak": statistics.median(peaks) if peaks else 0,
        "max_peak": max(peaks, default=0),
        "median_steps": statistics.median(len(t.model_calls()) for t in trajectories)
        if trajectories
        else 0,
        "overflow": sum(1 for e in ends if e.exit_reason == "context_overflow"),
        "compactions": sum(len(t.compactions()) for t in trajectories),
        "infra": sum(1 for e in ends if e.infra_error),
    }


def run(
    split: Split, setting: Setting, limit: int | None, args: argparse.Namespace
) -> dict[str, Any]:
    tasks = load_tasks(split.source, split.split)[:limit]
    ids = [task.instance_id for task in tasks]

    def make_env() -> gym.Env[Any, Any]:
        return gym.make(
            "AutoCompact-SWE-v0",
            task_source=split.source,
            split=split.split,
            task_ids=ids,
            context_window=setting.window,
            forced_compaction_threshold=setting.forced_threshold,
            max_steps=args.max_steps,
            command_cache=args.command_cache,
        )

    jobs = [RolloutJob(options={"task_id": instance_id}) for instance_id in ids]
    started = time.perf_counter()
    trajectories = rollout_many(
        make_env,
        lambda: ReferenceAgent(setting.compact_when),
        jobs,
        workers=args.workers,
        progress=False,
    )
    result = figures(trajectories)
    result["wall_s"] = time.perf_counter() - started
    result["episodes"] = [
        f"{t.header.instance_id}: reward {t.end.reward if t.end else None}, "
        f"{t.end.exit_reason if t.end else 'no end'}, {len(t.model_calls())} steps, peak "
        f"{max((c.context_tokens for c in t.model_calls()), default=0)}, "
        f"{len(t.compactions())} compactions"
        for t in trajectories
    ]
    return result


def row(label: str, setting: str, r: dict[str, Any]) -> str:
    n = r["tasks"] or 1
    return (
        f"{label:<24}{setting:<9}{r['tasks']:>6}{r['solved'] / n:>8.0%}{r['median_peak']:>10.0f}"
        f"{r['max_peak']:>10.0f}{r['median_steps']:>7.0f}{r['overflow'] / n:>10.0%}"
        f"{r['compactions']:>7}{r['wall_s']:>8.0f}"
        + (f"  infra {r['infra']}" if r["infra"] else "")
    )


def check_targets(results: dict[str, dict[str, Any]]) -> None:
    """The long split's targets, each with its measured figure."""
    full, over = results.get("full128"), results.get("full32")
    checks = []
    if full:
        n = full["tasks"] or 1
        checks.append(("full128 solves >= 70%", full["solved"] / n >= 0.7, f"{full['solved']}/{n}"))
        checks.append(
            (
                "full128 median peak >= 40K",
                full["median_peak"] >= 40_000,
                f"{full['median_peak']:.0f}",
            )
        )
    if over:
        n = over["tasks"] or 1
        checks.append(
            ("full32 overflows >= 60%", over["overflow"] / n >= 0.6, f"{over['overflow']}/{n}")
        )
    for name in ("fix32", "fix32fb"):
        fix = results.get(name)
        if fix and full:
            checks.append(
                (
                    f"{name} solves >= full128",
                    fix["solved"] >= full["solved"],
                    f"{fix['solved']} vs {full['solved']}",
                )
            )
    print("\nlong split targets:")
    for name, met, value in checks:
        print(f"  {'met ' if met else 'MISS'}  {name:<30}{value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--long", help="task source holding the long split")
    parser.add_argument("--long-split", default="long")
    parser.add_argument("--real", help="task source holding single-bug real-code tasks")
    parser.add_argument("--real-split", default="real")
    parser.add_argument("--builtin", nargs="*", default=list(BUILTIN_SPLITS))
    parser.add_argument("--limit", type=int, default=8, help="tasks per split")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--verbose", action="store_true", help="one line per episode")
    parser.add_argument(
        "--command-cache",
        help="replay recorded command outputs from this directory: the settings run the same "
        "deterministic agent, so full32 replays full128's prefix (ac_env.sandbox.command_cache)",
    )
    args = parser.parse_args()

    def split_name(value: str) -> str | None:
        return None if value == "none" else value

    splits = []
    if args.long:
        splits.append(Split("long", args.long, split_name(args.long_split)))
    if args.real:
        splits.append(Split("real", args.real, split_name(args.real_split)))
    splits += [Split(f"builtin {name}", "builtin", name) for name in args.builtin]
    print(
        f"reference agent, no budget, no forced compaction except fix32fb's, "
        f"max_steps={args.max_steps}, first {args.limit} tasks per split"
    )
    print(
        f"{'split':<24}{'setting':<9}{'tasks':>6}{'solved':>8}{'med peak':>10}{'max peak':>10}"
        f"{'steps':>7}{'overflow':>10}{'compact':>7}{'wall s':>8}"
    )
    long_results: dict[str, dict[str, Any]] = {}
    for split in splits:
        for name in args.settings:
            result = run(split, SETTINGS[name], args.limit, args)
            print(row(split.label, name, result), flush=True)
            if args.verbose:
                print("\n".join(f"{'':<4}{line}" for line in result["episodes"]), flush=True)
            if split.label == "long":
                long_results[name] = result
    if long_results:
        check_targets(long_results)


if __name__ == "__main__":
    main()
