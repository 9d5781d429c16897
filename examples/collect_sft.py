"""Warm start, judge-corrected collection, SFT, and a held-out evaluation, on CPU.

    .venv/bin/python examples/collect_sft.py --out runs/collect-sft [--quick]

A 135M model writes almost no valid action at first (SmolLM2: every one of its first outputs
on the built-in tasks is a format error), so a judge has nothing to correct. So
it is first warm-started on the reference agent's trajectories (behaviour cloning):

1. ``bc-data``: the reference agent on built-in *train* tasks, no judge;
2. ``bc``: SFT of the model on those segments;
3. ``collect``: the ``bc`` model on the same tasks with the oracle judge correcting timing,
   summaries and continuations before each step executes;
4. ``judge-sft``: SFT of ``bc`` on the corrected segments (format errors not trained);
5. ``eval-*``: base, ``bc`` and ``judge-sft`` on held-out *eval* tasks, the judge in shadow
   mode (verdicts recorded, never applied): valid-action rate, proactive compactions at the
   right time, summaries that pass the judge's state check, success.

Every stage resumes from what it wrote. Prints a table; writes ``OUT/results.json`` and
``OUT/results.png``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Literal

import torch

from ac_train.collect import CollectConfig, CollectSummary, collect
from ac_train.sft import SFTRunConfig, run_sft

METRICS = ("valid_action_rate", "right_time_rate", "summary_pass_rate", "success_rate")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/collect-sft"))
    parser.add_argument("--model", default="smollm2", help="'smollm2', an HF name or a dir")
    parser.add_argument("--train-tasks", type=int, default=4)
    parser.add_argument("--eval-tasks", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=8, help="env steps per episode")
    parser.add_argument("--bc-max-steps", type=int, default=12, help="per reference episode")
    parser.add_argument("--fallback-threshold", type=int, default=2000, help="forced compaction")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--epochs", type=float, default=2.0, help="of each SFT stage")
    parser.add_argument("--learning-rate", type=float, default=1e-4, help="for a 135M model")
    parser.add_argument("--max-length", type=int, default=3072, help="longer segments dropped")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help="1 task, 2 steps, 1 SFT step")
    args = parser.parse_args()
    if args.quick:
        args.train_tasks, args.eval_tasks, args.max_new_tokens = 1, 1, 16
        args.max_steps = args.bc_max_steps = 2
    return args


def episodes(
    args: argparse.Namespace,
    worker: str,
    subset: str,
    judge: str = "oracle",
    mode: Literal["correct", "shadow"] = "correct",
) -> CollectConfig:
    return CollectConfig(
        worker=worker,
        judge=judge,
        judge_mode=mode,
        split="easy",
        subset=subset,
        limit=args.train_tasks if subset == "train" else args.eval_tasks,
        rollouts_per_task=1,
        strategy="learned",
        fallback_threshold=args.fallback_threshold,
        max_steps=args.bc_max_steps if worker == "reference" else args.max_steps,
        max_new_tokens=args.max_new_tokens,
        tokenizer=args.model if mode == "correct" else None,  # evaluations train nothing
    )


def fine_tune(args: argparse.Namespace, model: str, data: Path, out: Path) -> str:
    final = out / "final"
    if not final.exists():
        config = SFTRunConfig(
            model=model,
            output_dir=out,
            epochs=args.epochs,
            max_steps=1 if args.quick else None,
            learning_rate=args.learning_rate,
            batch_size=4,
            micro_batch_size=1,  # no padding on CPU
            max_length=args.max_length,
            train_format_errors=False,
            activation_checkpointing=False,  # faster; SmolLM2 fits in memory without it
        )
        print(run_sft(config, data / "dataset" / "segments.jsonl").model_dump_json())
    return str(final)


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    out: Path = args.out
    print("== 1-2. warm start: SFT on the reference agent's trajectories")
    demos = collect(episodes(args, "reference", "train", judge="none"), out / "bc-data")
    print(demos.model_dump_json())
    bc = fine_tune(args, args.model, out / "bc-data", out / "bc")

    print("== 3-4. judge-corrected collection with the warm-started model, then SFT")
    corrected = collect(episodes(args, f"hf:{bc}", "train"), out / "collect")
    print(corrected.model_dump_json())
    if corrected.segments:
        judged = fine_tune(args, bc, out / "collect", out / "judge-sft")
    else:  # every trajectory was filtered (a model this weak writes mostly format errors)
        print("no kept trajectory to train on: judge-sft is the bc model")
        judged = bc

    print("== 5. held-out evaluation, judge in shadow mode")
    results = {
        name: collect(episodes(args, f"hf:{model}", "eval", mode="shadow"), out / f"eval-{name}")
        for name, model in (("base", args.model), ("bc", bc), ("judge-sft", judged))
    }
    report(results, corrected, out)


def report(results: dict[str, CollectSummary], corrected: CollectSummary, out: Path) -> None:
    print(
        f"\njudge-corrected collection: {corrected.episodes} episodes, {corrected.kept} kept, "
        f"corrections {corrected.corrections}, filtered {corrected.filtered}"
    )
    print(f"{'held-out':<22}" + "".join(f"{name:>11}" for name in results))
    for metric in (*METRICS, "summaries", "proactive_compactions", "reviewed_calls"):
        cells = [getattr(summary, metric) for summary in results.values()]
        print(f"{metric:<22}" + "".join(f"{_cell(c):>11}" for c in cells))
    table = {name: summary.model_dump() for name, summary in results.items()}
    (out / "results.json").write_text(
        json.dumps({"collection": corrected.model_dump(), "eval": table}, indent=2) + "\n"
    )
    _plot(results, out / "results.png")
    print(f"\nwrote {out / 'results.json'} and {out / 'results.png'}")


def _cell(value: float | int | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _plot(results: dict[str, CollectSummary], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.5))
    width = 0.8 / len(results)
    for index, (name, summary) in enumerate(results.items()):
        values = [getattr(summary, m) or 0.0 for m in METRICS]
        ax.bar([i + index * width for i in range(len(METRICS))], values, width, label=name)
    ax.set_xticks([i + width * (len(results) - 1) / 2 for i in range(len(METRICS))])
    ax.set_xticklabels([m.replace("_rate", "").replace("_", " ") for m in METRICS])
    ax.set_ylim(0, 1)
    ax.set_ylabel("rate on held-out tasks")
    ax.set_title("Before and after warm start and judge-corrected SFT (n/a drawn as 0)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
