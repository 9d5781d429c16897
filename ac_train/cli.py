"""``ac-train``: command-line entry point of the training stages.

Each subcommand is one ``add_<name>(parser)`` function that declares its arguments and
sets ``handler`` to the function that runs it; ``SUBCOMMANDS`` lists them in help order. The
flags of a stage's settings are built from its pydantic config (``ac_env.config_flags``):
their types, choices, help and defaults are the config's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ac_env.config_flags import add_config_flags
from ac_env.sandbox import sandbox_help
from ac_env.tasks.sources import task_source_help


def add_fields(
    parser: argparse.ArgumentParser,
    model: type[BaseModel],
    names: Sequence[str],
    flags: dict[str, str] | None = None,
) -> None:
    """The flags of ``model``'s fields ``names`` (``flags`` renames some)."""
    others = tuple(field for field in model.model_fields if field not in names)
    add_config_flags(parser, model, flags, skip=others)


def given(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """The fields among ``names`` that the command line set (the others keep the defaults)."""
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


COLLECT_FIELDS = (
    "worker",
    "judge",
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
)


def add_collect(parser: argparse.ArgumentParser) -> None:
    from ac_train.collect import CollectConfig

    parser.description = (
        "Run a policy on tasks with a judge reviewing each step before it executes; "
        "write OUT/trajectories, OUT/episodes.jsonl, OUT/summary.json (filters, correction mix) "
        "and OUT/dataset (segments of the kept trajectories); with --shadow, "
        "OUT/evaluation.json (ac_train.shadow_eval: each figure with a 95% interval over "
        "tasks). Rerunning resumes. Options left out take CollectConfig's defaults."
    )
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument(
        "--shadow",
        action="store_const",
        const="shadow",
        dest="judge_mode",
        default=argparse.SUPPRESS,
        help="record the judge's verdicts but execute the policy's steps (evaluation)",
    )
    parser.add_argument("--split", help="task split; 'all' for every split")
    add_fields(
        parser,
        CollectConfig,
        COLLECT_FIELDS,
        flags={"task_source": "--source", "task_ids": "--ids"},
    )
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(handler=_run_collect)


def _run_collect(args: argparse.Namespace) -> int:
    """Exit 2 (one line, nothing written) for a configuration that cannot work, 3 when every
    episode failed for infrastructure reasons."""
    from ac_env.runs.failures import INFRA_EXIT_CODE, failed_cells
    from ac_train.collect import CollectConfig, collect, read_episodes

    settings = given(args, [*COLLECT_FIELDS, "judge_mode"])
    if args.split is not None:
        settings["split"] = None if args.split == "all" else args.split
    try:  # a bad setting or task selection is the caller's, not a crash
        summary = collect(CollectConfig(**settings), args.out, progress=not args.no_progress)
    except ValueError as err:  # pydantic's ValidationError is one
        print(f"ac-train collect: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(summary.model_dump_json())
    episodes = read_episodes(args.out)
    if settings.get("judge_mode") == "shadow":
        from ac_train.shadow_eval import evaluate

        evaluation = evaluate(episodes)
        (args.out / "evaluation.json").write_text(evaluation.model_dump_json(indent=2) + "\n")
        print(f"held-out figures, 95% intervals over {evaluation.tasks} tasks:")
        print("\n".join(f"  {line}" for line in evaluation.lines()))
    failed = failed_cells(
        ("collect", (e.error or "unknown") if e.status == "infra_error" else None) for e in episodes
    )
    for cell in failed:
        print(f"ac-train collect: {cell.line()}", file=sys.stderr)
    return INFRA_EXIT_CODE if failed else 0


def add_segments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Cut trajectory files into segments; write OUT/segments.jsonl and the SFT "
        "columns as a Hugging Face dataset in OUT/hf."
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
        "--train-format-errors",
        action="store_true",
        help="label format-error outputs in the HF export too (by default they are not trained)",
    )
    parser.set_defaults(handler=_run_segments)


def _run_segments(args: argparse.Namespace) -> int:
    from ac_train.models.checkpoints import load_tokenizer
    from ac_train.segments import segment_files
    from ac_train.sft import export_dataset

    tokenizer = load_tokenizer(args.tokenizer)
    segments = list(
        segment_files(args.trajectories, tokenizer, prefix_mismatch=args.prefix_mismatch)
    )
    export_dataset(segments, args.out, train_format_errors=args.train_format_errors)
    print(f"{len(segments)} segments -> {args.out}/segments.jsonl and {args.out}/hf")
    return 0


SFT_FIELDS = (
    "model",
    "epochs",
    "learning_rate",
    "batch_size",
    "micro_batch_size",
    "max_length",
    "max_steps",
    "save_steps",
    "seed",
    "group_by_length",
    "train_format_errors",
    "trained_outputs",
    "activation_checkpointing",
)


def add_sft(parser: argparse.ArgumentParser) -> None:
    from ac_train.sft import SFT_PRESETS, SFTRunConfig

    parser.description = (
        "Fine-tune a model on a segments .jsonl (from 'ac-train segments') with "
        "TRL's SFTTrainer; prints the run's metrics as one JSON line (also written to "
        "OUTPUT_DIR/sft_metrics.json). Options left out take the preset's settings, then "
        "SFTRunConfig's defaults (the method's: 2 epochs, learning rate 5e-7, batch 8; format "
        "errors not trained)."
    )
    parser.add_argument("--data", required=True, type=Path, help="segments .jsonl")
    parser.add_argument("--output-dir", required=True, type=Path)
    parser.add_argument(
        "--preset",
        choices=list(SFT_PRESETS),
        default="autocompact_sft",
        help="a row of the method's table: autocompact_sft (every executed policy and judge "
        "output) or swe_compressor (uncorrected demonstrations: the policy's outputs before any "
        "judge correction) (default: autocompact_sft)",
    )
    add_fields(parser, SFTRunConfig, SFT_FIELDS)
    parser.add_argument(
        "--resume",
        nargs="?",
        const=True,
        help="resume from a checkpoint dir (no value: the latest in --output-dir)",
    )
    parser.set_defaults(handler=_run_sft)


def sft_config(args: argparse.Namespace) -> Any:
    """The ``SFTRunConfig`` the ``sft`` command line asks for."""
    from ac_train.sft import SFTRunConfig

    settings = given(args, SFT_FIELDS)
    if args.resume is not None:
        settings["resume_from_checkpoint"] = args.resume
    return SFTRunConfig.from_preset(args.preset, output_dir=args.output_dir, **settings)


def _run_sft(args: argparse.Namespace) -> int:
    from ac_train.sft import run_sft

    metrics = run_sft(sft_config(args), args.data)
    print(json.dumps(metrics.model_dump(mode="json")))
    return 0


GRPO_FIELDS = (
    "model",
    "cheat_probe",
    "cheat_probe_every",
    "steps",
    "tasks_per_step",
    "skip_uniform_for",
    "favour_mixed",
    "rollouts_per_task",
    "rollout_max_steps",
    "rollout_max_tokens",
    "forced_compaction_threshold",
    "max_new_tokens",
    "temperature",
    "stop_after_action",
    "rollout_workers",
    "batch_groups",
    "sampler",
    "sampler_weights",
    "learning_rate",
    "clip_low",
    "clip_high",
    "scale_advantages_by_std",
    "token_mean",
    "behaviour_logprobs",
    "importance_cap",
    "overlong_masking",
    "micro_batch_size",
    "micro_batch_tokens",
    "share_prefix",
    "save_every",
    "seed",
    "resume",
    "report_to",
)
ASYNC_FIELDS = ("max_staleness", "on_stale", "queue_groups", "backend", "ray_address")
REWARD_FIELDS = ("capability_gate", "flagged_reward")
"""The env's grading settings a training run chooses (``EnvConfig``'s fields)."""


def add_grpo(parser: argparse.ArgumentParser) -> None:
    from ac_env.config import EnvConfig
    from ac_train.grpo.async_trainer import AsyncConfig
    from ac_train.grpo.config import GRPO_PRESETS, GRPOConfig

    parser.description = (
        "Train a policy by GRPO on its own rollouts in AutoCompact-SWE-v0 "
        "(synchronous: sample, segment, one step; --async: rollout workers generate while the "
        "learner trains, within a staleness bound). Writes OUTPUT_DIR/metrics.jsonl and "
        "checkpoint-<step> dirs, continues from the latest checkpoint, and prints the last "
        "step's metrics as one JSON line. Options left out take the preset's settings, then "
        "GRPOConfig's defaults (the method's RL stage: learning rate 1e-6, 8 tasks x 8 "
        "rollouts, 50 env steps, 32K tokens, no forced compaction, the token-mean over the "
        "step). Data-parallel over N processes (synchronous only): accelerate launch "
        "--num_processes N -m ac_train.cli grpo ..."
    )
    parser.add_argument("--output-dir", required=True, type=Path)
    parser.add_argument(
        "--preset",
        choices=list(GRPO_PRESETS),
        default="autocompact",
        help="a row of the method's table: autocompact (compaction offered) or compaction_rl "
        "(length-triggered compaction at 16K only) (default: autocompact)",
    )
    parser.add_argument(
        "--task-source", help=f"{task_source_help()}, or a task .jsonl (default: 'builtin')"
    )
    parser.add_argument("--split", help="task split (env default: easy); 'all' for every split")
    parser.add_argument("--sandbox", help=f"{sandbox_help()} (default: 'local')")
    add_fields(parser, EnvConfig, REWARD_FIELDS)
    add_fields(
        parser,
        GRPOConfig,
        GRPO_FIELDS,
        flags={"scale_advantages_by_std": "--std-scaling"},
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
        "--continuation",
        choices=["exact", "prose", "wrong_line"],
        help="start rollouts on the continuation rung instead: right after the compaction "
        "before the reference agent's fixing edit, the summary's ## Next naming the exact "
        "one-line edit (exact), the agent's prose plan (prose) or a wrong line (wrong_line)",
    )
    parser.add_argument(
        "--max-policy-steps",
        type=int,
        help="with --demonstration-steps-left or --continuation: env steps per start",
    )
    parser.add_argument(
        "--probe-samples",
        type=int,
        help="with start states: rollouts of the starting policy from each start "
        "before step 1, to draw the starts likeliest to give a mixed group (0: no probe)",
    )
    parser.add_argument(
        "--async",
        dest="asynchronous",
        action="store_true",
        help="asynchronous: --rollout-workers generate groups while the learner trains",
    )
    add_fields(parser, AsyncConfig, ASYNC_FIELDS, flags={"backend": "--rollout-backend"})
    parser.set_defaults(handler=_run_grpo)


def grpo_config(args: argparse.Namespace) -> Any:
    """The ``GRPOConfig`` the ``grpo`` command line asks for."""
    from ac_train.grpo.config import GRPOConfig

    env: dict[str, Any] = {}
    if args.task_source is not None:
        env["task_source"] = args.task_source
    if args.split is not None:
        env["split"] = None if args.split == "all" else args.split
    if args.sandbox is not None:
        env["sandbox"] = args.sandbox
    env.update(given(args, REWARD_FIELDS))
    settings = given(args, GRPO_FIELDS)
    starts = args.demonstration_steps_left is not None or args.continuation is not None
    for flag in ("max_policy_steps", "probe_samples"):
        if getattr(args, flag) is not None and not starts:
            raise SystemExit(
                f"--{flag.replace('_', '-')} needs --demonstration-steps-left or --continuation"
            )
    if starts:
        demonstration: dict[str, Any] = {"continuation": args.continuation}
        if args.demonstration_steps_left is not None:
            demonstration["steps_left"] = args.demonstration_steps_left
        for flag in ("max_policy_steps", "probe_samples"):
            if getattr(args, flag) is not None:
                demonstration[flag] = getattr(args, flag)
        settings["demonstration"] = demonstration
    return GRPOConfig.from_preset(args.preset, output_dir=args.output_dir, env=env, **settings)


def _run_grpo(args: argparse.Namespace) -> int:
    from ac_train.grpo.trainer import GRPOTrainer

    config = grpo_config(args)
    async_options = given(args, ASYNC_FIELDS)
    if async_options and not args.asynchronous:
        name = next(iter(async_options))
        flag = "--rollout-backend" if name == "backend" else f"--{name.replace('_', '-')}"
        raise SystemExit(f"{flag} needs --async")
    if args.asynchronous:
        from ac_train.grpo.async_trainer import AsyncConfig, AsyncGRPOTrainer

        trainer: GRPOTrainer = AsyncGRPOTrainer(config, AsyncConfig(**async_options))
    else:
        trainer = GRPOTrainer(config)
    history = trainer.train()
    if history and trainer.accelerator.is_main_process:
        print(history[-1].model_dump_json())
    return 0


SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "collect": ("judge-corrected on-policy collection", add_collect),
    "segments": ("cut trajectories into training segments", add_segments),
    "sft": ("supervised fine-tuning on segments", add_sft),
    "grpo": ("segment-aware GRPO on env rollouts", add_grpo),
}
"""Each subcommand's one-line help and the function that declares its arguments."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s arguments are declared (all when None), since building
    a stage's flags imports its config's module (torch, TRL)."""
    parser = argparse.ArgumentParser(prog="ac-train", description="AutoCompact training stages.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (summary, add) in SUBCOMMANDS.items():
        sub = subparsers.add_parser(name, help=summary, description=summary)
        if command in (None, name):
            add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    command = next((word for word in words if word in SUBCOMMANDS), "")
    args = build_parser(command).parse_args(words)
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
