"""Decoding from a long context: transformers' growing cache vs one reserved up front.

    .venv/bin/python benchmarks/decode_cache.py [--context 4600] [--rows 6] [--steps 40]
        [--threads 2] [--repeats 2]

The setting of a GRPO group continued from a post-compaction state (``TransformersPolicy`` with
``samples_per_prompt``): SmolLM2 prefills one ``--context``-token prompt, repeats its cache into
``--rows`` samples, then decodes ``--steps`` tokens each. Both ways feed the same tokens; the
growing cache (``DynamicCache``, one ``torch.cat`` of every layer's keys and values per step)
and the reserved one (``ac_train.models.decode_cache``, written in place) alternate, ``--repeats``
times each. Prints milliseconds per decode step (median), the ratio, and the largest logit
difference between the two (they compute the same numbers).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from transformers import PreTrainedModel
from transformers.cache_utils import Cache, DynamicCache

from ac_train.models.checkpoints import load_model
from ac_train.models.decode_cache import reserved_cache


@torch.inference_mode()
def decode(
    model: PreTrainedModel, cache: Cache, prompt: torch.Tensor, rows: int, steps: int
) -> tuple[float, torch.Tensor]:
    """Seconds per decode step, and the last step's logits."""
    model(input_ids=prompt, cache=cache, use_cache=True, logits_to_keep=1)
    cache.batch_repeat_interleave(rows)
    tokens = torch.arange(rows)[:, None] + 1000
    started = time.perf_counter()
    for step in range(steps):
        logits = model(input_ids=tokens + step, cache=cache, use_cache=True).logits[:, -1]
    return (time.perf_counter() - started) / steps, logits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, default=4600)
    parser.add_argument("--rows", type=int, default=6)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, _ = load_model("smollm2")
    model.eval()
    prompt = torch.randint(
        200, 40_000, (1, args.context), generator=torch.Generator().manual_seed(0)
    )
    ways: dict[str, Callable[[], Cache]] = {
        "growing (DynamicCache)": lambda: DynamicCache(config=model.config),
        "reserved (decode_cache)": lambda: reserved_cache(model.config, args.context + args.steps),
    }
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    logits: dict[str, torch.Tensor] = {}
    for _ in range(args.repeats):
        for name, make in ways.items():
            per_step, logits[name] = decode(model, make(), prompt, args.rows, args.steps)
            seconds[name].append(per_step)
    print(
        f"SmolLM2, context {args.context}, {args.rows} rows, {args.steps} steps, "
        f"{args.threads} threads"
    )
    for name, values in seconds.items():
        print(f"  {name:<24} {1000 * statistics.median(values):7.0f} ms/step")
    growing, reserved = (statistics.median(values) for values in seconds.values())
    first, second = logits.values()
    print(
        f"  speed-up {growing / reserved:.2f}x; "
        f"max logit difference {float((first - second).abs().max()):.2e}"
    )


if __name__ == "__main__":
    main()
