"""A real GRPO run on CPU: SmolLM2, warm-started, learning from demonstration start states.

    .venv/bin/python examples/grpo_real_run.py --out runs/grpo-real-run [--quick]

SmolLM2-135M solves no built-in task from its start, so GRPO from the start has no signal
(every group's rewards are 0). This run uses a reverse curriculum (``ac_train.start_states``):

1. ``demonstrations``: the reference agent (compacting once it has located the bug) solves the
   easy *train* and held-out *eval* tasks; the env is snapshotted before each of its calls;
2. ``bc``: SFT of the model on the train demonstrations after their compaction, through the
   call the deepest start precedes (the agent continuing from its own summary: read the
   suspect, try candidate edits, write the fixing one);
3. ``before``: held-out success from the start states of the first ``--eval-tasks`` eval
   tasks the demonstrator solves, ``--samples`` rollouts each. Depth (``--steps-left``,
   default 3): before the demonstrator's 3rd-last call, its fixing edit, so the policy must
   write the fix. Depths 2 and 1 (before verify, submit) start with the fix in the
   workspace: rewarded unless the policy undoes it;
4. ``grpo``: segment-aware GRPO from the train tasks' start states (same depths), reward 1
   when the final workspace passes the task's tests;
5. ``after``: the held-out success again, with the GRPO model.

Every stage resumes from what it wrote. Writes ``OUT/results.json`` and ``OUT/results.png``
(the reward curve over steps and held-out success before and after).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

import ac_env  # noqa: F401  (registers AutoCompact-SWE-v0)
from ac_env.agents import ReferenceAgent, RolloutJob, rollout_many
from ac_env.tasks import load_tasks
from ac_env.trajectory import Trajectory
from ac_train.grpo import DemonstrationStarts, GRPOConfig, GRPOTrainer, read_metrics
from ac_train.models import TransformersPolicy, load_model
from ac_train.segments import segment_trajectory
from ac_train.sft import SFTRunConfig, run_sft
from ac_train.start_states import StartState, demonstration_starts

ENV: dict[str, Any] = {"split": "easy", "forced_compaction_threshold": 6144}
MAX_ENV_STEPS, CONTEXT_WINDOW = 50, 8192  # SmolLM2's window


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/grpo-real-run"))
    parser.add_argument("--model", default="smollm2", help="'smollm2', an HF name or a dir")
    parser.add_argument("--train-tasks", type=int, default=20)
    parser.add_argument("--eval-tasks", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4, help="held-out rollouts per start")
    parser.add_argument(
        "--steps-left",
        type=int,
        nargs="+",
        default=[3],
        help="start depths: before the demonstrator's n-th call from the end (3: its edit)",
    )
    parser.add_argument("--max-policy-steps", type=int, default=1, help="env steps per start")
    parser.add_argument("--steps", type=int, default=6, help="GRPO optimizer steps")
    parser.add_argument("--tasks-per-step", type=int, default=1)
    parser.add_argument("--group-size", type=int, default=6)
    parser.add_argument("--max-new-tokens", type=int, default=640, help="edits: 310-500")
    parser.add_argument("--temperature", type=float, default=0.4, help="1.0: off the rails")
    parser.add_argument("--learning-rate", type=float, default=2e-5, help="GRPO")
    parser.add_argument("--bc-learning-rate", type=float, default=1e-4)
    parser.add_argument("--bc-epochs", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help="1 task each, 1 SFT and GRPO step")
    args = parser.parse_args()
    if args.quick:
        args.train_tasks, args.eval_tasks, args.samples, args.steps = 1, 1, 1, 1
        args.tasks_per_step, args.group_size, args.max_new_tokens = 1, 2, 16
    return args


def make_env() -> gym.Env[Any, Any]:
    return gym.make(
        "AutoCompact-SWE-v0", max_steps=MAX_ENV_STEPS, context_window=CONTEXT_WINDOW, **ENV
    )


def warm_start(args: argparse.Namespace, train_ids: list[str]) -> str:
    """SFT on the train demonstrations after their compaction, up to and including the call
    the deepest start state precedes (behaviour cloning of the states GRPO starts from)."""
    final = args.out / "bc" / "final"
    if final.exists():
        return str(final)
    _, tokenizer = load_model(args.model)
    jobs = [RolloutJob(options={"task_id": task_id}) for task_id in train_ids]
    demos = rollout_many(make_env, lambda: ReferenceAgent("after_locate"), jobs, workers=2)
    depth = max(args.steps_left)
    segments = [
        segment
        for index, demo in enumerate(demos)
        if demo.end is not None and demo.end.reward == 1 and len(demo.model_calls()) > depth
        for segment in segment_trajectory(
            through_call(demo, -depth), tokenizer, run_id=f"demo{index}"
        )
        if segment.segment_index >= 1
    ]
    config = SFTRunConfig(
        model=args.model,
        output_dir=args.out / "bc",
        epochs=args.bc_epochs,
        max_steps=1 if args.quick else None,
        learning_rate=args.bc_learning_rate,
        batch_size=2,
        micro_batch_size=1,
        max_length=6144,
        activation_checkpointing=False,
    )
    print(run_sft(config, segments).model_dump_json())
    return str(final)


def through_call(trajectory: Trajectory, index: int) -> Trajectory:
    """``trajectory`` up to and including its model call ``index``."""
    last = trajectory.model_calls()[index]
    cut = Trajectory(trajectory.header)
    cut.events = trajectory.events[: trajectory.events.index(last) + 1]
    return cut


def eval_starts(args: argparse.Namespace, eval_ids: list[str]) -> list[StartState]:
    """The start states of the first ``--eval-tasks`` of ``eval_ids`` that the demonstrator
    solves (a task it does not solve has none)."""
    starts: list[StartState] = []
    for task_id in eval_ids:
        if len({start.task_id for start in starts}) == args.eval_tasks:
            break
        starts += demonstration_starts(make_env, [task_id], steps_left=args.steps_left)
    return starts


def held_out_success(
    args: argparse.Namespace, model_dir: str, starts: list[StartState]
) -> dict[str, float]:
    """Success from the eval tasks' start states (``--samples`` rollouts of each): over all,
    and per depth."""
    model, tokenizer = load_model(model_dir)
    model.eval()
    seeds = iter(range(1000))

    def policy() -> TransformersPolicy:
        return TransformersPolicy(
            model,
            tokenizer,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            seed=next(seeds),
        )

    jobs = [
        RolloutJob(options={"task_id": start.task_id}, start=start.snapshot)
        for start in starts
        for _ in range(args.samples)
    ]
    runs = rollout_many(make_env, policy, jobs, workers=2, max_steps=args.max_policy_steps)
    rewards = [run.end.reward if run.end is not None else 0.0 for run in runs]
    depths = [start.steps_left for start in starts for _ in range(args.samples)]
    success = {"all": sum(rewards) / len(rewards)}
    for depth in sorted(set(depths)):
        mine = [r for r, d in zip(rewards, depths, strict=True) if d == depth]
        success[f"steps_left={depth}"] = sum(mine) / len(mine)
    return success


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    train_ids = [t.instance_id for t in load_tasks(split="easy", subset="train")]
    eval_ids = [t.instance_id for t in load_tasks(split="easy", subset="eval")]
    train_ids = train_ids[: args.train_tasks]

    print("== 1-2. warm start on the demonstrations")
    bc = warm_start(args, train_ids)

    results_path = args.out / "results.json"
    results: dict[str, Any] = json.loads(results_path.read_text()) if results_path.exists() else {}
    evaluated = "before" in results and results.get("after_step") == args.steps
    starts = [] if evaluated else eval_starts(args, eval_ids)
    if "before" not in results:
        print("== 3. held-out success before GRPO")
        results["before"] = held_out_success(args, bc, starts)
        results_path.write_text(json.dumps(results, indent=2) + "\n")

    print("== 4. GRPO from the train tasks' start states")
    config = GRPOConfig(
        output_dir=args.out / "grpo",
        model=bc,
        env={"split": ENV["split"], "task_ids": train_ids},
        forced_compaction_threshold=ENV["forced_compaction_threshold"],
        steps=args.steps,
        tasks_per_step=args.tasks_per_step,
        rollouts_per_task=args.group_size,
        rollout_max_steps=MAX_ENV_STEPS,
        rollout_max_tokens=CONTEXT_WINDOW,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        learning_rate=args.learning_rate,
        rollout_workers=2,
        micro_batch_size=1,
        save_every=1,
        demonstration=DemonstrationStarts(
            steps_left=args.steps_left, max_policy_steps=args.max_policy_steps
        ),
    )
    GRPOTrainer(config).train()
    curve = read_metrics(config.output_dir)

    if results.get("after_step") != args.steps:  # a longer rerun evaluates its last step
        print("== 5. held-out success after GRPO")
        last = config.output_dir / f"checkpoint-{args.steps}"
        results["after"] = held_out_success(args, str(last), starts)
        results["after_step"] = args.steps
    results["reward_curve"] = [m.reward_mean for m in curve]
    results["informative_groups"] = [m.informative_groups for m in curve]
    results["format_error_rate"] = [m.format_error_rate for m in curve]
    results["settings"] = {k: str(v) for k, v in vars(args).items()}
    results_path.write_text(json.dumps(results, indent=2) + "\n")
    report(results, args.out / "results.png")


def report(results: dict[str, Any], path: Path) -> None:
    print(f"\n{'step':>4} {'train reward':>12} {'informative groups':>18} {'format errors':>13}")
    rows = zip(
        results["reward_curve"],
        results["informative_groups"],
        results["format_error_rate"],
        strict=True,
    )
    for step, (reward, informative, errors) in enumerate(rows):
        reward = reward if reward is not None else float("nan")
        errors = errors if errors is not None else float("nan")
        print(f"{step:>4} {reward:>12.2f} {informative:>18} {errors:>13.2f}")
    for name in results["before"]:
        before, after = results["before"][name], results["after"][name]
        print(f"held-out success ({name}): before {before:.2f}, after {after:.2f}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (curve, bars) = plt.subplots(1, 2, figsize=(9, 3.5), width_ratios=[2, 1])
    rewards = [r if r is not None else float("nan") for r in results["reward_curve"]]
    curve.plot(range(len(rewards)), rewards, marker="o")
    curve.set_xlabel("GRPO step")
    curve.set_ylabel("mean reward of the step's rollouts")
    curve.set_ylim(-0.05, 1.05)
    curve.set_title("train start states")
    names = list(results["before"])
    width = 0.4
    for offset, stage in ((0.0, "before"), (width, "after")):
        heights = [results[stage][name] for name in names]
        bars.bar([i + offset for i in range(len(names))], heights, width, label=stage)
    bars.set_xticks([i + width / 2 for i in range(len(names))])
    bars.set_xticklabels([name.replace("steps_left=", "depth ") for name in names])
    bars.set_ylim(0, 1)
    bars.set_title("held-out success")
    bars.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path} and {path.with_suffix('.json')}")


if __name__ == "__main__":
    main()
