"""GRPO learner cost of a group continuing one state: the shared-prefix forward vs one forward
per rollout.

A group of ``--group`` rollouts from one start state (a ``--context``-token context, then
outputs of 50-100% of ``--output`` tokens each, all trained) runs one learner step
(``ac_train.grpo.loss.accumulate_gradients``) three ways, each in its own process: one rollout
per forward (``micro_batch_size=1``), the whole group per forward without and with
``share_prefix``. Prints seconds per step (median of the timed repeats), peak RSS, and the
speed-up; the gradients are the same (``tests/test_grpo.py``).

    .venv/bin/python benchmarks/grpo_shared_prefix.py [--model tiny|smollm2] [--context 4600]
        [--output 400] [--group 6] [--repeats 2] [--threads 2]
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

from ac_train.grpo.loss import ClipRange, PolicySequence, accumulate_gradients
from ac_train.models.checkpoints import load_model, tiny_model_and_tokenizer

WAYS = {
    "one forward per rollout": (1, False),
    "group per forward, prefix per row": (0, False),
    "group per forward, shared prefix": (0, True),
}


def group(vocab: int, args: argparse.Namespace) -> list[PolicySequence]:
    """The rollouts of one start state; behaviour log-probs 0 with alternating advantages (the
    cost does not depend on them)."""
    rng = random.Random(0)
    context = [rng.randrange(vocab) for _ in range(args.context)]
    sequences = []
    for index in range(args.group):
        output = [rng.randrange(vocab) for _ in range(rng.randrange(args.output // 2, args.output))]
        trained = [False] * len(context) + [True] * len(output)
        advantage = 1.0 if index % 2 else -1.0
        sequences.append(PolicySequence(context + output, trained, [0.0] * len(trained), advantage))
    return sequences


def measure(args: argparse.Namespace) -> dict[str, float]:
    torch.set_num_threads(args.threads)
    model = tiny_model_and_tokenizer()[0] if args.model == "tiny" else load_model(args.model)[0]
    sequences = group(int(model.config.vocab_size), args)
    micro, share = WAYS[args.only]

    def step() -> None:
        model.zero_grad(set_to_none=True)
        accumulate_gradients(
            model,
            sequences,
            micro_batch_size=micro or len(sequences),
            clip=ClipRange(),
            share_prefix=share,
        )

    step()  # warm-up
    times = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return {
        "step_s": statistics.median(times),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="'tiny', 'smollm2', an HF name or dir")
    parser.add_argument("--context", type=int, default=4600, help="the start state's tokens")
    parser.add_argument("--output", type=int, default=400, help="longest output (tokens)")
    parser.add_argument("--group", type=int, default=6, help="rollouts of the start state")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", choices=list(WAYS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        print(json.dumps(measure(args)))
        return
    print(
        f"model {args.model}: a group of {args.group} rollouts of one {args.context}-token "
        f"state, outputs up to {args.output} tokens, {args.threads} threads"
    )
    results = {}
    for way in WAYS:
        command = [sys.executable, __file__, *sys.argv[1:], "--only", way]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        results[way] = json.loads(output.splitlines()[-1])
        figures = results[way]
        print(
            f"  {way:<36}{figures['step_s']:8.1f} s/step, peak RSS "
            f"{figures['peak_rss_mib']:7.0f} MiB"
        )
    base = results["one forward per rollout"]["step_s"]
    shared = results["group per forward, shared prefix"]["step_s"]
    print(f"  shared prefix speed-up over one forward per rollout: {base / shared:.1f}x")


if __name__ == "__main__":
    main()
