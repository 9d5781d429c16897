"""Plug in your own policy: any object with ``act(observation) -> PolicyOutput``.

    .venv/bin/python examples/custom_policy.py [--tasks 2] [--max-tokens 3000]

``BudgetedCompactor`` wraps another policy and adds a compaction rule of its own: once the
context it sees passes ``max_tokens`` (estimated at 4 characters a token), it asks the wrapped
policy for a working-state summary, exactly as the env's forced compaction would, and returns
that summary as a ``compact`` action. Policies are stateless between calls: everything they
know comes from the observation, so after a compaction the summary is all that is left.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

import gymnasium as gym

import ac_env  # noqa: F401  (registers the ids)
from ac_env.actions import SUMMARY_HEADER
from ac_env.agents import Policy, PolicyOutput, ReferenceAgent, rollout
from ac_env.compaction.texts import COMPACTION_REQUEST


class BudgetedCompactor:
    """Compacts the wrapped policy's context whenever it grows past ``max_tokens``."""

    def __init__(self, inner: Policy, max_tokens: int) -> None:
        self.inner = inner
        self.max_tokens = max_tokens

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        tokens = sum(len(message["content"]) for message in observation) // 4
        just_compacted = any(m["content"].startswith(SUMMARY_HEADER) for m in observation[-2:])
        if tokens > self.max_tokens and not just_compacted:
            request = {"role": "user", "content": COMPACTION_REQUEST}
            summary = self.inner.act([*observation, request])
            if summary.text.lstrip().startswith(SUMMARY_HEADER):
                return summary
        return self.inner.act(observation)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--split", default="easy")
    parser.add_argument("--max-tokens", type=int, default=3000)
    args = parser.parse_args()

    env = gym.make("AutoCompact-SWE-v0", split=args.split, max_steps=40)
    policy = BudgetedCompactor(ReferenceAgent(), args.max_tokens)
    for seed in range(args.tasks):
        trajectory = rollout(env, policy, seed=seed)
        end = trajectory.end
        assert end is not None
        calls = trajectory.model_calls()
        print(
            f"{trajectory.header.instance_id}: reward {end.reward}, {len(calls)} steps, "
            f"{len(trajectory.compactions())} compactions, peak context "
            f"{max(c.context_tokens for c in calls)} tokens, ${end.cost.usd:.4f}"
        )
    env.close()


if __name__ == "__main__":
    main()
