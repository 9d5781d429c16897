"""SmolLM2 on this machine: a GRPO group of G samples of one prompt, one at a time or as one
batched decode (``TransformersPolicy(samples_per_prompt=G)``, ``GRPOConfig.batch_groups``).

    .venv/bin/python benchmarks/group_sampling.py [--group 6] [--new-tokens 64] [--repeat 20]

Prints the wall time of each way and the generated tokens per second. The prompt is a chat of
about ``--repeat`` x 60 tokens; every sample runs to ``--new-tokens`` (no stop token).
"""

from __future__ import annotations

import argparse
import time

import torch

from ac_train.models import SamplingSettings, TransformersPolicy, load_model

TURN = "Repository: calc. add(2, 3) in calc/ops.py gives -1 instead of 5; tests fail. " * 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", type=int, default=6)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=20, help="prompt length, x ~60 tokens")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer = load_model()
    chat = [{"role": "user", "content": TURN * args.repeat}]
    policy = TransformersPolicy(model, tokenizer, temperature=1.0, seed=0)
    policy.stop_token_ids = frozenset()  # every sample decodes all --new-tokens
    sampling = SamplingSettings(max_new_tokens=args.new_tokens, temperature=1.0)
    print(f"prompt: {len(policy.prompt_token_ids(chat))} tokens; group of {args.group}")
    for name, n_calls, n_each in (("one at a time", args.group, 1), ("batched", 1, args.group)):
        started = time.perf_counter()
        outputs = [o for _ in range(n_calls) for o in policy.generate_many(chat, sampling, n_each)]
        seconds = time.perf_counter() - started
        tokens = sum(len(o.output_token_ids) for o in outputs)
        print(f"{name:>14}: {seconds:6.1f} s, {tokens / seconds:6.1f} generated tokens/s")


if __name__ == "__main__":
    main()
