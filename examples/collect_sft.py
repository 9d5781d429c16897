"""Warm start, judge-corrected collection, SFT, and a held-out evaluation, on CPU.

    .venv/bin/python examples/collect_sft.py --out runs/collect-sft --engine llamacpp [--quick]

A 135M model writes almost no valid action at first (SmolLM2: every one of its first outputs
on the built-in tasks is a format error), so a judge has nothing to correct. So
it is first warm-started on the reference agent's trajectories (behaviour cloning):

1. ``bc-data``: the reference agent on built-in *train* tasks, no judge;
2. ``bc``: SFT of the model on those segments;
3. ``collect``: the ``bc`` model on the same tasks with the oracle judge correcting timing,
   summaries and continuations before each step executes;
4. ``judge-sft``: SFT of ``bc`` on the corrected segments (format errors not trained: the
   ``autocompact_sft`` preset);
   with ``--swe-compressor``, also ``collect-uncorrected`` (the ``bc`` model on the same tasks
   and seeds, no judge) and ``swe-compressor``: SFT of ``bc`` on those uncorrected
   demonstrations (the ``swe_compressor`` preset), so that it and ``judge-sft`` differ exactly
   by the judge's correction, as the method's SWE-Compressor and AutoCompact-SFT rows do;
5. ``eval-*``: base, ``bc`` and ``judge-sft`` (and ``swe-compressor``) on the first
   ``--eval-tasks`` held-out *eval*
   tasks (easy, then medium, then hard), the judge in shadow mode (verdicts recorded, never
   applied). Figures (``ac_train.shadow_eval``): valid-action rate, proactive compactions at
   the right time, summaries that omit the key state or the next step, re-reads after a
   compaction, success; each with a 95% bootstrap interval over tasks, and each checkpoint
   against the one before it, paired by task.

``--engine llamacpp`` (SmolLM2 only; ``bash scripts/llamacpp.sh install``) evaluates through
llama.cpp's server: each checkpoint is exported to GGUF and quantized to Q8_0 (the base model
too, so all three are served alike), several times faster than sampling in process.

Every stage resumes from what it wrote. Prints a table; writes ``OUT/results.json`` (with the
wall time of each stage run) and ``OUT/results.png``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

import torch

from ac_train.collect import CollectConfig, CollectedEpisode, CollectSummary, collect, read_episodes
from ac_train.sft import SFTRunConfig, run_sft
from ac_train.shadow_eval import FIGURES, describe, evaluate, paired_difference, per_task

PLOTTED = ("valid_action", "right_time", "missed_key_state", "missed_next_step", "success")
T = TypeVar("T")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/collect-sft"))
    parser.add_argument("--model", default="smollm2", help="'smollm2', an HF name or a dir")
    parser.add_argument("--train-tasks", type=int, default=12)
    parser.add_argument("--eval-tasks", type=int, default=20, help="held-out tasks")
    parser.add_argument("--engine", choices=("hf", "llamacpp"), default="hf", help="evaluation")
    parser.add_argument("--port", type=int, default=8097, help="llamacpp: the server's port")
    parser.add_argument("--max-steps", type=int, default=8, help="env steps per episode")
    parser.add_argument("--bc-max-steps", type=int, default=16, help="per reference episode")
    parser.add_argument(
        "--fallback-threshold", type=int, default=4000, help="forced compaction (tokens)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--epochs", type=float, default=2.0, help="of the warm start")
    parser.add_argument("--judge-epochs", type=float, default=1.0, help="of judge-corrected SFT")
    parser.add_argument("--learning-rate", type=float, default=1e-4, help="for a 135M model")
    parser.add_argument("--max-length", type=int, default=4096, help="longer segments dropped")
    parser.add_argument("--threads", type=int, default=2, help="torch and llama.cpp threads")
    parser.add_argument(
        "--swe-compressor",
        action="store_true",
        help="also train and evaluate SWE-Compressor: SFT on the same model's uncorrected runs",
    )
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
        split="easy" if subset == "train" else None,  # held out: easy, then medium, hard
        subset=subset,
        limit=args.train_tasks if subset == "train" else args.eval_tasks,
        rollouts_per_task=1,
        strategy="learned",
        fallback_threshold=args.fallback_threshold,
        max_steps=args.bc_max_steps if worker == "reference" else args.max_steps,
        max_new_tokens=args.max_new_tokens,
        tokenizer=args.model if mode == "correct" else None,  # evaluations train nothing
    )


def timed(out: Path, stage: str, run: Callable[[], T]) -> T:
    """``run()``, adding its wall time to ``OUT/timings.json`` (a resumed stage adds again)."""
    path = out / "timings.json"
    start = time.monotonic()
    result = run()
    timings = json.loads(path.read_text()) if path.exists() else {}
    timings[stage] = round(timings.get(stage, 0.0) + time.monotonic() - start, 1)
    path.write_text(json.dumps(timings, indent=2) + "\n")
    return result


def fine_tune(
    args: argparse.Namespace,
    model: str,
    data: Path,
    out: Path,
    epochs: float,
    preset: str = "autocompact_sft",
) -> str:
    final = out / "final"
    if not final.exists():
        config = SFTRunConfig.from_preset(
            preset,
            model=model,
            output_dir=out,
            epochs=epochs,
            max_steps=1 if args.quick else None,
            learning_rate=args.learning_rate,
            batch_size=4,
            micro_batch_size=1,  # no padding on CPU
            max_length=args.max_length,
            activation_checkpointing=False,  # faster; SmolLM2 fits in memory without it
        )
        print(run_sft(config, data / "dataset" / "segments.jsonl").model_dump_json())
    return str(final)


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    print("== 1-2. warm start: SFT on the reference agent's trajectories")
    demos = timed(
        out,
        "bc-data",
        lambda: collect(episodes(args, "reference", "train", judge="none"), out / "bc-data"),
    )
    print(demos.model_dump_json())
    bc_data, bc_out = out / "bc-data", out / "bc"
    bc = timed(out, "bc", lambda: fine_tune(args, args.model, bc_data, bc_out, args.epochs))

    print("== 3-4. judge-corrected collection with the warm-started model, then SFT")
    corrected = timed(
        out, "collect", lambda: collect(episodes(args, f"hf:{bc}", "train"), out / "collect")
    )
    print(corrected.model_dump_json())
    if corrected.segments:
        data, sft_out, epochs = out / "collect", out / "judge-sft", args.judge_epochs
        judged = timed(out, "judge-sft", lambda: fine_tune(args, bc, data, sft_out, epochs))
    else:  # every trajectory was filtered (a model this weak writes mostly format errors)
        print("no kept trajectory to train on: judge-sft is the bc model")
        judged = bc

    checkpoints = {"base": args.model, "bc": bc, "judge-sft": judged}
    if args.swe_compressor:
        print("== 4b. SWE-Compressor: the same model's uncorrected runs, then SFT")
        config = episodes(args, f"hf:{bc}", "train", judge="none")
        plain = timed(
            out, "collect-uncorrected", lambda: collect(config, out / "collect-uncorrected")
        )
        print(plain.model_dump_json())
        data, compressor_out = out / "collect-uncorrected", out / "swe-compressor"
        checkpoints["swe-compressor"] = (
            timed(
                out,
                "swe-compressor",
                lambda: fine_tune(
                    args, bc, data, compressor_out, args.judge_epochs, "swe_compressor"
                ),
            )
            if plain.segments
            else bc
        )

    print(f"== 5. held-out evaluation ({args.engine}), judge in shadow mode")
    results = held_out(args, checkpoints, out)
    report(results, corrected, out)


def held_out(
    args: argparse.Namespace, checkpoints: dict[str, str], out: Path
) -> dict[str, list[CollectedEpisode]]:
    """Each checkpoint's shadow-judged episodes on the held-out tasks."""

    def run(name: str, worker: str) -> list[CollectedEpisode]:
        config = episodes(args, worker, "eval", mode="shadow")
        timed(out, f"eval-{name}", lambda: collect(config, out / f"eval-{name}"))
        return read_episodes(out / f"eval-{name}")

    if args.engine == "hf":
        return {name: run(name, f"hf:{path}") for name, path in checkpoints.items()}
    from ac_train.models.llamacpp import llamacpp_server

    results = {}
    for name, path in checkpoints.items():  # one server each: it decodes on every core given
        gguf = timed(out, "gguf", lambda: q8_gguf(path, out / "gguf" / name))  # noqa: B023
        served = [(gguf, name)]
        with llamacpp_server(served, n_ctx=16384, port=args.port, threads=args.threads) as url:
            results[name] = run(name, f"openai:{name}@{url}")
    return results


def q8_gguf(checkpoint: str, stem: Path) -> Path:
    """``checkpoint`` (SmolLM2's architecture) as a Q8_0 GGUF at ``stem.q8_0.gguf``, once."""
    from ac_train.models.checkpoints import load_model, smollm2_gguf_path
    from ac_train.models.gguf_export import export_gguf
    from ac_train.models.llamacpp import quantize_q8_0

    target = stem.with_suffix(".q8_0.gguf")
    if not target.exists():
        stem.parent.mkdir(parents=True, exist_ok=True)
        model, _ = load_model(checkpoint)
        full = export_gguf(model, smollm2_gguf_path(), stem.with_suffix(".f32.gguf"))
        quantize_q8_0(full, target)
        full.unlink()
    return target


def report(
    results: dict[str, list[CollectedEpisode]], corrected: CollectSummary, out: Path
) -> None:
    print(
        f"\njudge-corrected collection: {corrected.episodes} episodes, {corrected.kept} kept, "
        f"corrections {corrected.corrections}, filtered {corrected.filtered}"
    )
    evaluations = {name: evaluate(episodes) for name, episodes in results.items()}
    names = list(results)
    pairs = [*zip(names[1:], names[:-1], strict=True), (names[-1], names[0])]
    differences = {
        f"{a} - {b}": {
            figure: paired_difference(per_task(results[a], figure), per_task(results[b], figure))
            for figure in FIGURES
        }
        for a, b in pairs
    }
    tasks = {e.tasks for e in evaluations.values()}
    print(f"held-out: {tasks} tasks; 95% intervals by resampling tasks")
    print(f"{'':<24}" + "".join(f"{name:>22}" for name in names))
    for figure in FIGURES:
        cells = [describe(evaluations[name].figures[figure]) for name in names]
        print(f"{figure:<24}" + "".join(f"{c:>22}" for c in cells))
    print("\npaired by task")
    print(f"{'':<24}" + "".join(f"{pair:>22}" for pair in differences))
    for figure in FIGURES:
        cells = [describe(differences[pair][figure], signed=True) for pair in differences]
        print(f"{figure:<24}" + "".join(f"{c:>22}" for c in cells))
    timings = json.loads((out / "timings.json").read_text())
    print(f"\nwall time (s): {timings}")
    (out / "results.json").write_text(
        json.dumps(
            {
                "collection": corrected.model_dump(),
                "eval": {n: e.model_dump() for n, e in evaluations.items()},
                "paired": {
                    p: {f: r.model_dump() for f, r in d.items()} for p, d in differences.items()
                },
                "wall_time_s": timings,
            },
            indent=2,
        )
        + "\n"
    )
    _plot(evaluations, out / "results.png")
    print(f"\nwrote {out / 'results.json'} and {out / 'results.png'}")


def _plot(evaluations: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 3.8))
    width = 0.8 / len(evaluations)
    for index, (name, evaluation) in enumerate(evaluations.items()):
        ratios = [evaluation.figures[f] for f in PLOTTED]
        xs = [i + index * width for i in range(len(PLOTTED))]
        values = [r.value or 0.0 for r in ratios]
        errors = [
            [(r.value - r.low) if r.value is not None else 0.0 for r in ratios],
            [(r.high - r.value) if r.value is not None else 0.0 for r in ratios],
        ]
        ax.bar(xs, values, width, yerr=errors, capsize=3, label=name)
    ax.set_xticks([i + width * (len(evaluations) - 1) / 2 for i in range(len(PLOTTED))])
    ax.set_xticklabels([f.replace("_", " ") for f in PLOTTED])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("rate on held-out tasks")
    ax.set_title("SmolLM2 before and after warm start and judge-corrected SFT (95% CI; n/a as 0)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
