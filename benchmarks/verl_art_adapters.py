"""Episodes per minute through verl's agent loop or ART's rollout vs ``gym.make`` in process,
the reference agent acting (compacting once the bug is located), on the built-in easy split;
the same seeds both ways, and the rewards and compactions must match.

    .venv-verl/bin/python benchmarks/verl_art_adapters.py --framework verl [--seeds 1 2]
    .venv-art/bin/python benchmarks/verl_art_adapters.py --framework art [--seeds 1 2]

Through verl: ``local_agent_loop`` (the loop built from verl's registry, ``PolicyServer`` behind
verl's ``LLMServerClient``), then the episode cut into verl outputs. Through ART: ``play`` with
``PolicyClient``, then the ``art.Trajectory``. Context counts use SmolLM2's tokenizer both ways.
One untimed in-process episode first (it fills the task caches). Wall times include the sandbox
and grading; run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents import ReferenceAgent
from ac_env.tokens import HFTokenCounter

ENV = {"task_source": "builtin", "split": "easy"}


def agent() -> ReferenceAgent:
    return ReferenceAgent(compact_when="after_locate")


def in_process(tokenizer: Any) -> Callable[[int], tuple[float, int]]:
    def run(seed: int) -> tuple[float, int]:
        env = gym.make("AutoCompact-SWE-v0", token_counter=HFTokenCounter(tokenizer), **ENV)
        try:
            observation, _ = env.reset(seed=seed)
            policy, done, reward = agent(), False, 0.0
            while not done:
                observation, reward, terminated, truncated, _ = env.step(policy.act(observation))
                done = terminated or truncated
            compactions = len(env.unwrapped.trajectory.compactions())  # type: ignore[attr-defined]
            return float(reward), compactions
        finally:
            env.close()

    return run


def through_verl(tokenizer: Any) -> Callable[[int], tuple[float, int]]:
    from ac_train.integrations.verl_agent_loop import local_agent_loop

    def run(seed: int) -> tuple[float, int]:
        loop = local_agent_loop(agent(), tokenizer, ENV)
        outputs = asyncio.run(
            loop.run({"temperature": 1.0}, raw_prompt=[], extra_info={"seed": seed})
        )
        return float(outputs[-1].reward_score or 0.0), len(outputs) - 1

    return run


def through_art(tokenizer: Any) -> Callable[[int], tuple[float, int]]:
    from ac_train.integrations.art_rollout import AutoCompactScenario, PolicyClient, play

    def run(seed: int) -> tuple[float, int]:
        env = {**ENV, "token_counter": HFTokenCounter(tokenizer)}
        scenario = AutoCompactScenario(env=env, seed=seed)
        episode = asyncio.run(play(PolicyClient(agent(), tokenizer), "reference", scenario))
        trajectory = episode.art_trajectory()
        return trajectory.reward, len(trajectory.additional_histories)

    return run


def timed(run: Callable[[int], tuple[float, int]], seeds: list[int]) -> tuple[float, list]:
    started = time.perf_counter()
    results = [run(seed) for seed in seeds]
    return len(seeds) / ((time.perf_counter() - started) / 60), results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=["verl", "art"], required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    from ac_train.models.checkpoints import load_tokenizer

    tokenizer = load_tokenizer()
    through = through_verl if args.framework == "verl" else through_art
    in_process(tokenizer)(args.seeds[0])  # warm-up: the first episode fills the task caches
    base_rate, base = timed(in_process(tokenizer), args.seeds)
    rate, results = timed(through(tokenizer), args.seeds)
    if results != base:
        raise SystemExit(f"results differ: in process {base}, through {args.framework} {results}")
    print(f"seeds {args.seeds}: (reward, compactions) {results}")
    print(f"in process:          {base_rate:.2f} episodes/min")
    print(f"through {args.framework:<12} {rate:.2f} episodes/min")


if __name__ == "__main__":
    main()
