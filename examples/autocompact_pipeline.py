"""The method end to end on the continuation rung: Base -> judge-corrected data -> SFT -> GRPO.

    .venv/bin/python examples/autocompact_pipeline.py --out runs/pipeline            # 2 cores
    .venv/bin/python examples/autocompact_pipeline.py --out runs/pipeline --preset gpu
    .venv/bin/python examples/autocompact_pipeline.py --quick --model DIR --task-source FILE

Every rollout starts on the continuation rung (``ac_train.grpo.continuation``): right after the
reference agent's compaction, before its fixing edit, with the summary's ``## Next`` naming the
next action. Stages, each resumed from what it wrote:

1. ``base``: held-out evaluation of the starting model;
2. ``collect``: judge-corrected collection with the starting model from the train tasks' exact-
   plan starts (``--collect-samples`` rollouts each, ``OracleJudge``: a first step that ignores
   the plan is replaced by the planned command, recorded as a ``continuation`` correction);
   the successful trajectories are kept;
3. ``sft``: SFT (``autocompact_sft``: policy and judge outputs) on their post-compaction
   segments, then the held-out evaluation;
4. ``grpo``: segment-aware GRPO from the SFT model on the train tasks' exact-plan starts (reward:
   the final tests pass; ``--probe-samples`` rollouts a start first, and draws that favour
   mixed groups), then the held-out evaluation.

The held-out evaluation is the same at every stage: ``--samples`` rollouts of one step from
each held-out task's three starts (the exact plan, the prose plan, the plan naming a wrong
line), scored by ``plan_metrics``: success, first action follows the plan, valid-action rate,
format-error rate. Each metric is a mean over start states with a 95% bootstrap interval,
per plan kind (``exact/success``, ...); each later stage minus base is paired by start state.
Writes ``OUT/pipeline.json`` (``stages``, ``wall_s``, ``held_out``, ``paired``, the GRPO
curve, the settings) and ``OUT/pipeline.png``. ``--stop-after STAGE`` ends a sitting after a
stage; a rerun with the same ``--out`` resumes with the next (the start states are kept in
``OUT/starts.pkl``).
"""

from __future__ import annotations

import argparse
import json
import pickle
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from tqdm import tqdm

import ac_env  # noqa: F401  (registers AutoCompact-SWE-v0)
from ac_env.agents.rollout import RolloutJob, rollout, rollout_many
from ac_env.analysis.stats import bootstrap_mean, paired_difference
from ac_env.tasks import load_tasks
from ac_env.trajectory import Trajectory
from ac_train.collect import ReviewLog
from ac_train.grpo.config import DemonstrationStarts, GRPOConfig
from ac_train.grpo.continuation import (
    METRICS,
    PLAN_KINDS,
    ContinuationStart,
    continuation_starts,
    plan_metrics,
)
from ac_train.grpo.metrics import read_metrics
from ac_train.grpo.start_states import policy_events
from ac_train.grpo.trainer import GRPOTrainer
from ac_train.judge.oracle import OracleJudge
from ac_train.models.batched_acts import BatchedActs
from ac_train.models.checkpoints import load_model
from ac_train.models.policy import TransformersPolicy
from ac_train.segments import segment_trajectory
from ac_train.sft import SFTRunConfig, run_sft

STAGES = ("base", "collect", "sft", "grpo")
EVALUATED = ("base", "sft", "grpo")
MAX_ENV_STEPS, CONTEXT_WINDOW, FORCED_COMPACTION = 50, 8192, 6144
PRESETS: dict[str, dict[str, Any]] = {
    "cpu": {},
    # the method's settings: SFT 2 epochs, lr 5e-7, batch 8; GRPO 8 rollouts, lr 1e-6,
    # batch 64 (8 starts x 8), 50 steps, a 32K window
    "gpu": {
        "sft_learning_rate": 5e-7,
        "sft_batch_size": 8,
        "device": "cuda",
        "group_size": 8,
        "tasks_per_step": 8,
        "grpo_steps": 50,
        "learning_rate": 1e-6,
        "context_window": 32_768,
        "train_tasks": 60,
        "eval_tasks": 20,
        "samples": 4,
        "workers": 8,
        "threads": 8,
    },
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/pipeline"))
    parser.add_argument("--model", default="smollm2", help="'smollm2', an HF name or a dir")
    parser.add_argument("--task-source", help="a task file (default: the built-in easy split)")
    parser.add_argument("--train-tasks", type=int, default=16, help="first N easy train tasks")
    parser.add_argument("--eval-tasks", type=int, default=8, help="first N easy eval tasks")
    parser.add_argument("--samples", type=int, default=2, help="held-out rollouts per start")
    parser.add_argument("--collect-samples", type=int, default=2, help="rollouts per start")
    parser.add_argument("--sft-epochs", type=float, default=2.0)
    parser.add_argument("--sft-learning-rate", type=float, default=1e-4)
    parser.add_argument("--sft-batch-size", type=int, default=2, help="segments a step")
    parser.add_argument("--grpo-steps", type=int, default=8)
    parser.add_argument("--tasks-per-step", type=int, default=1)
    parser.add_argument("--group-size", type=int, default=6)
    parser.add_argument("--probe-samples", type=int, default=2)
    parser.add_argument("--learning-rate", type=float, default=2e-5, help="GRPO")
    parser.add_argument("--max-new-tokens", type=int, default=160, help="a plan's command: ~90")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--context-window", type=int, default=CONTEXT_WINDOW)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--workers", type=int, default=2, help="rollouts graded at once")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument(
        "--stop-after",
        choices=STAGES,
        help="end the sitting after this stage (a rerun resumes with the next one)",
    )
    parser.add_argument("--quick", action="store_true", help="1 task each, 1 SFT and GRPO step")
    parser.add_argument("--preset", choices=list(PRESETS), default="cpu")
    parser.set_defaults(**PRESETS[parser.parse_known_args(argv)[0].preset])
    args = parser.parse_args(argv)
    if args.quick:
        args.train_tasks, args.eval_tasks, args.samples, args.collect_samples = 1, 1, 1, 2
        args.grpo_steps, args.group_size, args.probe_samples = 1, 2, 0
        args.max_new_tokens, args.sft_epochs = 8, 1.0
    return args


class Pipeline:
    """The stages and their shared state: ``OUT/pipeline.json`` holds every stage's results and
    is saved after each unit of work, so a rerun resumes where the last one stopped."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.path = args.out / "pipeline.json"
        self.results: dict[str, Any] = (
            json.loads(self.path.read_text()) if self.path.exists() else {}
        )
        self.results.setdefault("stages", list(STAGES))
        self.results.setdefault("wall_s", {})
        self.results.setdefault("rollouts", {})
        self.env_options: dict[str, Any] = (
            {"task_source": args.task_source, "split": None}
            if args.task_source
            else {"split": "easy"}
        )

    def save(self) -> None:
        self.path.write_text(json.dumps(self.results, indent=2) + "\n")

    def make_env(self) -> gym.Env[Any, Any]:
        return gym.make(
            "AutoCompact-SWE-v0",
            max_steps=MAX_ENV_STEPS,
            context_window=self.args.context_window,
            forced_compaction_threshold=FORCED_COMPACTION,
            **self.env_options,
        )

    def timed(self, stage: str, run: Callable[[], None]) -> None:
        """Run ``stage`` unless it finished before; its wall time adds up over sittings."""
        if stage in self.results.get("done", []):
            print(f"== {stage}: done before ({self.results['wall_s'][stage] / 60:.1f} min)")
            return
        print(f"== {stage}")
        started = time.perf_counter()
        run()
        self.results["wall_s"][stage] = (
            self.results["wall_s"].get(stage, 0.0) + time.perf_counter() - started
        )
        self.results.setdefault("done", []).append(stage)
        self.save()
        if stage == self.args.stop_after:
            raise SystemExit(f"stopped after {stage} (--stop-after); rerun to resume")


def task_ids(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    if args.task_source:  # a task file: its first tasks train, the next ones are held out
        ids = [t.instance_id for t in load_tasks(args.task_source)]
        return ids[: args.train_tasks], ids[args.train_tasks :][: args.eval_tasks]
    train = [t.instance_id for t in load_tasks(split="easy", subset="train")]
    held_out = [t.instance_id for t in load_tasks(split="easy", subset="eval")]
    return train[: args.train_tasks], held_out[: args.eval_tasks]


def cached_starts(
    pipeline: Pipeline, train_ids: list[str], eval_ids: list[str]
) -> tuple[list[ContinuationStart], list[ContinuationStart]]:
    """The train tasks' exact-plan starts and the held-out tasks' starts of every plan, built
    once and kept in ``OUT/starts.pkl`` (a file this run wrote: a later sitting loads it
    instead of running the demonstrations again; other task lists rebuild it)."""
    path = pipeline.args.out / "starts.pkl"
    if path.exists():
        ids, starts = pickle.loads(path.read_bytes())
        if ids == (train_ids, eval_ids):
            return starts
    train = continuation_starts(pipeline.make_env, train_ids, ["exact"])
    held_out = continuation_starts(pipeline.make_env, eval_ids)
    path.write_bytes(pickle.dumps(((train_ids, eval_ids), (train, held_out))))
    return train, held_out


def policy_of(args: argparse.Namespace, model_dir: str) -> TransformersPolicy:
    model, tokenizer = load_model(model_dir)
    model.to(args.device).eval()
    return TransformersPolicy(
        model,
        tokenizer,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        seed=0,
        stop_after_action=True,
    )


def evaluate(
    pipeline: Pipeline, stage: str, model_dir: str, starts: list[ContinuationStart]
) -> None:
    """``results["rollouts"][stage][start id]``: the ``plan_metrics`` of ``--samples`` one-step
    rollouts from each held-out start, one batched decode per start (saved after each)."""
    args = pipeline.args
    done: dict[str, list[dict[str, float]]] = pipeline.results["rollouts"].setdefault(stage, {})
    todo = [start for start in starts if start.id not in done]
    if not todo:
        return
    policy = policy_of(args, model_dir)
    for start in tqdm(todo, desc=f"held out ({stage})", unit="start"):
        jobs = [
            RolloutJob(options={"task_id": start.start.task_id}, start=start.start.snapshot)
            for _ in range(args.samples)
        ]
        shared = BatchedActs(policy, rows=len(jobs), gather_s=10.0)
        runs = rollout_many(
            pipeline.make_env,
            lambda shared=shared: shared,
            jobs,
            workers=len(jobs),
            max_steps=1,
            progress=False,
        )
        scored = [plan_metrics(run, start) for run in runs]
        done[start.id] = [metrics.as_dict() for metrics in scored if metrics is not None]
        pipeline.save()


def collect(pipeline: Pipeline, model_dir: str, starts: list[ContinuationStart]) -> None:
    """Judge-corrected rollouts from the train starts; the successful ones are kept under
    ``OUT/collect/`` (one trajectory file each) with a summary of what the judge did."""
    args = pipeline.args
    out = args.out / "collect"
    out.mkdir(parents=True, exist_ok=True)
    policy = policy_of(args, model_dir)
    summary = {"rollouts": 0, "kept": 0, "corrections": 0, "format_errors": 0}
    env = pipeline.make_env()
    try:
        for start in tqdm(starts, desc="collect", unit="start"):
            for sample in range(args.collect_samples):
                review = ReviewLog(OracleJudge())
                run = rollout(
                    env,
                    policy,
                    options={"task_id": start.start.task_id},
                    start=start.start.snapshot,
                    max_steps=1,
                    review=review,
                )
                summary["rollouts"] += 1
                summary["corrections"] += sum(v.correction is not None for v in review.verdicts)
                summary["format_errors"] += sum(
                    v.candidate == "format_error" for v in review.verdicts
                )
                if run.reward == 1:
                    summary["kept"] += 1
                    run.write(out / f"{start.id}.{sample}.jsonl")
    finally:
        env.close()
    pipeline.results["collect"] = summary
    print(f"collected: {summary}")


def sft(pipeline: Pipeline, model_dir: str, starts: list[ContinuationStart]) -> None:
    """SFT of the starting model on the post-compaction segments of the kept trajectories."""
    args = pipeline.args
    _, tokenizer = load_model(model_dir)
    step_of = {start.id: start.start.step for start in starts}
    segments = []
    for path in sorted((args.out / "collect").glob("*.jsonl")):
        start_id = path.name.rsplit(".", 2)[0]
        own = policy_events(Trajectory.read(path), step_of[start_id])
        segments += [
            s for s in segment_trajectory(own, tokenizer, run_id=path.stem) if s.segment_index >= 1
        ]
    if not segments:
        raise SystemExit("sft: the collection kept no trajectory to train on")
    config = SFTRunConfig(
        model=model_dir,
        output_dir=args.out / "sft",
        epochs=args.sft_epochs,
        max_steps=1 if args.quick else None,
        learning_rate=args.sft_learning_rate,
        batch_size=args.sft_batch_size,
        micro_batch_size=1,
        max_length=args.context_window,
        activation_checkpointing=False,
        progress=True,
    )
    pipeline.results["sft"] = json.loads(run_sft(config, segments).model_dump_json())


def grpo(
    pipeline: Pipeline, model_dir: str, train_ids: list[str], starts: list[ContinuationStart]
) -> None:
    args = pipeline.args
    config = GRPOConfig(
        output_dir=args.out / "grpo",
        model=model_dir,
        env={**pipeline.env_options, "task_ids": train_ids},
        forced_compaction_threshold=FORCED_COMPACTION,
        steps=args.grpo_steps,
        tasks_per_step=args.tasks_per_step,
        rollouts_per_task=args.group_size,
        rollout_max_steps=MAX_ENV_STEPS,
        rollout_max_tokens=args.context_window,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        stop_after_action=True,
        learning_rate=args.learning_rate,
        rollout_workers=args.workers,
        batch_groups=True,
        favour_mixed=True,
        skip_uniform_for=4,
        micro_batch_size=args.group_size,
        save_every=4,
        demonstration=DemonstrationStarts(
            continuation="exact", max_policy_steps=1, probe_samples=args.probe_samples
        ),
    )
    trainer = GRPOTrainer(config, starts=[start.start for start in starts])
    trainer.train()  # resumes from its latest checkpoint
    pipeline.results["grpo_curve"] = [
        {
            "step": m.step,
            "reward": m.reward_mean,
            "informative_groups": m.informative_groups,
            "format_error_rate": m.format_error_rate,
        }
        for m in read_metrics(config.output_dir)
    ]


def tables(results: dict[str, Any], ids: dict[str, list[str]]) -> None:
    """``held_out`` (``<kind>/<metric>`` -> stage -> mean, ci) and ``paired``
    (``<stage>_vs_base`` -> ``<kind>/<metric>`` -> diff, ci) from the rollouts."""
    rollouts = results["rollouts"]
    held_out: dict[str, dict[str, Any]] = {}
    paired: dict[str, dict[str, Any]] = {}
    for kind in PLAN_KINDS:
        for metric in METRICS:
            name = f"{kind}/{metric}"

            def per_start(stage: str, kind: str = kind, metric: str = metric) -> dict[str, Any]:
                return {
                    start_id: [sample[metric] for sample in samples]
                    for start_id, samples in rollouts.get(stage, {}).items()
                    if start_id in ids[kind]
                }

            held_out[name] = {}
            for stage in EVALUATED:
                if stage not in rollouts:
                    continue
                e = bootstrap_mean(list(per_start(stage).values()))
                held_out[name][stage] = {"mean": e.mean, "ci": [e.low, e.high], "n": e.n}
                if stage != "base":
                    d = paired_difference(per_start(stage), per_start("base"))
                    paired.setdefault(f"{stage}_vs_base", {})[name] = {
                        "diff": d.mean,
                        "ci": [d.low, d.high],
                        "n": d.n,
                    }
    results["held_out"] = held_out
    results["paired"] = paired


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    pipeline = Pipeline(args)
    started = time.perf_counter()
    train_ids, eval_ids = task_ids(args)
    print(f"== starts: {len(train_ids)} train tasks, {len(eval_ids)} held-out tasks")
    train, held_out = cached_starts(pipeline, train_ids, eval_ids)
    if not train or not held_out:
        raise SystemExit(
            f"no continuation start: {len(train)} train, {len(held_out)} held out (a task gives "
            "one only when its demonstrator's fix is a one-line edit); add tasks"
        )
    pipeline.results["starts"] = {"train": [s.id for s in train], "held_out": len(held_out)}
    pipeline.results["wall_s"]["starts"] = time.perf_counter() - started

    pipeline.timed("base", lambda: evaluate(pipeline, "base", args.model, held_out))
    pipeline.timed("collect", lambda: collect(pipeline, args.model, train))
    sft_model = str(args.out / "sft" / "final")

    def sft_stage() -> None:
        if not Path(sft_model).exists():
            sft(pipeline, args.model, train)
        evaluate(pipeline, "sft", sft_model, held_out)

    pipeline.timed("sft", sft_stage)

    def grpo_stage() -> None:
        grpo(pipeline, sft_model, train_ids, train)
        last = max(
            (args.out / "grpo").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1])
        )
        evaluate(pipeline, "grpo", str(last), held_out)

    pipeline.timed("grpo", grpo_stage)
    ids = {kind: [s.id for s in held_out if s.kind == kind] for kind in PLAN_KINDS}
    tables(pipeline.results, ids)
    pipeline.results["settings"] = {k: str(v) for k, v in vars(args).items()}
    pipeline.save()
    report(pipeline.results, args.out / "pipeline.png")


def report(results: dict[str, Any], path: Path) -> None:
    print("\nheld out, mean over start states [95% interval]; paired difference from base")
    for name, row in results["held_out"].items():
        cells = [
            f"{stage} {c['mean']:.2f} [{c['ci'][0]:.2f}, {c['ci'][1]:.2f}]"
            for stage, c in row.items()
        ]
        diffs = [
            f"{pair.removesuffix('_vs_base')}-base {d[name]['diff']:+.2f} "
            f"[{d[name]['ci'][0]:+.2f}, {d[name]['ci'][1]:+.2f}]"
            for pair, d in results["paired"].items()
        ]
        print(f"  {name:<30} " + "; ".join(cells + diffs))
    print("wall minutes: " + ", ".join(f"{k} {v / 60:.1f}" for k, v in results["wall_s"].items()))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in METRICS if m != "format_error_rate"] + ["format_error_rate"]
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.2), sharey=True)
    width = 0.26
    for ax, metric in zip(axes, metrics, strict=True):
        for offset, stage in enumerate(EVALUATED):
            cells = [results["held_out"][f"{kind}/{metric}"].get(stage) for kind in PLAN_KINDS]
            heights = [c["mean"] if c else 0.0 for c in cells]
            errors = [
                [c["mean"] - c["ci"][0] if c else 0 for c in cells],
                [c["ci"][1] - c["mean"] if c else 0 for c in cells],
            ]
            x = [i + offset * width for i in range(len(PLAN_KINDS))]
            ax.bar(x, heights, width, yerr=errors, capsize=2, label=stage)
        ax.set_xticks([i + width for i in range(len(PLAN_KINDS))])
        ax.set_xticklabels([k.replace("_", " ") for k in PLAN_KINDS])
        ax.set_title(metric.replace("_", " "))
        ax.set_ylim(0, 1.05)
    axes[0].legend(fontsize="small")
    fig.suptitle("held-out continuation starts, by plan (95% CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path} and {path.with_name('pipeline.json')}")


if __name__ == "__main__":
    main()
