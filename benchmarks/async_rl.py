"""Asynchronous GRPO: rollout throughput with 1 vs 2 workers, and the learner's wait for data
in synchronous vs asynchronous mode.

Each configuration is a real GRPO run (``GRPOTrainer`` or ``AsyncGRPOTrainer``) of ``--steps``
steps on built-in tasks, with the tiny random model by default: episodes are real (sandbox,
model calls, grading), and the learner takes its real step (a random model solves nothing, so
all rewards are 0 and the step has no gradient: the learner's own time is small, so async
has little learner time to hide). Throughput is episodes trained on or dropped per minute:
over the run's wall time (start-up and shutdown included), and in steady state (steps after
the first, from the step's ``wait_s + learn_s``). The learner's wait is ``wait_s`` from
``metrics.jsonl`` (sync: the whole rollout phase of the step).

    .venv/bin/python benchmarks/async_rl.py [--model tiny|smollm2] [--steps 4] [--split easy]
        [--tasks-per-step 2] [--rollouts-per-task 2] [--max-steps 3] [--max-new-tokens 16]
        [--max-staleness 1] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from ac_train.grpo.async_trainer import AsyncConfig, AsyncGRPOTrainer
from ac_train.grpo.config import GRPOConfig
from ac_train.grpo.metrics import StepMetrics
from ac_train.grpo.trainer import GRPOTrainer
from ac_train.models.checkpoints import load_model, tiny_model_and_tokenizer


def run(args: argparse.Namespace, mode: str, workers: int, out: Path) -> dict[str, float]:
    model, tokenizer = (
        tiny_model_and_tokenizer() if args.model == "tiny" else load_model(args.model)
    )
    config = GRPOConfig(
        output_dir=out / f"{mode}-{workers}",
        model=args.model,
        env={"split": args.split},
        steps=args.steps,
        tasks_per_step=args.tasks_per_step,
        rollouts_per_task=args.rollouts_per_task,
        rollout_max_steps=args.max_steps,
        rollout_max_tokens=32_768,
        max_new_tokens=args.max_new_tokens,
        rollout_workers=workers,
        save_every=args.steps,
        resume=False,
        progress=False,
    )
    started = time.perf_counter()
    history: list[StepMetrics]
    if mode == "async":
        settings = AsyncConfig(max_staleness=args.max_staleness, on_stale="pause")
        history = AsyncGRPOTrainer(config, settings, model, tokenizer).train()
    else:
        history = GRPOTrainer(config, model, tokenizer).train()
    wall = time.perf_counter() - started
    groups = sum(m.rollouts for m in history) // args.rollouts_per_task + sum(
        m.dropped_groups for m in history
    )
    episodes = groups * args.rollouts_per_task
    later = history[1:]
    later_episodes = sum(m.rollouts + m.dropped_groups * args.rollouts_per_task for m in later)
    later_s = sum(m.wait_s + m.learn_s for m in later)
    return {
        "wall_s": wall,
        "episodes": episodes,
        "episodes_per_min": episodes / wall * 60,
        "steady_episodes_per_min": later_episodes / later_s * 60 if later_s else 0.0,
        "wait_s_mean": statistics.mean(m.wait_s for m in history),
        "wait_s_after_first": statistics.mean(m.wait_s for m in history[1:]) if history[1:] else 0,
        "learn_s_mean": statistics.mean(m.learn_s for m in history),
        "staleness_mean": statistics.mean(m.staleness_mean for m in history),
        "dropped_groups": sum(m.dropped_groups for m in history),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="'tiny', 'smollm2' or an HF path")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--split", default="easy")
    parser.add_argument("--tasks-per-step", type=int, default=2)
    parser.add_argument("--rollouts-per-task", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=3, help="env steps per episode")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--max-staleness", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-async-") as tmp:
        for mode, workers in (("sync", 1), ("sync", 2), ("async", 1), ("async", 2)):
            results[f"{mode}-{workers}"] = run(args, mode, workers, Path(tmp))

    print(
        f"model {args.model}, {args.steps} steps x {args.tasks_per_step} tasks x "
        f"{args.rollouts_per_task} rollouts, <= {args.max_steps} env steps and "
        f"{args.max_new_tokens} new tokens per turn, max_staleness {args.max_staleness} (pause)"
    )
    print(
        f"{'run':<9} {'wall s':>7} {'episodes':>8} {'ep/min':>7} {'steady':>7} {'wait s/step':>11} "
        f"{'wait after 1st':>14} {'learn s':>8} {'stale':>6} {'dropped':>7}"
    )
    for name, r in results.items():
        print(
            f"{name:<9} {r['wall_s']:7.1f} {r['episodes']:8.0f} {r['episodes_per_min']:7.1f} "
            f"{r['steady_episodes_per_min']:7.1f} "
            f"{r['wait_s_mean']:11.2f} {r['wait_s_after_first']:14.2f} {r['learn_s_mean']:8.3f} "
            f"{r['staleness_mean']:6.2f} {r['dropped_groups']:7.0f}"
        )
    ratios = {
        "async_throughput_2_vs_1_workers": results["async-2"]["episodes_per_min"]
        / results["async-1"]["episodes_per_min"],
        "async_steady_throughput_2_vs_1_workers": results["async-2"]["steady_episodes_per_min"]
        / results["async-1"]["steady_episodes_per_min"],
        "sync_throughput_2_vs_1_workers": results["sync-2"]["episodes_per_min"]
        / results["sync-1"]["episodes_per_min"],
        "learner_wait_async_vs_sync_2_workers": results["async-2"]["wait_s_mean"]
        / results["sync-2"]["wait_s_mean"],
        "learner_wait_after_first_async_vs_sync_2_workers": results["async-2"]["wait_s_after_first"]
        / results["sync-2"]["wait_s_after_first"],
        "wall_async_vs_sync_2_workers": results["async-2"]["wall_s"] / results["sync-2"]["wall_s"],
    }
    for name, value in ratios.items():
        print(f"{name}: {value:.2f}")
    print(json.dumps({"results": results, "ratios": ratios}))


if __name__ == "__main__":
    main()
