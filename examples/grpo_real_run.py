"""A real GRPO run: SmolLM2, warm-started, learning from demonstration start states.

    .venv/bin/python examples/grpo_real_run.py --out runs/grpo-real-run [--quick]
    bash scripts/grpo_gpu.sh ...    # the same on one GPU (--preset gpu), see that script

SmolLM2-135M solves no built-in task from its start, so GRPO from the start has no signal
(every group's rewards are 0). This run uses a reverse curriculum (``ac_train.grpo.start_states``):

1. ``demonstrations``: the reference agent (compacting once it has located the bug) solves the
   easy *train* and held-out *eval* tasks; the env is snapshotted before each of its calls;
2. ``bc``: SFT of the model on the train demonstrations after their compaction, through the
   call the deepest start precedes (the agent continuing from its own summary: read the
   suspect, try candidate edits, write the fixing one);
3. ``before``: held-out success from the start states of the first ``--eval-tasks`` eval
   tasks the demonstrator solves, ``--samples`` rollouts each, at each depth
   (``--steps-left``, default 2 and 3), the samples of ``--eval-batch`` start states decoded
   as one batch (each distinct prompt prefilled once). Depth 3: before the demonstrator's
   3rd-last call, its fixing edit, so the policy must write the fix. Depths 2 and 1 (before verify,
   submit) start with the fix in the workspace: rewarded unless the policy undoes it. The
   warm start alone almost never writes the fix (1 of 8 held-out start states, none of the
   train ones), so depth 2 is the rung whose groups give GRPO a signal;
4. ``grpo``: segment-aware GRPO from the start states of the first ``--train-tasks`` train
   tasks (``--train-steps-left``, default depth 3: a start whose workspace already passes, as
   at depths 2 and 1, is never trained on; the runs measured in ``docs/training.md`` trained
   at depth 2 before that rule, and learned to do nothing there), reward 1 when the final workspace
   passes the task's tests, until ``--steps`` steps had an informative group (rewards not all
   equal: a step without one has no gradient), ``--max-steps`` in all, or until the next step
   would not end before the evaluation after GRPO must begin for the whole run to fit in
   ``--minutes`` (a step is timed as an informative one: the mean rollouts plus the mean
   learner pass so far; a resumed run counts the time its earlier sittings spent). Each
   group is sampled in one batched decode that stops where every row's action ended
   (``--stop-after-action``). Each step draws the start
   likeliest to give a mixed group given the groups so far (``GRPOConfig.favour_mixed``): a
   start whose group was mixed is drawn again until one of its groups comes out uniform,
   which sets it aside for ``--skip-uniform-for`` steps;
5. ``after``: the held-out success again, with the last GRPO checkpoint.

Held-out success is the mean over start states (each averaged over its samples) with a 95%
bootstrap interval over start states; after minus before is paired by start state. Every
stage resumes from what it wrote. Writes ``OUT/results.json`` (the per-step curve: reward and
informative groups; the held-out rewards of each start state; the table; wall time and
tokens) and ``OUT/results.png``.

Cost: every sequence is a post-compaction context of 2,600-4,600 tokens. The defaults on 2
cores took 96 minutes (``--minutes 100``): warm start 16 (8 optimizer steps), each held-out
evaluation 7 (16 rollouts in 2 batches), GRPO 58 (18 steps, 8 informative: 2.0 minutes of
rollouts a step and, when a group is informative, a 2.6-minute learner pass),
demonstrations and loading 9. A group's
rollouts share their start state, so with ``micro_batch_size`` equal to the group size the
learner runs that context once (``GRPOConfig.share_prefix``); ``--micro-batch-tokens``
bounds its memory (18.7 GB peak RSS). The table, the curve and what would reach 12
informative steps in 100 minutes are in ``docs/training.md``. On one GPU, ``--preset gpu``
(``scripts/grpo_gpu.sh``).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from tqdm import tqdm

import ac_env  # noqa: F401  (registers AutoCompact-SWE-v0)
from ac_env.agents import ReferenceAgent, RolloutJob, rollout_many
from ac_env.analysis.stats import Estimate, bootstrap_mean, paired_difference
from ac_env.tasks import load_tasks
from ac_env.trajectory import Trajectory
from ac_train.grpo.config import DemonstrationStarts, GRPOConfig
from ac_train.grpo.metrics import StepMetrics, read_metrics
from ac_train.grpo.start_probe import PROBE_FILE, read_probe
from ac_train.grpo.start_states import StartState, demonstration_starts
from ac_train.grpo.trainer import GRPOTrainer
from ac_train.models.batched_acts import BatchedActs
from ac_train.models.checkpoints import load_model
from ac_train.models.policy import TransformersPolicy
from ac_train.segments import segment_trajectory
from ac_train.sft import SFTRunConfig, run_sft

ENV: dict[str, Any] = {"split": "easy", "forced_compaction_threshold": 6144}
MAX_ENV_STEPS, CONTEXT_WINDOW = 50, 8192  # SmolLM2's window
AFTER_MARGIN_S = 60.0  # past the held-out rollouts after GRPO: loading, the table, the plot
PRESETS: dict[str, dict[str, Any]] = {
    "cpu": {},
    # one GPU (scripts/grpo_gpu.sh): a group costs one batched decode whatever its size, and
    # 8 workers grade 8 rollouts at once
    "gpu": {
        "device": "cuda",
        "group_size": 8,
        "micro_batch_size": 8,
        "micro_batch_tokens": 8 * 640,  # a group of 8 in one pass
        "samples": 4,
        "workers": 8,
        "threads": 8,
    },
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/grpo-real-run"))
    parser.add_argument("--model", default="smollm2", help="'smollm2', an HF name or a dir")
    parser.add_argument(
        "--bc-tasks", type=int, default=20, help="the first N train tasks' demonstrations: SFT"
    )
    parser.add_argument(
        "--train-tasks",
        type=int,
        default=60,
        help="the first N train tasks' start states: GRPO (the easy split has 60; from 20, two "
        "starts gave mixed groups and settled within 5 steps, then none was left)",
    )
    parser.add_argument("--eval-tasks", type=int, default=4)
    parser.add_argument("--samples", type=int, default=2, help="held-out rollouts per start")
    parser.add_argument(
        "--eval-batch",
        type=int,
        default=4,
        help="held-out start states whose samples are decoded as one batch",
    )
    parser.add_argument(
        "--steps-left",
        type=int,
        nargs="+",
        default=[2, 3],
        help="held-out start depths: before the demonstrator's n-th call from the end (3: its "
        "edit); the warm start learns through the deepest",
    )
    parser.add_argument(
        "--train-steps-left",
        type=int,
        nargs="+",
        default=[3],
        help="GRPO start depths; a start whose workspace already passes (depths 2 and 1: the "
        "fix is in place) is never trained on (ac_train.grpo.start_states.teachable)",
    )
    parser.add_argument("--max-policy-steps", type=int, default=1, help="env steps per start")
    parser.add_argument(
        "--steps", type=int, default=12, help="GRPO optimizer steps with an informative group"
    )
    parser.add_argument("--max-steps", type=int, default=45, help="GRPO steps in all, at most")
    parser.add_argument(
        "--minutes",
        type=float,
        default=100.0,
        help="the whole run's wall time: GRPO starts no step that would not end before the "
        "held-out evaluation after it must begin",
    )
    parser.add_argument("--tasks-per-step", type=int, default=1)
    parser.add_argument(
        "--probe-samples",
        type=int,
        default=0,
        help="rollouts of the warm start from each train start state before GRPO, the draws' "
        "first evidence of which starts give a mixed group (0: the groups are the evidence)",
    )
    parser.add_argument(
        "--uniform-draws",
        action="store_true",
        help="draw start states uniformly, not the likeliest to give a mixed group",
    )
    parser.add_argument(
        "--skip-uniform-for",
        type=int,
        default=4,
        help="GRPO steps in which a start state whose group was all-equal is not drawn",
    )
    parser.add_argument("--group-size", type=int, default=6)
    parser.add_argument(
        "--micro-batch-size",
        type=int,
        default=6,
        help="rollouts per learner pass at most; their start state runs once a pass",
    )
    parser.add_argument(
        "--micro-batch-tokens",
        type=int,
        default=1600,
        help="a learner pass also ends before its rows' padded output tokens pass this: a pass "
        "of 6 outputs that ran to 640 tokens needed over 24 GB, one of 3 peaked at 20 GB",
    )
    parser.add_argument("--max-new-tokens", type=int, default=640, help="edits: 310-500")
    parser.add_argument("--temperature", type=float, default=0.7, help="1.0: off the rails")
    parser.add_argument(
        "--stop-after-action",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="end a response at the close of its first bash block (a summary runs on): a "
        "group decodes as long as its longest row",
    )
    parser.add_argument("--learning-rate", type=float, default=2e-5, help="GRPO")
    parser.add_argument("--bc-learning-rate", type=float, default=1e-4)
    parser.add_argument("--bc-epochs", type=float, default=1.0)
    parser.add_argument("--device", default="cpu", help="'cuda': see scripts/grpo_gpu.sh")
    parser.add_argument("--workers", type=int, default=2, help="rollouts at once (grading)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help="1 task each, 1 SFT and GRPO step")
    parser.add_argument("--preset", choices=list(PRESETS), default="cpu", help="'gpu': one GPU")
    parser.set_defaults(**PRESETS[parser.parse_known_args()[0].preset])
    args = parser.parse_args()
    if args.quick:
        args.bc_tasks, args.train_tasks, args.eval_tasks, args.samples = 1, 1, 1, 1
        args.steps = 1
        args.max_steps = 1
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
    demos = rollout_many(
        make_env, lambda: ReferenceAgent("after_locate"), jobs, workers=args.workers
    )
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


def held_out_rewards(
    args: argparse.Namespace,
    model_dir: str,
    starts: list[StartState],
    stage: str,
    results: dict[str, Any],
    save: Callable[[], None],
) -> None:
    """``results[stage]``: the rewards of ``--samples`` rollouts from each held-out start state
    (by start id). ``--eval-batch`` start states at a time have all their samples decoded as
    one batch (``BatchedActs``: a start's prompt is prefilled once for its samples), saved
    after each batch, so an interrupted evaluation resumes where it stopped; the tokens the
    policy generated and the wall time add up under ``results["cost"]``.
    """
    rewards: dict[str, list[float]] = results.setdefault(stage, {})
    todo = [start for start in starts if start.id not in rewards]
    if not todo:
        return
    model, tokenizer = load_model(model_dir)
    model.to(args.device).eval()
    policy = TransformersPolicy(
        model,
        tokenizer,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        seed=0,
        stop_after_action=args.stop_after_action,
    )
    cost = results["cost"]
    batches = [todo[i : i + args.eval_batch] for i in range(0, len(todo), args.eval_batch)]
    for batch in tqdm(batches, desc=stage, unit="batch"):
        started = time.perf_counter()
        jobs = [
            RolloutJob(options={"task_id": start.task_id}, start=start.snapshot)
            for start in batch
            for _ in range(args.samples)
        ]
        # the rollouts' first calls come right after their resets: wait for all of them
        shared = BatchedActs(policy, rows=len(jobs), gather_s=10.0)
        runs = rollout_many(
            make_env,
            lambda shared=shared: shared,
            jobs,
            workers=len(jobs),
            max_steps=args.max_policy_steps,
            progress=False,
        )
        for index, start in enumerate(batch):
            samples = runs[index * args.samples : (index + 1) * args.samples]
            # None: an infra error, not a policy failure
            rewards[start.id] = [run.reward for run in samples if run.reward is not None]
        tokens = sum(generated_tokens(run) for run in runs)
        cost["generated_tokens"][stage] = cost["generated_tokens"].get(stage, 0) + tokens
        cost["wall_s"][stage] = cost["wall_s"].get(stage, 0.0) + time.perf_counter() - started
        save()


def generated_tokens(trajectory: Trajectory) -> int:
    return sum(len(call.output_token_ids or []) for call in trajectory.model_calls())


def success_table(results: dict[str, Any]) -> dict[str, dict[str, Estimate]]:
    """Held-out success before and after, and after minus before, over all start states and
    per depth: the mean over start states (each first averaged over its samples) with a 95%
    bootstrap interval from resampling start states (paired for the difference)."""
    table: dict[str, dict[str, Estimate]] = {}
    depths = sorted({start_id.rsplit("@-", 1)[1] for start_id in results["before"]})
    for name, keep in [("all", ""), *((f"steps_left={d}", f"@-{d}") for d in depths)]:
        before = {k: v for k, v in results["before"].items() if k.endswith(keep)}
        after = {k: v for k, v in results["after"].items() if k.endswith(keep)}
        table[name] = {
            "before": bootstrap_mean(list(before.values())),
            "after": bootstrap_mean(list(after.values())),
            "after - before": paired_difference(after, before),
        }
    return table


def grpo(
    trainer: GRPOTrainer, args: argparse.Namespace, left_s: Callable[[], float]
) -> list[StepMetrics]:
    """GRPO steps until ``--steps`` of them had an informative group (a group whose rewards
    differ: the only ones with a gradient), ``--max-steps`` in all, or until the next step
    would not fit in the ``left_s()`` seconds the run has left for GRPO; the metrics of each.

    A step is expected to take the mean rollout time of the steps so far plus, as if it were
    informative, the mean learner pass of the informative ones (before one, the mean rollout
    time again), so an uninformative step that would fit is not started either. A call trains
    the steps that fit, at most the informative ones missing; the first (no step yet to time)
    trains one. The steps are read from the metrics, so a resumed run counts its earlier ones.
    """
    while True:
        curve = read_metrics(trainer.config.output_dir)
        informative = [m for m in curve if m.informative_groups > 0]
        if len(informative) >= args.steps or len(curve) >= args.max_steps:
            return curve
        fit = 1
        if curve:
            rollout_s = sum(m.rollout_s for m in curve) / len(curve)
            learn_s = sum(m.learn_s for m in informative) / len(informative) if informative else 0
            fit = int(left_s() // (rollout_s + (learn_s or rollout_s)))
            if fit < 1:
                return curve
        steps = min(len(curve) + min(fit, args.steps - len(informative)), args.max_steps)
        trainer.config = trainer.config.model_copy(update={"steps": steps})
        trainer.train()  # resumes from the latest checkpoint


@dataclass
class Sitting:
    """The run's wall time over its sessions: what the earlier ones recorded, plus this one."""

    earlier_s: float
    started: float = field(default_factory=time.perf_counter)

    def elapsed_s(self) -> float:
        return self.earlier_s + time.perf_counter() - self.started


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    train_ids = [t.instance_id for t in load_tasks(split="easy", subset="train")]
    eval_ids = [t.instance_id for t in load_tasks(split="easy", subset="eval")]
    train_ids = train_ids[: args.train_tasks]
    results_path = args.out / "results.json"
    results: dict[str, Any] = json.loads(results_path.read_text()) if results_path.exists() else {}
    cost: dict[str, Any] = results.setdefault("cost", {"wall_s": {}, "generated_tokens": {}})

    sitting = Sitting(cost.get("elapsed_s", 0.0))

    def save() -> None:
        cost["elapsed_s"] = sitting.elapsed_s()  # an interrupted run keeps its time so far
        results_path.write_text(json.dumps(results, indent=2) + "\n")

    def grpo_time_left_s() -> float:
        """What the run has left before the held-out evaluation after GRPO must begin: it
        runs as many rollouts as the one before did, then the last checkpoint loads and the
        plot is drawn (``AFTER_MARGIN_S``)."""
        save()
        after_s = cost["wall_s"]["before"] + AFTER_MARGIN_S
        return args.minutes * 60 - sitting.elapsed_s() - after_s

    print("== 1-2. warm start on the demonstrations")
    started = time.perf_counter()
    bc = warm_start(args, train_ids[: args.bc_tasks])
    cost["wall_s"].setdefault("bc", time.perf_counter() - started)
    save()  # a run resumed after the warm start keeps its cost

    starts = eval_starts(args, eval_ids)
    print("== 3. held-out success before GRPO")
    held_out_rewards(args, bc, starts, "before", results, save)

    print("== 4. GRPO from the train tasks' start states")
    config = GRPOConfig(
        output_dir=args.out / "grpo",
        model=bc,
        env={"split": ENV["split"], "task_ids": train_ids},
        forced_compaction_threshold=ENV["forced_compaction_threshold"],
        steps=args.steps,
        tasks_per_step=args.tasks_per_step,
        skip_uniform_for=args.skip_uniform_for,
        favour_mixed=not args.uniform_draws,
        rollouts_per_task=args.group_size,
        rollout_max_steps=MAX_ENV_STEPS,
        rollout_max_tokens=CONTEXT_WINDOW,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        stop_after_action=args.stop_after_action,
        learning_rate=args.learning_rate,
        rollout_workers=args.workers,
        batch_groups=True,
        micro_batch_size=args.micro_batch_size,  # the start state runs once a pass
        micro_batch_tokens=args.micro_batch_tokens,
        save_every=4,  # a checkpoint is 1.6 GB (weights and optimizer)
        demonstration=DemonstrationStarts(
            steps_left=args.train_steps_left,
            max_policy_steps=args.max_policy_steps,
            probe_samples=args.probe_samples,
        ),
    )
    curve = grpo(GRPOTrainer(config), args, grpo_time_left_s)

    if results.get("after_step") != len(curve):  # a longer rerun evaluates its last step
        results["after_step"] = len(curve)
        results.pop("after", None)
        cost["generated_tokens"].pop("after", None)
        cost["wall_s"].pop("after", None)
    print("== 5. held-out success after GRPO")
    last = str(config.output_dir / f"checkpoint-{len(curve)}")
    held_out_rewards(args, last, starts, "after", results, save)
    results["curve"] = [
        {
            "step": m.step,
            "reward": m.reward_mean,
            "informative_groups": m.informative_groups,
            "groups": args.tasks_per_step,
            "format_error_rate": m.format_error_rate,
        }
        for m in curve
    ]
    results["success"] = {
        name: {column: e.model_dump() for column, e in row.items()}
        for name, row in success_table(results).items()
    }
    probe = read_probe(config.output_dir / PROBE_FILE)
    if probe:
        cost["wall_s"]["probe"] = sum(result.wall_s for result in probe)
        results["probe"] = {
            "starts": len(probe),
            "mixed": sum(len(set(result.rewards)) > 1 for result in probe),
            "rewards": {result.start_id: result.rewards for result in probe},
        }
    cost["wall_s"]["grpo"] = sum(m.rollout_s + m.learn_s for m in curve)
    cost["learner_tokens"] = sum(m.tokens for m in curve)
    results["settings"] = {k: str(v) for k, v in vars(args).items()}
    save()
    report(results, args.out / "results.png")


def report(results: dict[str, Any], path: Path) -> None:
    print(f"\n{'step':>4} {'train reward':>12} {'informative groups':>18} {'format errors':>13}")
    for row in results["curve"]:
        reward = row["reward"] if row["reward"] is not None else float("nan")
        errors = row["format_error_rate"]
        errors = errors if errors is not None else float("nan")
        informative = f"{row['informative_groups']}/{row['groups']}"
        print(f"{row['step']:>4} {reward:>12.2f} {informative:>18} {errors:>13.2f}")
    print("\nheld-out success, mean over start states [95% bootstrap interval], n start states")
    for name, row in results["success"].items():
        shown = [f"{c}: {e['mean']:.2f} [{e['low']:.2f}, {e['high']:.2f}]" for c, e in row.items()]
        print(f"  {name}: " + "; ".join(shown) + f"; n={row['before']['n']}")
    cost = results["cost"]
    wall = ", ".join(f"{stage} {seconds / 60:.1f}" for stage, seconds in cost["wall_s"].items())
    wall += f"; the whole run {cost['elapsed_s'] / 60:.1f}"
    print(
        f"wall minutes: {wall}; generated tokens (held-out): {cost['generated_tokens']}; "
        f"learner tokens: {cost['learner_tokens']}"
    )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (curve, bars) = plt.subplots(1, 2, figsize=(9, 3.5), width_ratios=[2, 1])
    steps = [row["step"] for row in results["curve"]]
    rewards = [r["reward"] if r["reward"] is not None else float("nan") for r in results["curve"]]
    curve.plot(steps, rewards, marker="o", label="mean reward")
    shares = [row["informative_groups"] / row["groups"] for row in results["curve"]]
    curve.bar(steps, shares, alpha=0.3, color="grey", label="informative groups (share)")
    curve.set_xlabel("GRPO step")
    curve.set_ylim(-0.05, 1.05)
    curve.set_title("train start states")
    curve.legend(fontsize="small")
    names = list(results["success"])
    width = 0.4
    for offset, stage in ((0.0, "before"), (width, "after")):
        cells = [results["success"][name][stage] for name in names]
        heights = [c["mean"] for c in cells]
        errors = [[c["mean"] - c["low"] for c in cells], [c["high"] - c["mean"] for c in cells]]
        x = [i + offset for i in range(len(names))]
        bars.bar(x, heights, width, yerr=errors, capsize=3, label=stage)
    bars.set_xticks([i + width / 2 for i in range(len(names))])
    bars.set_xticklabels([name.replace("steps_left=", "depth ") for name in names])
    bars.set_ylim(0, 1)
    bars.set_title("held-out success (95% CI)")
    bars.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path} and {path.with_suffix('.json')}")


if __name__ == "__main__":
    main()
