"""SB3 PPO learns *when* the reference agent should compact (AutoCompact-Timing-v0), then is
compared with fixed rules on held-out tasks at the same budget.

.venv/bin/python examples/ppo_timing.py [--quick] [--timesteps 2048] [--eval-tasks 6]

Training uses the first ``--train-tasks`` built-in easy tasks of the ``train`` subset; the
evaluation runs every policy once on each of the first ``--eval-tasks`` ``eval`` tasks:
PPO (deterministic), ``never``, ``every N`` (compact after N worker turns), ``after passing
tests`` and ``threshold T`` (compact once the context holds more than T tokens); the rules are
``ac_env.compaction.when``'s. ``--quick`` is a smoke run for the tests.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import SubprocVecEnv
from tqdm import tqdm

from ac_env.compaction.when import AfterPassingTests, Every, Never, TokenThreshold
from ac_env.tasks import load_tasks
from ac_env.timing import COMPACT, CONTINUE, TimingEnv
from ac_env.timing.rules import Decide, decide_by


@dataclass(frozen=True)
class Outcome:
    success: bool
    cost_usd: float
    reward: float
    compactions: int
    steps: int


class ProgressBar(BaseCallback):
    """A tqdm bar over PPO's environment steps."""

    def __init__(self, total: int) -> None:
        super().__init__()
        self.bar = tqdm(total=total, desc="training", unit="step")

    def _on_step(self) -> bool:
        self.bar.update(self.training_env.num_envs)
        return True

    def _on_training_end(self) -> None:
        self.bar.close()


def run_episode(env: TimingEnv, decide: Decide, task_id: str) -> Outcome:
    obs, _ = env.reset(seed=0, options={"task_id": task_id})
    done, reward, info, compactions = False, 0.0, {}, 0
    while not done:
        action = decide(env, obs) if env.action_masks()[COMPACT] else CONTINUE
        obs, reward, terminated, truncated, info = env.step(action)
        compactions += int(info["compacted_now"])
        done = terminated or truncated
    return Outcome(
        success=info["inner_reward"] == 1.0,
        cost_usd=info["cost_usd"],
        reward=float(reward),
        compactions=compactions,
        steps=info["step"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny smoke run (for tests)")
    parser.add_argument("--timesteps", type=int, default=2048)
    parser.add_argument("--n-envs", type=int, default=4, help="training envs (processes)")
    parser.add_argument("--n-steps", type=int, default=64, help="steps per env per update")
    parser.add_argument("--train-tasks", type=int, default=8)
    parser.add_argument("--eval-tasks", type=int, default=6)
    parser.add_argument("--budget-usd", type=float, default=0.02)
    parser.add_argument("--max-steps", type=int, default=40)
    parser.add_argument("--cost-penalty", type=float, default=10.0)
    parser.add_argument("--every", type=int, default=6)
    parser.add_argument("--threshold", type=int, default=6000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.quick:
        args.timesteps, args.n_envs, args.n_steps, args.train_tasks, args.eval_tasks = (
            16,
            2,
            8,
            1,
            1,
        )
        args.max_steps = 12

    def make_env(subset: str, count: int) -> TimingEnv:
        ids = [t.instance_id for t in load_tasks("builtin", "easy", subset=subset)[:count]]
        env_kwargs: dict[str, Any] = {
            "split": "easy",
            "task_ids": ids,
            "budget_usd": args.budget_usd,
            "max_steps": args.max_steps,
        }
        return TimingEnv(env_kwargs=env_kwargs, cost_penalty=args.cost_penalty)

    train = SubprocVecEnv([lambda: make_env("train", args.train_tasks)] * args.n_envs)
    train.seed(args.seed)
    model = PPO(
        "MlpPolicy",
        train,
        n_steps=args.n_steps,
        batch_size=args.n_steps * args.n_envs,
        n_epochs=4,
        learning_rate=1e-3,
        seed=args.seed,
        device="cpu",
        verbose=0,
    )
    model.learn(args.timesteps, callback=ProgressBar(args.timesteps))
    train.close()

    def ppo(env: TimingEnv, obs: np.ndarray) -> int:
        action, _ = model.predict(obs, deterministic=True)
        return int(action)

    policies: dict[str, Decide] = {
        "ppo": ppo,
        "never": decide_by(Never()),
        f"every {args.every}": decide_by(Every(args.every)),
        f"threshold {args.threshold}": decide_by(TokenThreshold(args.threshold)),
        "after passing tests": decide_by(AfterPassingTests()),
    }
    env = make_env("eval", args.eval_tasks)
    task_ids = [t.instance_id for t in env.inner.tasks]
    jobs = [(name, task_id) for name in policies for task_id in task_ids]
    results: dict[str, list[Outcome]] = {name: [] for name in policies}
    for name, task_id in tqdm(jobs, desc="evaluating", unit="ep"):
        results[name].append(run_episode(env, policies[name], task_id))
    env.close()

    print(
        f"\n{len(task_ids)} held-out easy tasks, budget ${args.budget_usd}, "
        f"max {args.max_steps} steps, cost penalty {args.cost_penalty}/USD, "
        f"PPO trained {args.timesteps} steps on {args.train_tasks} tasks"
    )
    print(f"{'policy':<16}{'success':>9}{'mean $':>10}{'reward':>9}{'compacts':>10}{'steps':>7}")
    for name, outcomes in results.items():
        print(
            f"{name:<16}"
            f"{statistics.mean(o.success for o in outcomes):>9.2f}"
            f"{statistics.mean(o.cost_usd for o in outcomes):>10.4f}"
            f"{statistics.mean(o.reward for o in outcomes):>9.3f}"
            f"{statistics.mean(o.compactions for o in outcomes):>10.1f}"
            f"{statistics.mean(o.steps for o in outcomes):>7.1f}"
        )


if __name__ == "__main__":
    main()
