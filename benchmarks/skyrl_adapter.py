"""Episodes per minute through the SkyRL adapter (``skyrl_gym.make``/``init``/``step``/``close``,
the chat kept by the adapter's rewrite rule) vs ``gym.make("AutoCompact-SWE-v0")`` in process,
the reference agent acting, on the built-in easy split; the same seeds both ways, and the
rewards must match.

    .venv/bin/python benchmarks/skyrl_adapter.py [--episodes 8] [--quick]

Wall times include the sandbox and grading; run it on a quiet machine. ``--quick``: 2 episodes.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import skyrl_gym

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents import ReferenceAgent
from ac_env.integrations.skyrl import ENV_CLASS, register

TASKS = {"task_source": "builtin", "split": "easy"}


def in_process(seed: int) -> float:
    env = gym.make("AutoCompact-SWE-v0", **TASKS)
    try:
        observation, _ = env.reset(seed=seed)
        agent, done, reward = ReferenceAgent(), False, 0.0
        while not done:
            observation, reward, terminated, truncated, _ = env.step(agent.act(observation).text)
            done = terminated or truncated
        return float(reward)
    finally:
        env.close()


def through_skyrl(seed: int) -> float:
    env = skyrl_gym.make(ENV_CLASS, env_config=TASKS, extras={"seed": seed})
    try:
        chat, _ = env.init([])
        agent, done, reward = ReferenceAgent(), False, 0.0
        while not done:
            text = agent.act(tuple(chat)).text
            chat.append({"role": "assistant", "content": text})
            output = env.step(text)
            chat = chat[: output["metadata"]["keep"]] + output["observations"]
            done, reward = output["done"], output["reward"]
        return float(reward)
    finally:
        env.close()


def timed(run, seeds: list[int]) -> tuple[float, list[float]]:
    started = time.perf_counter()
    rewards = [run(seed) for seed in seeds]
    return len(seeds) / ((time.perf_counter() - started) / 60), rewards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="2 episodes")
    args = parser.parse_args()
    seeds = list(range(2 if args.quick else args.episodes))
    register()
    local_rate, local_rewards = timed(in_process, seeds)
    skyrl_rate, skyrl_rewards = timed(through_skyrl, seeds)
    assert skyrl_rewards == local_rewards, (skyrl_rewards, local_rewards)
    print(f"episodes: {len(seeds)}  rewards (both ways): {local_rewards}")
    print(f"in process   : {local_rate:6.1f} episodes/min")
    print(f"through SkyRL: {skyrl_rate:6.1f} episodes/min ({skyrl_rate / local_rate:.2f}x)")


if __name__ == "__main__":
    main()
