"""SmolLM2 on this machine: load times, greedy generation speed, and what HTTP adds per call.

    .venv/bin/python benchmarks/policy_throughput.py [--skip-first-load] [--http-calls 10]

Prints: first load (GGUF conversion into an empty cache) vs cached load; prefill time of a
~300-token chat prompt and greedy decode tokens/s for 64 new tokens; and, for the same policy
served by ``ac_train.models.serve`` on loopback, the client's wall time per call next to the
server's
own generation time, whose difference is the HTTP policy's overhead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence

import torch

from ac_env.agents.http import OpenAIChatPolicy
from ac_env.policy import PolicyOutput
from ac_train.models.checkpoints import load_model
from ac_train.models.policy import SamplingSettings, TransformersPolicy
from ac_train.models.serve import ChatCompletionServer, serving_in_thread

SYSTEM = (
    "You are a coding agent working in a terminal. Each turn, answer with exactly one bash "
    "block. Read files before editing them, run the tests after every change, and submit when "
    "the failing tests pass. Keep answers short; never explain what you are about to do."
)
TASK = (
    "Repository: calc. The function add(a, b) in calc/ops.py returns the wrong value: "
    "add(2, 3) gives -1 instead of 5, and tests/test_ops.py::test_add fails. "
) * 4 + "Start by listing the numbers from 1 to 100, one per line, then look at the repository."


class TimedPolicy(TransformersPolicy):
    """Records how long each generation takes inside the server."""

    generate_s: list[float]

    def generate(
        self, observation: Sequence[Mapping[str, str]], sampling: SamplingSettings
    ) -> PolicyOutput:
        started = time.perf_counter()
        output = super().generate(observation, sampling)
        self.generate_s.append(time.perf_counter() - started)
        return output


def timed_load(label: str) -> tuple[float, TransformersPolicy]:
    started = time.perf_counter()
    model, tokenizer = load_model("smollm2")
    seconds = time.perf_counter() - started
    print(f"{label:<34} {seconds:7.2f} s", flush=True)
    return seconds, TransformersPolicy(model, tokenizer)


def measure_loads(skip_first: bool) -> TransformersPolicy:
    if skip_first:
        return timed_load("cached load")[1]
    with tempfile.TemporaryDirectory(prefix="ac-bench-cache-") as empty_cache:
        previous = os.environ.get("AUTOCOMPACT_CACHE")
        os.environ["AUTOCOMPACT_CACHE"] = empty_cache
        try:
            timed_load("first load (GGUF conversion)")
            return timed_load("cached load")[1]
        finally:
            if previous is None:
                del os.environ["AUTOCOMPACT_CACHE"]
            else:
                os.environ["AUTOCOMPACT_CACHE"] = previous


def measure_generation(policy: TransformersPolicy, repeats: int) -> None:
    chat = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    prompt_tokens = len(policy.prompt_token_ids(chat))
    prefill_s, total_s, produced = [], [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        policy.generate(chat, SamplingSettings(max_new_tokens=1))
        prefill_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        output = policy.generate(chat, SamplingSettings(max_new_tokens=64))
        total_s.append(time.perf_counter() - started)
        produced = len(output.output_token_ids or [])
    prefill, total = statistics.median(prefill_s), statistics.median(total_s)
    print(f"prompt tokens                      {prompt_tokens:7d}")
    prefill_rate = prompt_tokens / prefill
    print(f"prefill + first token              {prefill:7.3f} s  ({prefill_rate:.0f} tok/s)")
    print(f"greedy generation, {produced} tokens      {total:7.3f} s")
    print(f"decode speed                       {(produced - 1) / (total - prefill):7.1f} tok/s")
    print(f"end-to-end output speed            {produced / total:7.1f} tok/s", flush=True)


def measure_http(policy: TransformersPolicy, calls: int, max_tokens: int) -> None:
    timed = TimedPolicy(policy.model, policy.tokenizer)
    timed.generate_s = []
    chat = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Say hello."}]
    client_s = []
    with serving_in_thread(ChatCompletionServer(timed, "smollm2")) as url:
        client = OpenAIChatPolicy(
            url, "smollm2", api_key_env=None, max_tokens=max_tokens, logprobs=True
        )
        client.act(chat)  # warm-up
        timed.generate_s.clear()
        for _ in range(calls):
            started = time.perf_counter()
            client.act(chat)
            client_s.append(time.perf_counter() - started)
    overheads = [c - s for c, s in zip(client_s, timed.generate_s, strict=True)]
    print(f"HTTP call ({max_tokens} max tokens), client   {statistics.median(client_s):7.4f} s")
    print(f"  server generation                {statistics.median(timed.generate_s):7.4f} s")
    print(
        f"  HTTP overhead per call           {statistics.median(overheads) * 1000:7.2f} ms "
        f"(min {min(overheads) * 1000:.2f}, max {max(overheads) * 1000:.2f})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-first-load", action="store_true", help="skip the conversion")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--http-calls", type=int, default=10)
    parser.add_argument("--http-max-tokens", type=int, default=8)
    parser.add_argument(
        "--threads", type=int, help="torch CPU threads; on a busy machine 1 can beat more"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {sys.platform}")
    policy = measure_loads(args.skip_first_load)
    measure_generation(policy, args.repeats)
    measure_http(policy, args.http_calls, args.http_max_tokens)


if __name__ == "__main__":
    main()
