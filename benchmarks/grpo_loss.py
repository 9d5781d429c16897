"""GRPO learner cost: the segment-aware clipped loss vs a plain causal-LM loss, same tokens.

Both sides run forward + backward over the same batch of segments (same lengths, same
micro-batches, same trained tokens): "plain" is the model's own cross-entropy with ``labels``
(-100 where not trained), "grpo" is ``ac_train.grpo.loss.accumulate_gradients`` (token-mean PPO
clip against behaviour log-probs). Prints learner tokens/s (median of the timed repeats), peak
RSS of each side (each measured in its own process) and the overhead of the GRPO loss.

    .venv/bin/python benchmarks/grpo_loss.py [--model tiny|smollm2] [--segments 8]
        [--length 512] [--micro-batch 4] [--repeats 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import time

import torch
from transformers import PreTrainedModel

from ac_train.grpo.loss import ClipRange, PolicySequence, accumulate_gradients, collate
from ac_train.models.checkpoints import load_model, tiny_model_and_tokenizer


def batch(model: PreTrainedModel, segments: int, length: int, seed: int) -> list[PolicySequence]:
    """Segments of 50-100% of ``length`` tokens; outputs are runs of 10-60 tokens after
    context runs (about 40% trained); behaviour log-probs are the model's own."""
    rng = random.Random(seed)
    vocab = int(model.config.vocab_size)
    sequences = []
    for index in range(segments):
        size = rng.randrange(length // 2, length + 1)
        ids = [rng.randrange(vocab) for _ in range(size)]
        trained = [False] * size
        position = rng.randrange(20, 60)
        while position < size:
            run = rng.randrange(10, 60)
            trained[position : position + run] = [True] * len(trained[position : position + run])
            position += run + rng.randrange(20, 100)
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0, :-1]
            own = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]
        behaviour = [0.0] + [float(v) if t else 0.0 for v, t in zip(own, trained[1:], strict=True)]
        sign = 1.0 if index % 2 else -1.0
        sequences.append(PolicySequence(ids, trained, behaviour, sign))
    return sequences


def plain_step(model: PreTrainedModel, sequences: list[PolicySequence], micro: int) -> None:
    total = sum(s.trained_tokens for s in sequences)
    for start in range(0, len(sequences), micro):
        chunk = collate(sequences[start : start + micro], pad_token_id=0)
        labels = torch.where(chunk.trained, chunk.input_ids, torch.full_like(chunk.input_ids, -100))
        out = model(input_ids=chunk.input_ids, attention_mask=chunk.attention_mask, labels=labels)
        (out.loss * int(chunk.trained[:, 1:].sum()) / total).backward()


def grpo_step(model: PreTrainedModel, sequences: list[PolicySequence], micro: int) -> None:
    accumulate_gradients(model, sequences, micro_batch_size=micro, clip=ClipRange())


def measure(args: argparse.Namespace) -> dict[str, float]:
    torch.set_num_threads(args.threads)
    model = tiny_model_and_tokenizer()[0] if args.model == "tiny" else load_model(args.model)[0]
    sequences = batch(model, args.segments, args.length, seed=0)
    step = plain_step if args.only == "plain" else grpo_step
    tokens = sum(len(s.input_ids) for s in sequences)
    step(model, sequences, args.micro_batch)  # warm-up
    times = []
    for _ in range(args.repeats):
        model.zero_grad(set_to_none=True)
        started = time.perf_counter()
        step(model, sequences, args.micro_batch)
        times.append(time.perf_counter() - started)
    return {
        "tokens_per_s": tokens / statistics.median(times),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "tokens": tokens,
        "trained_tokens": sum(s.trained_tokens for s in sequences),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="'tiny', 'smollm2', an HF name or dir")
    parser.add_argument("--segments", type=int, default=8)
    parser.add_argument("--length", type=int, default=512, help="longest segment (tokens)")
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", choices=["plain", "grpo"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        print(json.dumps(measure(args)))
        return
    results = {}
    for side in ("plain", "grpo"):
        command = [sys.executable, __file__, *sys.argv[1:], "--only", side]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        results[side] = json.loads(output.splitlines()[-1])
    plain, grpo = results["plain"], results["grpo"]
    print(
        f"model {args.model}: {args.segments} segments up to {args.length} tokens "
        f"({plain['tokens']} tokens, {plain['trained_tokens']} trained), "
        f"micro-batch {args.micro_batch}, {args.threads} threads"
    )
    for side, figures in results.items():
        print(
            f"  {side:5s}: {figures['tokens_per_s']:9.0f} tokens/s, "
            f"peak RSS {figures['peak_rss_mib']:7.0f} MiB"
        )
    overhead = plain["tokens_per_s"] / grpo["tokens_per_s"] - 1
    print(f"  GRPO loss overhead: {overhead:+.1%} time (target < 15%)")


if __name__ == "__main__":
    main()
