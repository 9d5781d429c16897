"""Episodes per minute through verifiers (``Env.run_episode``: its rollout, interception server
and scoring around our harness) beside the same episodes in-process (``rollout`` with the same
policy straight at the server), on one llama.cpp server (SmolLM2 GGUF), greedy, so both play
the same episodes. The difference is what verifiers' machinery costs per episode.

    .venv/bin/python benchmarks/verifiers_throughput.py --episodes 3

Needs the verifiers extra and llama-cpp-python's server (``bash scripts/llamacpp.sh install``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "environments" / "autocompact_swe"))

from autocompact_swe import load_environment
from verifiers.v1 import EvalClientConfig, ModelContext

from ac_env.agents.http import OpenAIChatPolicy
from ac_env.agents.rollout import rollout
from ac_train.models.checkpoints import smollm2_gguf_path
from ac_train.models.llamacpp import llamacpp_server


def in_process(url: str, settings: dict[str, Any], seeds: list[int], max_tokens: int) -> int:
    """Plays the episodes; returns the model calls made."""
    calls = 0
    for seed in seeds:
        policy = OpenAIChatPolicy(
            url, "smollm2", api_key_env=None, temperature=0.0, max_tokens=max_tokens
        )
        env = gym.make("AutoCompact-SWE-v0", **settings)
        try:
            calls += len(rollout(env, policy, seed=seed).model_calls())
        finally:
            env.close()
    return calls


async def through_verifiers(
    url: str, settings: dict[str, Any], seeds: list[int], max_tokens: int
) -> int:
    env = load_environment(env=settings, seeds=seeds, temperature=0.0, max_tokens=max_tokens)
    context = ModelContext(
        model="smollm2", client=EvalClientConfig(base_url=url, api_key_var="AUTOCOMPACT_NO_KEY")
    )
    calls = 0
    for task in env.taskset:
        episode = await env.run_episode(task, context)
        if episode.errors or not episode.ok:
            raise SystemExit(f"episode failed: {episode.errors}")
        calls += sum(len(trace.calls) for trace in episode.traces)
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args()
    settings = {
        "split": "easy",
        "sandbox": "local",
        "max_steps": args.max_steps,
        "forced_compaction_threshold": 900,
    }
    seeds = list(range(args.episodes))
    with llamacpp_server([(smollm2_gguf_path(), "smollm2")]) as url:
        in_process(url, settings, seeds[:1], args.max_tokens)  # warm the server's cache
        rows = []
        for name, run in (
            ("in-process", lambda: in_process(url, settings, seeds, args.max_tokens)),
            (
                "verifiers",
                lambda: asyncio.run(through_verifiers(url, settings, seeds, args.max_tokens)),
            ),
        ):
            started = time.perf_counter()
            calls = run()
            seconds = time.perf_counter() - started
            rows.append((name, calls, seconds))
    print(f"{'path':<12}{'episodes':>9}{'calls':>7}{'seconds':>9}{'episodes/min':>14}")
    for name, calls, seconds in rows:
        rate = args.episodes * 60 / seconds
        print(f"{name:<12}{args.episodes:>9}{calls:>7}{seconds:>9.1f}{rate:>14.2f}")


if __name__ == "__main__":
    main()
