"""The reference agent on the built-in suite: success rate, steps and context per split.

Each split runs twice: with full history (no forced compaction) and with the forced
compaction threshold on. Prints one table row per (split, setting); no assertions. The target
(issue "Policies and compaction strategies"): at least 90% on easy and medium with full history.
``routes`` says where each solved task's fix came from: ``copy`` (differences from another
copy of the function, ``twins``), ``template`` (the repair templates) or ``both`` (a task
with several bugs); unsolved tasks are listed with their bugs' mutation operators.

    .venv/bin/python benchmarks/reference_agent.py [--split easy medium] [--limit 10]
        [--subset train] [--workers 2] [--threshold 16384] [--max-steps 50]
        [--compact-when never|after_locate|after_fix]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from typing import Any

import gymnasium as gym

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.reference import ReferenceAgent, read_history, replay
from ac_env.agents.rollout import RolloutJob, rollout_many
from ac_env.tasks import load_tasks
from ac_env.trajectory import Trajectory

SPLITS = ("easy", "medium", "hard", "context-stress")


def route(trajectory: Trajectory) -> str:
    """Where the fix in place at the agent's last turn came from, as its own state reads it."""
    calls = trajectory.model_calls()
    if not calls:
        return "none"
    state = replay(read_history(calls[-1].messages))
    edits = [kept.edit for kept in state.kept] + ([state.fix] if state.fix else [])
    kinds = {"copy" if edit.label.startswith("as in ") else "template" for edit in edits}
    return kinds.pop() if len(kinds) == 1 else ("both" if kinds else "none")


def figures(trajectories: list[Trajectory]) -> dict[str, Any]:
    ends = [t.end for t in trajectories if t.end is not None]
    solved = [t for t in trajectories if t.end is not None and t.end.reward == 1.0]
    peaks = [max((c.context_tokens for c in t.model_calls()), default=0) for t in trajectories]
    return {
        "tasks": len(trajectories),
        "solved": len(solved),
        "rate": len(solved) / len(trajectories) if trajectories else 0.0,
        "median_steps": statistics.median(len(t.model_calls()) for t in trajectories),
        "median_steps_solved": (
            statistics.median(len(t.model_calls()) for t in solved) if solved else float("nan")
        ),
        "median_peak_tokens": statistics.median(peaks),
        "compactions": sum(len(t.compactions()) for t in trajectories),
        "routes": Counter(route(t) for t in solved),
        "exits": Counter(e.exit_reason for e in ends),
        "infra": sum(1 for e in ends if e.infra_error),
    }


def run_split(
    split: str,
    subset: str | None,
    limit: int | None,
    threshold: int | None,
    args: argparse.Namespace,
) -> dict[str, Any]:
    tasks = load_tasks("builtin", split, subset=subset)[:limit]
    ids = [task.instance_id for task in tasks]

    def make_env() -> gym.Env[Any, Any]:
        return gym.make(
            "AutoCompact-SWE-v0",
            split=split,
            task_ids=ids,
            forced_compaction_threshold=threshold,
            max_steps=args.max_steps,
        )

    jobs = [RolloutJob(options={"task_id": instance_id}) for instance_id in ids]
    started = time.perf_counter()
    trajectories = rollout_many(
        make_env, lambda: ReferenceAgent(args.compact_when), jobs, workers=args.workers
    )
    result = figures(trajectories)
    result["wall_s"] = time.perf_counter() - started
    operators = {task.instance_id: task.ground_truth.operators for task in tasks}
    result["unsolved"] = [
        f"{t.header.instance_id} ({'+'.join(operators[t.header.instance_id])})"
        for t in trajectories
        if t.end is None or t.end.reward != 1.0
    ]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", nargs="+", default=list(SPLITS), choices=SPLITS)
    parser.add_argument("--subset", choices=("train", "eval"), default=None)
    parser.add_argument("--limit", type=int, default=None, help="tasks per split")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threshold", type=int, default=16_384, help="forced compaction on")
    parser.add_argument("--max-steps", type=int, default=50)
    parser.add_argument(
        "--compact-when", choices=("never", "after_locate", "after_fix"), default="never"
    )
    parser.add_argument(
        "--only", choices=("full", "forced"), default=None, help="run one setting only"
    )
    args = parser.parse_args()
    settings = [("full history", None), ("forced compaction", args.threshold)]
    if args.only:
        settings = [settings[0] if args.only == "full" else settings[1]]
    rows = []
    for split in args.split:
        for name, threshold in settings:
            result = run_split(split, args.subset, args.limit, threshold, args)
            rows.append((split, name, result))
            print(f"{split} / {name}: unsolved {result['unsolved']}", flush=True)
    header = (
        f"{'split':<15}{'setting':<19}{'tasks':>6}{'solved':>8}{'rate':>7}{'med steps':>10}"
        f"{'med peak tok':>13}{'compactions':>12}{'wall s':>8}  routes; exits"
    )
    print(f"\nreference agent (compact_when={args.compact_when}, max_steps={args.max_steps})")
    print(header)
    for split, name, r in rows:
        exits = ", ".join(f"{k} {v}" for k, v in sorted(r["exits"].items()))
        routes = ", ".join(f"{k} {v}" for k, v in sorted(r["routes"].items()))
        print(
            f"{split:<15}{name:<19}{r['tasks']:>6}{r['solved']:>8}{r['rate']:>7.0%}"
            f"{r['median_steps']:>10.1f}{r['median_peak_tokens']:>13.0f}{r['compactions']:>12}"
            f"{r['wall_s']:>8.0f}  {routes}; {exits}"
            + (f" (infra errors {r['infra']})" if r["infra"] else "")
        )


if __name__ == "__main__":
    main()
