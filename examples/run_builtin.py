"""Run the environment on a few built-in tasks, printing every step and the final reward.

.venv/bin/python examples/run_builtin.py [--policy reference|gold] [--split easy] [--tasks 3]
"""

from __future__ import annotations

import argparse

import gymnasium as gym

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents import GoldPatchPolicy, Policy, ReferenceAgent


def first_line(text: str, width: int = 90) -> str:
    skip = ("THOUGHT", "```")
    line = next((x for x in text.splitlines() if x.strip() and not x.startswith(skip)), "")
    return line[:width]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", choices=["reference", "gold"], default="reference")
    parser.add_argument("--split", default="easy")
    parser.add_argument("--tasks", type=int, default=3)
    args = parser.parse_args()

    env = gym.make("AutoCompact-SWE-v0", split=args.split)
    for seed in range(args.tasks):
        obs, info = env.reset(seed=seed)
        task = env.unwrapped.task
        policy: Policy = GoldPatchPolicy(task) if args.policy == "gold" else ReferenceAgent()
        print(f"\n=== {info['instance_id']} ({task.split}) ===")
        done = False
        while not done:
            action = policy.act(obs)
            obs, reward, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            event = "compact" if info["prefix_rewritten"] else first_line(action.text)
            print(
                f"step {info['step']:>2}  ctx {info['context_tokens']:>6} tok  "
                f"${info['cost']['total']['usd']:.4f}  {event}"
            )
        print(f"--> {info['exit_reason']}: reward {reward}  ({info['reward_detail']})")
    env.close()


if __name__ == "__main__":
    main()
