"""TRL's own GRPOTrainer on AutoCompact episodes (built-in tasks), on CPU.

    .venv/bin/python examples/trl_grpo.py [--model smollm2|DIR] [--steps 3] [--quick]

``AutoCompactRollout`` is TRL's ``rollout_func``: each group runs whole episodes of
AutoCompact-SWE-v0 with the model being trained (the env's compaction, forced fallback, cost
meter and grading apply) and hands TRL one row per segment, the env's tokens masked out of the
loss, every segment with its episode's advantage. Every trajectory is written to
``OUT/trajectories`` (what ``ac-bench``'s analyses read).

GRPO learns only from a group whose rewards differ, and a fresh model solves nothing. So
``--warm-start N`` first fits the model (N SFT steps) to answer the task's first prompt with
its fix (the task's gold patch, one bash block), until sampling at ``--temperature`` writes the
fix about half the time (log p(fix) > -0.7 at that temperature): the group's rewards differ
and the step has a gradient. The table prints each step's mean grade and grad norm, and the
log-prob of the fix before and after GRPO.

``--quick``: a tiny random model warm-started on one built-in task, 2 GRPO steps of 4
episodes, 3 turns each with a forced compaction after the first (below the prompt's size).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import torch

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL

from trl import GRPOConfig, GRPOTrainer

import ac_env  # noqa: F401  (registers AutoCompact-SWE-v0)
from ac_env.agents.oracle import GoldPatchPolicy
from ac_train.integrations.trl import AutoCompactRollout, TRLRolloutConfig
from ac_train.models.checkpoints import load_model, tiny_model_and_tokenizer


def first_prompt_and_fix(rollout: AutoCompactRollout, task_id: str) -> tuple[list[int], str]:
    """The task's first prompt (chat-templated, with the generation prompt) and its fix."""
    env = rollout.make_env()
    try:
        observation, _ = env.reset(options={"task_id": task_id})
        fix = GoldPatchPolicy(env.unwrapped.task).act(()).text  # type: ignore[attr-defined]
    finally:
        env.close()
    messages = [dict(message) for message in observation]
    prompt = rollout.tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    return list(prompt), fix


def action_logprob(
    model: Any, prompt: list[int], action_ids: list[int], temperature: float = 1.0
) -> float:
    """log p(action | prompt) under ``model`` sampling at ``temperature``."""
    ids = torch.tensor([prompt + action_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / temperature
    picked = torch.log_softmax(logits, -1).gather(1, torch.tensor(action_ids)[:, None])
    return float(picked.sum())


def warm_start(
    model: Any,
    prompt: list[int],
    answer: list[int],
    *,
    max_steps: int,
    lr: float,
    temperature: float,
) -> int:
    """SFT of ``model`` on answering ``prompt`` with ``answer`` until sampling at
    ``temperature`` writes it about half the time (checked every 5 steps), at most
    ``max_steps``; returns the steps taken."""
    ids = torch.tensor([prompt + answer])
    labels = torch.tensor([[-100] * len(prompt) + answer])
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for step in range(1, max_steps + 1):
        model.train()
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 5 == 0 and action_logprob(model.eval(), prompt, answer, temperature) > -0.7:
            return step
    return max_steps


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
    parser.add_argument("--task", help="train on this task only (default: the first of the split)")
    parser.add_argument(
        "--warm-start",
        type=int,
        default=300,
        help="at most this many SFT steps on the task's fix, until sampling writes it half the "
        "time (0: none)",
    )
    parser.add_argument(
        "--warm-start-lr",
        type=float,
        default=3e-3,
        help="suits the tiny model; SmolLM2 wants ~1e-5",
    )
    parser.add_argument("--learning-rate", type=float, default=1e-5, help="GRPO's")
    parser.add_argument("--temperature", type=float, default=0.8, help="of every model call")
    parser.add_argument("--quick", action="store_true", help="tiny model, 2 steps, 4 episodes")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.group_size, args.segments = 2, 4, 3
        args.max_env_steps, args.forced_compaction, args.max_new_tokens = 3, 200, 320
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
    task_id = args.task or rollout.task_ids()[0]
    prompt, fix = first_prompt_and_fix(rollout, task_id)
    fix_ids = [*tokenizer.encode(fix, add_special_tokens=False), tokenizer.eos_token_id]
    if args.warm_start:
        steps = warm_start(
            model,
            prompt,
            fix_ids,
            max_steps=args.warm_start,
            lr=args.warm_start_lr,
            temperature=args.temperature,
        )
        print(f"warm start: {steps} SFT steps on the fix of {task_id}")
    before = action_logprob(model, prompt, fix_ids, args.temperature)
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
            temperature=args.temperature,
            learning_rate=args.learning_rate,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            **rollout.trainer_settings(),
        ),
        train_dataset=rollout.dataset([task_id]),
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    started = time.perf_counter()
    trainer.train()
    minutes = (time.perf_counter() - started) / 60
    episodes = args.steps * args.group_size
    print(f"task {task_id}")
    print(
        f"{'step':>4} {'reward':>6} {'compactions':>11} {'segments':>8} {'usd':>9} {'grad_norm':>9}"
    )
    for log in trainer.state.log_history:
        if "autocompact/reward" in log:
            print(
                f"{log['step']:>4} {log['autocompact/reward']:>6.2f} "
                f"{log['autocompact/compactions']:>11.2f} {log['autocompact/segments']:>8.2f} "
                f"{log['autocompact/cost_usd']:>9.5f} {log.get('grad_norm', float('nan')):>9.4f}"
            )
    after = action_logprob(trainer.model, prompt, fix_ids, args.temperature)
    print(f"log p(fix | first prompt): {before:.3f} before GRPO, {after:.3f} after")
    print(f"{episodes} episodes in {minutes:.2f} min: {episodes / minutes:.1f} episodes/min")
    print(f"trajectories: {args.out / 'trajectories'}")


if __name__ == "__main__":
    main()
