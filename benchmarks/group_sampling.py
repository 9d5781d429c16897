"""SmolLM2 on this machine: one GRPO group of G rollouts at the run's real context length,
decoded one row at a time (the unbatched path) or as one batch, side by side.

    .venv/bin/python benchmarks/group_sampling.py [--group 6] [--context 4000] [--own 150]
        [--new-tokens 64] [--json docs/results/group_sampling.json]  # and .png beside it

The group continues one start state of ``--context`` tokens (the run's post-compaction
contexts are 2,600-4,600). Its rows have diverged: each ends with ``--own`` tokens of its own
(its last action and observation). Rows:

- one row at a time: ``TransformersPolicy.generate_batch`` on one prompt, G times, what a
  rollout worker with its own policy does (the whole prompt prefilled per row);
- diverged rows batched: ``generate_batch`` on the G prompts (``ac_train.models.batched_acts``:
  the shared prefix once, then every row's own tokens, one decode for all);
- one prompt batched: G samples of the start state itself (``samples_per_prompt``, what a
  group's first call is);
- llama.cpp: the wheel's Q4_1 file of the same model decoding the rows one after another
  with no log-probs, as a served sampler with one slot does (``llama-cpp-python``; skipped
  when absent); its decode speed alone is the single-stream ceiling.

Every sample decodes all ``--new-tokens`` (no stop token). Prints a table (wall seconds,
generated tokens/s, speed-up over one row at a time) and writes it as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ac_train.models.checkpoints import load_model, smollm2_gguf_path
from ac_train.models.policy import SamplingSettings, TransformersPolicy

TURN = "Repository: calc. add(2, 3) in calc/ops.py gives -1 instead of 5; tests fail. "
Chat = list[dict[str, str]]


def group_chats(policy: TransformersPolicy, group: int, context: int, own: int) -> list[Chat]:
    """``group`` chats sharing a start state of about ``context`` tokens, each ending in about
    ``own`` tokens of its own."""
    per_turn = len(policy.tokenizer(TURN)["input_ids"])
    start = [{"role": "user", "content": TURN * max(1, context // per_turn)}]
    return [
        [
            *start,
            {"role": "assistant", "content": f"```bash\nsed -n {row},{row + 40}p calc/ops.py\n```"},
            {"role": "user", "content": f"line {row}: " + TURN * max(1, own // per_turn)},
        ]
        for row in range(group)
    ]


def timed(run: Callable[[], int]) -> tuple[float, int]:
    started = time.perf_counter()
    tokens = run()
    return time.perf_counter() - started, tokens


def llamacpp_rows(
    prompts: list[list[int]], new_tokens: int, threads: int
) -> tuple[float, float] | None:
    """The wheel's Q4_1 file in llama.cpp decoding ``prompts`` one after another, as a served
    sampler with one slot does (each reuses the prefix the last one left in its cache), with
    no log-probs: (wall seconds, decode-only tokens/s), or None without llama-cpp-python."""
    try:
        import llama_cpp
    except ImportError:
        return None
    llm = llama_cpp.Llama(
        str(smollm2_gguf_path()),
        n_ctx=max(len(p) for p in prompts) + new_tokens + 8,
        n_threads=threads,
        n_batch=512,
        verbose=False,
    )
    decoding = 0.0
    started = time.perf_counter()
    for prompt_ids in prompts:
        generated = llm.generate(prompt_ids, temp=1.0, top_k=0, top_p=1.0, min_p=0.0)
        next(generated)  # the prefill and the first token
        first = time.perf_counter()
        for _ in range(new_tokens - 1):
            next(generated)
        decoding += time.perf_counter() - first
    return time.perf_counter() - started, len(prompts) * (new_tokens - 1) / decoding


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", type=int, default=6)
    parser.add_argument("--context", type=int, default=4000, help="start state, tokens")
    parser.add_argument("--own", type=int, default=150, help="each row's own tokens")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer = load_model()
    policy = TransformersPolicy(model, tokenizer, temperature=1.0, seed=0)
    policy.stop_token_ids = frozenset()  # every sample decodes all --new-tokens
    sampling = SamplingSettings(max_new_tokens=args.new_tokens, temperature=1.0)
    chats = group_chats(policy, args.group, args.context, args.own)
    lengths = [len(policy.prompt_token_ids(chat)) for chat in chats]
    print(f"group of {args.group}; prompts of {min(lengths)}-{max(lengths)} tokens")

    def generated(outputs: list) -> int:
        return sum(len(o.output_token_ids) for o in outputs)

    ways = {
        "one row at a time": lambda: sum(
            generated(policy.generate_batch([chat], sampling)) for chat in chats
        ),
        "diverged rows batched": lambda: generated(policy.generate_batch(chats, sampling)),
        "one prompt batched": lambda: generated(
            policy.generate_many(chats[0][:1], sampling, args.group)
        ),
    }
    rows = []
    for name, run in ways.items():
        seconds, tokens = timed(run)
        rows.append({"way": name, "seconds": seconds, "tokens_per_s": tokens / seconds})
    served = llamacpp_rows(
        [policy.prompt_token_ids(chat) for chat in chats], args.new_tokens, args.threads
    )
    if served is not None:
        seconds, decode_speed = served
        rows.append(
            {
                "way": "llama.cpp Q4_1, one row at a time, no log-probs",
                "seconds": seconds,
                "tokens_per_s": args.group * args.new_tokens / seconds,
                "decode_only_tokens_per_s": decode_speed,
            }
        )
    print("| way | wall s | generated tokens/s | speed-up |")
    print("|---|---|---|---|")
    for row in rows:
        row["speedup"] = row["tokens_per_s"] / rows[0]["tokens_per_s"]
        print(f"| {row['way']} | {row['seconds']:.1f} | {row['tokens_per_s']:.1f} | "
              f"{row['speedup']:.2f}x |")  # fmt: skip
    if served is not None:
        print(f"llama.cpp decode alone (its ceiling, one stream): {served[1]:.1f} tokens/s")
    if args.json is not None:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        result = {"settings": settings, "prompt_tokens": lengths, "rows": rows}
        args.json.write_text(json.dumps(result, indent=1) + "\n")
        plot(rows, args, args.json.with_suffix(".png"))


def plot(rows: list[dict], args: argparse.Namespace, out: Path) -> None:
    """Generated tokens/s of each way, as bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 3.2))
    axes.barh([row["way"] for row in rows], [row["tokens_per_s"] for row in rows])
    axes.invert_yaxis()
    axes.set_xlabel("generated tokens/s (wall, prefill included)")
    axes.set_title(
        f"a group of {args.group} from a {args.context}-token start state, "
        f"{args.new_tokens} new tokens each (2 cores)",
        fontsize=9,
    )
    figure.tight_layout()
    figure.savefig(out, dpi=120)


if __name__ == "__main__":
    main()
