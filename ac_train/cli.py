"""``ac-train``: command-line entry point of the training stages.

Each subcommand is one ``add_<name>(subparsers)`` function that declares its arguments and
sets ``handler`` to the function that runs it; ``SUBCOMMANDS`` lists them in help order.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Subparsers = Any  # argparse's private _SubParsersAction


def add_collect(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "collect",
        help="judge-corrected on-policy collection",
        description="Run a policy on tasks with a judge reviewing each step before it executes; "
        "write OUT/trajectories, OUT/episodes.jsonl, OUT/summary.json (filters, correction mix) "
        "and OUT/dataset (segments of the kept trajectories). Rerunning resumes. Options left "
        "out take CollectConfig's defaults.",
    )
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--worker", help="reference | hf:<path|smollm2> | openai:<model>@<url>")
    parser.add_argument("--judge", help="oracle (default) | none | llm:<worker>")
    parser.add_argument(
        "--shadow",
        action="store_const",
        const="shadow",
        dest="judge_mode",
        help="record the judge's verdicts but execute the policy's steps (evaluation)",
    )
    parser.add_argument("--source", dest="task_source", help="'builtin' or a task file")
    parser.add_argument("--split", help="task split; 'all' for every split")
    parser.add_argument("--subset", choices=["train", "eval"], help="built-in: train or held-out")
    parser.add_argument("--ids", dest="task_ids", nargs="+", help="only these task ids")
    parser.add_argument("--limit", type=int, help="first N tasks")
    parser.add_argument("--rollouts-per-task", type=int)
    parser.add_argument("--strategy", help="compaction strategy (default: learned)")
    parser.add_argument("--fallback-threshold", type=int, help="forced compaction (tokens)")
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--max-new-tokens", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--sandbox")
    parser.add_argument("--tokenizer", help="for the dataset (default: the hf worker's)")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(handler=_run_collect)


def _run_collect(args: argparse.Namespace) -> int:
    """Exit 2 (one line, nothing written) for a configuration that cannot work, 3 when every
    episode failed for infrastructure reasons."""
    from ac_env.bench.failures import INFRA_EXIT_CODE, failed_cells
    from ac_train.collect import CollectConfig, collect, read_episodes

    names = [
        "worker",
        "judge",
        "judge_mode",
        "task_source",
        "subset",
        "task_ids",
        "limit",
        "rollouts_per_task",
        "strategy",
        "fallback_threshold",
        "max_steps",
        "temperature",
        "max_new_tokens",
        "seed",
        "sandbox",
        "tokenizer",
    ]
    given: dict[str, Any] = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    if args.split is not None:
        given["split"] = None if args.split == "all" else args.split
    try:  # a bad setting or task selection is the caller's, not a crash
        summary = collect(CollectConfig(**given), args.out, progress=not args.no_progress)
    except ValueError as err:  # pydantic's ValidationError is one
        print(f"ac-train collect: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(summary.model_dump_json())
    failed = failed_cells(
        ("collect", (e.error or "unknown") if e.status == "infra_error" else None)
        for e in read_episodes(args.out)
    )
    for cell in failed:
        print(f"ac-train collect: {cell.line()}", file=sys.stderr)
    return INFRA_EXIT_CODE if failed else 0


def add_segments(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "segments",
        help="cut trajectories into training segments",
        description="Cut trajectory files into segments; write OUT/segments.jsonl and the SFT "
        "columns as a Hugging Face dataset in OUT/hf.",
    )
    parser.add_argument("trajectories", nargs="+", help="trajectory .jsonl files or directories")
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument(
        "--tokenizer", default="smollm2", help="the policy's tokenizer: 'smollm2', HF name or dir"
    )
    parser.add_argument(
        "--prefix-mismatch",
        choices=["raise", "split"],
        default="raise",
        help="when a prompt is not a token prefix of its segment: fail, or start a new part",
    )
    parser.add_argument(
        "--no-format-errors",
        action="store_true",
        help="leave format-error outputs out of the SFT labels of the HF export",
    )
    parser.set_defaults(handler=_run_segments)


def _run_segments(args: argparse.Namespace) -> int:
    from ac_train.models import load_tokenizer
    from ac_train.segments import segment_files
    from ac_train.sft import export_dataset

    tokenizer = load_tokenizer(args.tokenizer)
    segments = list(
        segment_files(args.trajectories, tokenizer, prefix_mismatch=args.prefix_mismatch)
    )
    export_dataset(segments, args.out, train_format_errors=not args.no_format_errors)
    print(f"{len(segments)} segments -> {args.out}/segments.jsonl and {args.out}/hf")
    return 0


def add_sft(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "sft",
        help="supervised fine-tuning on segments",
        description="Fine-tune a model on a segments .jsonl (from 'ac-train segments') with "
        "TRL's SFTTrainer; prints the run's metrics as one JSON line (also written to "
        "OUTPUT_DIR/sft_metrics.json). Options left out take SFTRunConfig's defaults (the "
        "method's: 2 epochs, learning rate 5e-7, batch 8).",
    )
    parser.add_argument("--data", required=True, type=Path, help="segments .jsonl")
    parser.add_argument("--output-dir", required=True, type=Path)
    parser.add_argument("--model", help="'smollm2' (default), an HF name or a checkpoint dir")
    parser.add_argument("--epochs", type=float)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--batch-size", type=int, help="segments per optimizer step")
    parser.add_argument("--micro-batch-size", type=int, help="segments per forward pass")
    parser.add_argument("--max-length", type=int, help="longer segments are dropped")
    parser.add_argument("--max-steps", type=int, help="overrides --epochs")
    parser.add_argument("--save-steps", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument(
        "--resume",
        nargs="?",
        const=True,
        help="resume from a checkpoint dir (no value: the latest in --output-dir)",
    )
    parser.add_argument("--no-group-by-length", action="store_true")
    parser.add_argument("--no-format-errors", action="store_true")
    parser.add_argument("--no-activation-checkpointing", action="store_true")
    parser.set_defaults(handler=_run_sft)


def _run_sft(args: argparse.Namespace) -> int:
    from ac_train.sft import SFTRunConfig, run_sft

    given = {
        "model": args.model,
        "epochs": args.epochs,
        "learning_rate": args.learning_rate,
        "batch_size": args.batch_size,
        "micro_batch_size": args.micro_batch_size,
        "max_length": args.max_length,
        "max_steps": args.max_steps,
        "save_steps": args.save_steps,
        "seed": args.seed,
        "resume_from_checkpoint": args.resume,
    }
    config = SFTRunConfig(
        output_dir=args.output_dir,
        group_by_length=not args.no_group_by_length,
        train_format_errors=not args.no_format_errors,
        activation_checkpointing=not args.no_activation_checkpointing,
        **{name: value for name, value in given.items() if value is not None},
    )
    metrics = run_sft(config, args.data)
    print(json.dumps(metrics.model_dump(mode="json")))
    return 0


def add_grpo(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "grpo",
        help="segment-aware GRPO on env rollouts",
        description="Train a policy by GRPO on its own rollouts in AutoCompact-SWE-v0 "
        "(synchronous: sample, segment, one step; --async: rollout workers generate while the "
        "learner trains, within a staleness bound). Writes OUTPUT_DIR/metrics.jsonl and "
        "checkpoint-<step> dirs, continues from the latest checkpoint, and prints the last "
        "step's metrics as one JSON line. Options left out take GRPOConfig's defaults (the "
        "method's: learning rate 1e-6, 8 tasks x 8 rollouts, 50 env steps, 32K tokens). "
        "Data-parallel over N processes (synchronous only): accelerate launch --num_processes N "
        "-m ac_train.cli grpo ...",
    )
    parser.add_argument("--output-dir", required=True, type=Path)
    parser.add_argument("--model", help="'smollm2' (default), an HF name or a checkpoint dir")
    parser.add_argument("--task-source", help="'builtin' (default) or a task .jsonl")
    parser.add_argument("--split", help="task split (env default: easy); 'all' for every split")
    parser.add_argument("--sandbox", help="'local' (default), 'docker' or 'unisolated'")
    parser.add_argument("--steps", type=int, help="optimizer steps in the whole run")
    parser.add_argument("--tasks-per-step", type=int)
    parser.add_argument("--rollouts-per-task", type=int, help="the group size G")
    parser.add_argument("--rollout-max-steps", type=int, help="env steps per rollout")
    parser.add_argument("--rollout-max-tokens", type=int, help="context window per rollout")
    parser.add_argument("--max-new-tokens", type=int, help="per model call")
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--rollout-workers", type=int)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--clip-low", type=float)
    parser.add_argument("--clip-high", type=float)
    parser.add_argument("--micro-batch-size", type=int, help="segments per forward pass")
    parser.add_argument("--save-every", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--no-std-scaling", action="store_true", help="Dr. GRPO advantages")
    parser.add_argument("--no-resume", action="store_true", help="ignore existing checkpoints")
    parser.add_argument(
        "--report-to", choices=["tensorboard"], action="append", help="also log metrics there"
    )
    parser.add_argument(
        "--demonstration-steps-left",
        type=int,
        nargs="+",
        metavar="N",
        help="start rollouts in the reference agent's solved episodes, before its N-th model "
        "call from the end (a reverse curriculum for a weak model; e.g. 3: before its edit)",
    )
    parser.add_argument(
        "--max-policy-steps", type=int, help="with --demonstration-steps-left: env steps per start"
    )
    parser.add_argument(
        "--async",
        dest="asynchronous",
        action="store_true",
        help="asynchronous: --rollout-workers generate groups while the learner trains",
    )
    parser.add_argument("--max-staleness", type=int, help="async: policy versions (default 1)")
    parser.add_argument(
        "--on-stale", choices=["drop", "pause"], help="async: drop stale groups or pause workers"
    )
    parser.add_argument("--queue-groups", type=int, help="async: queue capacity in groups")
    parser.add_argument(
        "--rollout-backend", choices=["threads", "ray"], help="async: where workers run"
    )
    parser.add_argument("--ray-address", help="async with ray: the cluster to join")
    parser.set_defaults(handler=_run_grpo)


def _run_grpo(args: argparse.Namespace) -> int:
    from ac_train.grpo import GRPOConfig, GRPOTrainer

    env: dict[str, Any] = {}
    if args.task_source is not None:
        env["task_source"] = args.task_source
    if args.split is not None:
        env["split"] = None if args.split == "all" else args.split
    if args.sandbox is not None:
        env["sandbox"] = args.sandbox
    names = [
        "model",
        "steps",
        "tasks_per_step",
        "rollouts_per_task",
        "rollout_max_steps",
        "rollout_max_tokens",
        "max_new_tokens",
        "temperature",
        "rollout_workers",
        "learning_rate",
        "clip_low",
        "clip_high",
        "micro_batch_size",
        "save_every",
        "seed",
    ]
    given = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    if args.max_policy_steps is not None and args.demonstration_steps_left is None:
        raise SystemExit("--max-policy-steps needs --demonstration-steps-left")
    if args.demonstration_steps_left is not None:
        demonstration = {"steps_left": args.demonstration_steps_left}
        if args.max_policy_steps is not None:
            demonstration["max_policy_steps"] = args.max_policy_steps
        given["demonstration"] = demonstration
    config = GRPOConfig(
        output_dir=args.output_dir,
        env=env,
        scale_advantages_by_std=not args.no_std_scaling,
        resume=not args.no_resume,
        report_to=args.report_to or [],
        **given,
    )
    async_given = {
        "max_staleness": args.max_staleness,
        "on_stale": args.on_stale,
        "queue_groups": args.queue_groups,
        "backend": args.rollout_backend,
        "ray_address": args.ray_address,
    }
    async_options = {name: value for name, value in async_given.items() if value is not None}
    if async_options and not args.asynchronous:
        raise SystemExit(f"--{next(iter(async_options)).replace('_', '-')} needs --async")
    if args.asynchronous:
        from ac_train.async_rl import AsyncConfig, AsyncGRPOTrainer

        trainer: GRPOTrainer = AsyncGRPOTrainer(config, AsyncConfig(**async_options))
    else:
        trainer = GRPOTrainer(config)
    history = trainer.train()
    if history and trainer.accelerator.is_main_process:
        print(history[-1].model_dump_json())
    return 0


SUBCOMMANDS: tuple[Callable[[Subparsers], None], ...] = (
    add_collect,
    add_segments,
    add_sft,
    add_grpo,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ac-train", description="AutoCompact training stages.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
