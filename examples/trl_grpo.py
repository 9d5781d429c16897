"""TRL's own GRPOTrainer on AutoCompact episodes (built-in tasks), on CPU.

    .venv/bin/python examples/trl_grpo.py [--model smollm2|DIR] [--steps 3] [--quick]

``AutoCompactRollout`` is TRL's ``rollout_func``: each group runs whole episodes of
AutoCompact-SWE-v0 with the model being trained (the env's compaction, forced fallback, cost
meter and grading apply) and hands TRL one row per segment, the env's tokens masked out of the
loss, every segment with its episode's advantage. ``--quick``: a tiny random model, 2 steps,
episodes of 3 turns that compact every turn (a forced compaction below the prompt's size).
Every trajectory is written to ``OUT/trajectories`` (what ``ac-bench``'s analyses read).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL

from trl import GRPOConfig, GRPOTrainer

from ac_train.integrations.trl import AutoCompactRollout, TRLRolloutConfig
from ac_train.models.checkpoints import load_model, tiny_model_and_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/trl-grpo"))
    parser.add_argument("--model", default="smollm2", help="'smollm2', an HF name or a dir")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--group-size", type=int, default=4, help="episodes per group")
    parser.add_argument("--segments", type=int, default=4, help="row slots per episode")
    parser.add_argument("--max-env-steps", type=int, default=6)
    parser.add_argument("--forced-compaction", type=int, default=6000, help="tokens")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="per model call")
    parser.add_argument("--quick", action="store_true", help="tiny model, 2 steps, 2 episodes")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.group_size, args.segments = 2, 2, 4
        args.max_env_steps, args.forced_compaction, args.max_new_tokens = 3, 200, 8
    torch.set_num_threads(1)
    model, tokenizer = tiny_model_and_tokenizer() if args.quick else load_model(args.model)

    rollout = AutoCompactRollout(
        TRLRolloutConfig(
            env={
                "task_source": "builtin",
                "split": "easy",
                "max_steps": args.max_env_steps,
                "forced_compaction_threshold": args.forced_compaction,
            },
            episodes_per_group=args.group_size,
            segments_per_episode=args.segments,
            trajectory_dir=args.out / "trajectories",
        ),
        tokenizer,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=rollout.reward_funcs,
        args=GRPOConfig(
            output_dir=str(args.out),
            use_cpu=True,
            bf16=False,
            max_steps=args.steps,
            per_device_train_batch_size=rollout.config.num_generations,  # one group a step
            max_completion_length=args.max_new_tokens,
            learning_rate=1e-5,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            **rollout.trainer_settings(),
        ),
        train_dataset=rollout.dataset(),
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    started = time.perf_counter()
    trainer.train()
    minutes = (time.perf_counter() - started) / 60
    episodes = args.steps * args.group_size
    print(f"{'step':>4} {'reward':>6} {'compactions':>11} {'segments':>8} {'usd':>9}")
    for log in trainer.state.log_history:
        if "autocompact/reward" in log:
            print(
                f"{log['step']:>4} {log['autocompact/reward']:>6.2f} "
                f"{log['autocompact/compactions']:>11.2f} {log['autocompact/segments']:>8.2f} "
                f"{log['autocompact/cost_usd']:>9.5f}"
            )
    print(f"{episodes} episodes in {minutes:.2f} min: {episodes / minutes:.1f} episodes/min")
    print(f"trajectories: {args.out / 'trajectories'}")


if __name__ == "__main__":
    main()
