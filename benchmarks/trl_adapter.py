"""Episodes per minute and tokens trained: TRL's GRPOTrainer through the adapter vs our own
GRPO trainer in process, same model, env settings and group size, on the built-in easy split.

    .venv/bin/python benchmarks/trl_adapter.py [--model smollm2|DIR] [--steps 2] [--quick]

For the TRL run it also cuts the adapter's trajectories with our segmenter and checks that the
tokens TRL's loss covered (its completion mask times ``env_mask``) are exactly the segments'
GRPO-trained tokens. Wall times include sampling, the env (sandbox, grading) and the optimizer
step; run it on a quiet machine. ``--quick``: a tiny random model, episodes of 3 turns with a
compaction every turn.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL

from trl import GRPOConfig as TRLConfig
from trl import GRPOTrainer as TRLTrainer

from ac_train.grpo.config import GRPOConfig
from ac_train.grpo.trainer import GRPOTrainer
from ac_train.integrations.trl import AutoCompactRollout, TRLRolloutConfig
from ac_train.models.checkpoints import load_model, tiny_model_and_tokenizer
from ac_train.segments import segment_trajectory


def model_and_tokenizer(args: argparse.Namespace) -> tuple[Any, Any]:
    return tiny_model_and_tokenizer() if args.quick else load_model(args.model)


TASKS = {"task_source": "builtin", "split": "easy"}


def through_trl(args: argparse.Namespace, out: Path) -> tuple[float, float, int, int]:
    """Episodes/min, the share of the time in rollouts, tokens TRL trained, tokens our
    segmenter trains on the same episodes."""
    model, tokenizer = model_and_tokenizer(args)
    rollout = AutoCompactRollout(
        TRLRolloutConfig(
            env={
                **TASKS,
                "max_steps": args.max_env_steps,
                "context_window": args.context_window,
                "forced_compaction_threshold": args.forced_compaction,
            },
            episodes_per_group=args.group_size,
            segments_per_episode=args.max_env_steps + 1,
        ),
        tokenizer,
    )
    trainer = TRLTrainer(
        model=model,
        reward_funcs=rollout.reward_funcs,
        args=TRLConfig(
            output_dir=str(out / "trl"),
            use_cpu=True,
            bf16=False,
            max_steps=args.steps,
            per_device_train_batch_size=rollout.config.num_generations,
            max_completion_length=args.max_new_tokens,
            learning_rate=args.learning_rate,
            save_strategy="no",
            report_to=[],
            disable_tqdm=True,
            **rollout.trainer_settings(),
        ),
        train_dataset=rollout.dataset(),
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    trl_tokens, our_tokens, rollout_s = [0], [0], [0.0]
    run_rollout, compute_loss = rollout, trainer._compute_loss

    def counting_rollout(prompts: list[Any], trl_trainer: Any) -> dict[str, Any]:
        started = time.perf_counter()
        output = run_rollout(prompts, trl_trainer)
        rollout_s[0] += time.perf_counter() - started
        for episode in rollout.episodes:
            for segment in segment_trajectory(
                episode.trajectory, tokenizer, prefix_mismatch="split"
            ):
                our_tokens[0] += sum(segment.grpo_mask())
        return output

    def counting_loss(trained_model: Any, inputs: dict[str, Any]) -> Any:
        trl_tokens[0] += int((inputs["completion_mask"] * inputs["tool_mask"]).sum())
        return compute_loss(trained_model, inputs)

    trainer.rollout_func = counting_rollout
    trainer._compute_loss = counting_loss  # type: ignore[method-assign]
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    rate = args.steps * args.group_size / (seconds / 60)
    return rate, rollout_s[0] / seconds, trl_tokens[0], our_tokens[0]


def in_process(args: argparse.Namespace, out: Path) -> tuple[float, float, int]:
    """Episodes/min, the share of the time in rollouts and the trained tokens (all of them,
    the token-mean's N) of our own trainer."""
    model, tokenizer = model_and_tokenizer(args)
    config = GRPOConfig(
        output_dir=out / "ours",
        env=dict(TASKS),
        steps=args.steps,
        tasks_per_step=1,
        rollouts_per_task=args.group_size,
        rollout_max_steps=args.max_env_steps,
        rollout_max_tokens=args.context_window,
        forced_compaction_threshold=args.forced_compaction,
        max_new_tokens=args.max_new_tokens,
        learning_rate=args.learning_rate,
        save_every=args.steps,
        progress=False,
    )
    started = time.perf_counter()
    metrics = GRPOTrainer(config, model, tokenizer).train()
    seconds = time.perf_counter() - started
    rate = args.steps * args.group_size / (seconds / 60)
    share = sum(m.rollout_s for m in metrics) / seconds
    return rate, share, sum(m.mean_over_tokens for m in metrics)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="'smollm2', an HF name or a dir")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-env-steps", type=int, default=4)
    parser.add_argument("--context-window", type=int, default=8192)
    parser.add_argument("--forced-compaction", type=int, default=3000)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--quick", action="store_true", help="tiny model, 2 steps of 2 episodes")
    args = parser.parse_args()
    if args.quick:
        args.group_size, args.max_env_steps, args.forced_compaction = 2, 3, 200
        args.context_window, args.max_new_tokens = 4096, 8
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        trl_rate, trl_share, trl_tokens, segmenter_tokens = through_trl(args, Path(tmp))
        our_rate, our_share, our_tokens = in_process(args, Path(tmp))
    print(f"{'trainer':<22} {'episodes/min':>12} {'in rollouts':>11} {'tokens trained':>14}")
    print(f"{'TRL via adapter':<22} {trl_rate:>12.1f} {trl_share:>11.0%} {trl_tokens:>14}")
    print(f"{'ac_train.grpo':<22} {our_rate:>12.1f} {our_share:>11.0%} {our_tokens:>14}")
    same = "equal" if trl_tokens == segmenter_tokens else "DIFFERENT"
    print(f"TRL's trained tokens vs our segmenter's on the same episodes: {same}")


if __name__ == "__main__":
    main()
