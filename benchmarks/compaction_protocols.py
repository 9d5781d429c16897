"""The reference agent under both compaction protocols, with compaction applied (``learned``)
and skipped (``summary_ignored``): what each costs and how much summary it keeps.

One row per (protocol, strategy) over the first ``--limit`` tasks of a split: tasks solved,
model turns, total USD, output tokens (the summaries' included), compactions applied, and
model calls whose prompt held a summary. Under summary-ignored no summary is generated,
billed or kept, so its output tokens drop by the summaries' and no prompt holds one.

    .venv/bin/python benchmarks/compaction_protocols.py [--split easy] [--limit 5]
"""

from __future__ import annotations

import argparse

import gymnasium as gym

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.reference import ReferenceAgent
from ac_env.agents.rollout import rollout
from ac_env.compaction import CompactionProtocol
from ac_env.policy import Policy
from ac_env.runs.workers import SkipAwareReference
from ac_env.strategies import get_strategy
from ac_env.tasks import load_tasks


def policy(strategy: str, protocol: CompactionProtocol) -> Policy:
    if strategy == "summary_ignored":
        return SkipAwareReference("after_locate", protocol)
    return ReferenceAgent("after_locate", protocol)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="easy")
    parser.add_argument("--limit", type=int, default=5)
    args = parser.parse_args()
    tasks = load_tasks("builtin", args.split, None)[: args.limit]
    print(
        f"{'protocol':9} {'strategy':16} {'solved':>6} {'turns':>5} {'usd':>8} "
        f"{'output tok':>10} {'compactions':>11} {'prompts w/ summary':>18}"
    )
    protocols: tuple[CompactionProtocol, ...] = ("inline", "tool_call")
    for protocol in protocols:
        for strategy in ("learned", "summary_ignored"):
            kwargs = get_strategy(strategy).env_kwargs(protocol=protocol)
            env = gym.make("AutoCompact-SWE-v0", **kwargs)
            runs = [
                rollout(env, policy(strategy, protocol), seed=0, options={"task_id": t.instance_id})
                for t in tasks
            ]
            env.close()
            calls = [c for run in runs for c in run.model_calls()]
            print(
                f"{protocol:9} {strategy:16} "
                f"{sum(run.reward == 1.0 for run in runs):>3}/{len(runs):<2} {len(calls):>5} "
                f"{sum(run.end.cost.usd for run in runs if run.end):>8.5f} "
                f"{sum(c.cost.output for c in calls):>10} "
                f"{sum(len(run.compactions()) for run in runs):>11} "
                f"{sum('summary' in c.message_kinds for c in calls):>18}"
            )


if __name__ == "__main__":
    main()
