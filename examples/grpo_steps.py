"""A few segment-aware GRPO steps on the built-in easy tasks, printing each step's metrics.

    .venv/bin/python examples/grpo_steps.py [--model smollm2|DIR] [--steps 3] [--quick]

G rollouts per task from the same start, reward 1 when the final patch passes the tests,
advantages relative to the group, the PPO-clipped token-mean loss on every segment of each
trajectory (all segments share the trajectory's advantage). A 135M model solves almost
nothing at first, so most groups carry no gradient (``informative_groups`` says how many do):
warm-start it first (``examples/collect_sft.py``) and pass the checkpoint with ``--model``.
Rerunning continues from the latest checkpoint in ``--out``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from ac_train.grpo.config import GRPOConfig
from ac_train.grpo.trainer import GRPOTrainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/grpo-steps"))
    parser.add_argument("--model", default="smollm2", help="'smollm2', an HF name or a dir")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--tasks-per-step", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-env-steps", type=int, default=6)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--quick", action="store_true", help="1 step, 1 task, 2 rollouts")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.tasks_per_step, args.group_size = 1, 1, 2
        args.max_env_steps, args.max_new_tokens = 2, 16
    torch.set_num_threads(1)

    config = GRPOConfig(
        output_dir=args.out,
        model=args.model,
        env={"split": "easy", "task_source": "builtin"},
        steps=args.steps,
        tasks_per_step=args.tasks_per_step,
        rollouts_per_task=args.group_size,
        rollout_max_steps=args.max_env_steps,
        max_new_tokens=args.max_new_tokens,
        learning_rate=args.learning_rate,
        rollout_workers=2,
        save_every=1,
    )
    print(
        f"{'step':>4} {'reward':>7} {'solved':>6} {'inform.':>7} {'compact/traj':>12} "
        f"{'segs/traj':>9} {'tokens':>7} {'loss':>8} {'rollout s':>9} {'learn s':>7}"
    )
    for m in GRPOTrainer(config).train():
        reward = "n/a" if m.reward_mean is None else f"{m.reward_mean:.2f}"
        print(
            f"{m.step:>4} {reward:>7} {m.solved_groups:>6} {m.informative_groups:>7} "
            f"{m.compactions_per_trajectory:>12.2f} {m.segments_per_trajectory:>9.2f} "
            f"{m.tokens:>7} {m.loss:>8.4f} {m.rollout_s:>9.1f} {m.learn_s:>7.1f}"
        )
    print(f"metrics: {args.out / 'metrics.jsonl'}")


if __name__ == "__main__":
    main()
