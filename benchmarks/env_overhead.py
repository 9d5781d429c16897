"""Environment overhead: step cost vs context size, reset latency, grading time.

Prints figures and ratios (no assertions). Targets (issue 2): step overhead under 2 ms at 128K
context tokens and flat as the context grows; reset under 100 ms; grading under 2 s per task.

    .venv/bin/python benchmarks/env_overhead.py [--split easy] [--tasks 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym

import ac_env  # noqa: F401
from ac_env.agents.oracle import GoldPatchPolicy
from ac_env.tokens import ApproxTokenCounter

SIZES = (1_000, 32_000, 128_000)


def bash(command: str) -> str:
    return f"```bash\n{command}\n```"


def step_overhead(split: str, steps: int) -> None:
    print("step overhead (env work only; the command's own run time excluded)")
    print(f"{'context':>10} {'env ms':>8} {'retokenize ms':>14} {'ratio':>7}")
    counter = ApproxTokenCounter()
    for target in SIZES:
        env = gym.make(
            "AutoCompact-SWE-v0",
            split=split,
            context_window=1_000_000,
            forced_compaction_threshold=None,
            output_limit=10_000_000,
            max_steps=10_000,
        )
        env.reset(seed=0)
        tokens = env.unwrapped.context.tokens
        while tokens < target:
            lines = max(1, (target - tokens) // 3)  # `seq` prints about 3 tokens a line
            *_, info = env.step(bash(f"seq 1 {min(lines, 200_000)}"))
            tokens = info["context_tokens"]
        overheads, naive = [], []
        for _ in range(steps):
            *_, info = env.step(bash("true"))
            overheads.append(info["timings"]["env_overhead_s"])
            started = time.perf_counter()
            for message in env.unwrapped.context.observation():
                counter.count(message["content"])
            naive.append(time.perf_counter() - started)
        env.close()
        env_ms = statistics.median(overheads) * 1e3
        naive_ms = statistics.median(naive) * 1e3
        print(f"{tokens:>10} {env_ms:>8.3f} {naive_ms:>14.3f} {naive_ms / env_ms:>6.1f}x")


def reset_and_grading(split: str, tasks: int) -> None:
    env = gym.make("AutoCompact-SWE-v0", split=split)
    resets, gradings = [], []
    for seed in range(tasks):
        started = time.perf_counter()
        obs, _ = env.reset(seed=seed)
        resets.append(time.perf_counter() - started)
        policy = GoldPatchPolicy(env.unwrapped.task)
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(policy.act(obs))
            done = terminated or truncated
        gradings.append(info["timings"]["grading_s"])
        if reward != 1.0:
            print(f"  warning: gold patch not resolved on {env.unwrapped.task.instance_id}")
    env.close()
    print(
        f"reset (materialize + first observation): median {statistics.median(resets) * 1e3:.1f} ms"
        f" over {tasks} tasks (target < 100 ms)"
    )
    print(
        f"grading: median {statistics.median(gradings):.2f} s, max {max(gradings):.2f} s "
        "(target < 2 s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="easy")
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    step_overhead(args.split, args.steps)
    reset_and_grading(args.split, args.tasks)


if __name__ == "__main__":
    main()
