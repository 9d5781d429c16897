"""MaskablePPO learns *when* the reference agent compacts on the long real-code tasks, then is
compared on the held-out eval tasks with fixed rules tuned on the train tasks.

    nohup .venv/bin/python examples/ppo_timing_long.py --out runs/ppo_long > ppo_long.log 2>&1 &
    .venv/bin/python examples/ppo_timing_long.py --quick --out /tmp/ppo_quick   # smoke run

Setting: ``AutoCompact-Timing-v0`` over ``task_source="real", split="long"`` (5-6 bugs per
task), a 32K context window, no forced compaction (an overflow ends the episode), 100 worker
turns, no budget during the run; the reward is success minus ``--cost-penalty`` per USD.
Every stage saves what it did under ``--out`` and a rerun resumes it: training from its
checkpoint (within ``--minutes`` of training wall time in all), the rule and evaluation
episodes from ``episodes-*.jsonl``. ``--stage`` runs one stage (``--shard K/N``: every Nth
task from the Kth), so stages can run in parallel processes. Commands go through the replay
cache (``command_cache``, ``--cache``), shared by every stage and process.

1. Train MaskablePPO on the train subset (``--n-envs`` subprocess envs). ``--imitate RULE``
   first behaviour-clones a timing rule: its decisions on every train task, cross-entropy on
   the policy net and the discounted final reward as the value net's target, then PPO
   continues from those weights (instead of from "compaction is rare").
2. Tune each rule family on the train subset (one episode per task, the agent and env are
   deterministic): ``never``, ``every N`` (compact after N worker turns), ``threshold T``
   (compact once the context holds T tokens), and the reference agent's own
   ``after_locate`` / ``after_fix`` (it compacts right after locating a bug / keeping a fix).
   Each family keeps its best parameter by mean train reward; the best family on train is
   "the best tuned rule".
3. Evaluate PPO (deterministic) and every tuned rule on the eval subset: mean reward, mean
   cost, success within each budget in ``BUDGETS`` (solved and spent at most the budget: the
   policies do not see a budget, so this is what a run under that budget would give), and
   paired bootstrap intervals over tasks of PPO minus each tuned rule.
4. Write ``results.json`` and ``results.png``, and export the policy network with
   ``save_timing_policy`` (``--export``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
from tqdm import tqdm

from ac_env.agents.reference import ReferenceAgent
from ac_env.analysis.stats import bootstrap_mean, paired_difference
from ac_env.compaction.when import Every, Never, TokenThreshold
from ac_env.sandbox.command_cache import CachingSandbox
from ac_env.tasks import load_tasks
from ac_env.timing import COMPACT, CONTINUE, TimingEnv
from ac_env.timing.policy_file import save_timing_policy
from ac_env.timing.rules import Decide, decide_by

BUDGETS = (0.1, 0.2, 0.4)
EVERY = (20, 10, 5)
THRESHOLDS = (24_000, 20_000, 16_000, 12_000)


@dataclass(frozen=True)
class Outcome:
    stage: str
    policy: str
    task_id: str
    success: bool
    cost_usd: float
    reward: float
    compactions: int
    steps: int
    exit_reason: str
    infra_failure: bool


# ---- environments -------------------------------------------------------------------------


def make_env(args: argparse.Namespace, subset: str, worker: str = "never") -> TimingEnv:
    env_kwargs: dict[str, Any] = {
        "task_source": "real",
        "split": "long",
        "subset": subset,
        "context_window": args.context_window,
        "max_steps": args.max_steps,
        "forced_compaction_threshold": None,  # the policy alone decides; overflow ends it
        "command_cache": str(args.cache),
    }
    if args.quick:
        env_kwargs["task_ids"] = task_ids(subset)[-1:]
    factory = None if worker == "never" else (lambda: ReferenceAgent(compact_when=worker))
    return TimingEnv(env_kwargs=env_kwargs, cost_penalty=args.cost_penalty, worker=factory)


def task_ids(subset: str) -> list[str]:
    return [t.instance_id for t in load_tasks("real", "long", subset=subset)]


class Counted(gym.Wrapper):  # type: ignore[type-arg]
    """Adds, at each episode's end, the outcome and the command cache's running counts."""

    def __init__(self, env: TimingEnv) -> None:
        super().__init__(env)
        self.timing = env
        self.hits = self.misses = 0
        self.compactions = 0

    def action_masks(self) -> np.ndarray:
        return self.timing.action_masks()

    def step(self, action: Any) -> Any:
        sandbox = self.timing.inner.sandbox
        before = (sandbox.hits, sandbox.misses) if isinstance(sandbox, CachingSandbox) else (0, 0)
        obs, reward, terminated, truncated, info = self.env.step(action)
        if isinstance(sandbox, CachingSandbox):
            self.hits += sandbox.hits - before[0]
            self.misses += sandbox.misses - before[1]
        self.compactions += int(info["compacted_now"])
        if terminated or truncated:
            info["episode_outcome"] = {
                "reward": float(reward),
                "success": info["inner_reward"] == 1.0,
                "cost_usd": info["cost_usd"],
                "compactions": self.compactions,
                "steps": info["step"],
            }
            self.compactions = 0
        info["cache_counts"] = (self.hits, self.misses)
        return obs, reward, terminated, truncated, info


# ---- 1. training --------------------------------------------------------------------------


class Progress(BaseCallback):
    """tqdm over decisions; checkpoints after each rollout; stops at the wall-time budget."""

    def __init__(self, out: Path, budget_s: float, state: dict[str, Any]) -> None:
        super().__init__()
        self.out, self.budget_s, self.state = out, budget_s, state
        self.started = time.perf_counter()
        self.bar = tqdm(desc="training", unit="decision", initial=state["decisions"])

    def _elapsed(self) -> float:
        return self.state["wall_s"] + time.perf_counter() - self.started

    def _on_step(self) -> bool:
        self.bar.update(self.training_env.num_envs)
        for env_index, info in enumerate(self.locals["infos"]):
            self.state["cache"][env_index] = list(info["cache_counts"])
            if "episode_outcome" in info:
                outcome = {**info["episode_outcome"], "decisions": int(self.num_timesteps)}
                self.state["episodes"].append(outcome)
                recent = self.state["episodes"][-20:]
                self.bar.set_postfix(
                    episodes=len(self.state["episodes"]),
                    reward=f"{statistics.mean(e['reward'] for e in recent):.3f}",
                )
        return self._elapsed() < self.budget_s

    def _on_rollout_end(self) -> None:
        self.save()

    def save(self) -> None:
        self.model.save(self.out / "checkpoint.zip")
        state = {
            **self.state,
            "decisions": int(self.num_timesteps),
            "wall_s": self._elapsed(),
            "cache_total": [
                sum(c[0] for c in self.state["cache_base"] + self.state["cache"]),
                sum(c[1] for c in self.state["cache_base"] + self.state["cache"]),
            ],
        }
        (self.out / "training.json").write_text(json.dumps(state))

    def _on_training_end(self) -> None:
        self.save()
        self.bar.close()


@dataclass(frozen=True)
class Demonstrations:
    observations: np.ndarray
    actions: np.ndarray
    masks: np.ndarray
    returns: np.ndarray  # the episode's final reward, discounted to each decision
    episodes: int


def demonstrate(args: argparse.Namespace, decide: Decide, gamma: float) -> Demonstrations:
    """``decide``'s decisions on every train task (the env and worker are deterministic)."""
    observations: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    actions: list[int] = []
    returns: list[float] = []
    env = make_env(args, "train")
    ids = task_ids("train")[-1:] if args.quick else task_ids("train")
    for task_id in tqdm(ids, desc="demonstrations", unit="ep"):
        obs, _ = env.reset(seed=0, options={"task_id": task_id})
        done, reward, start = False, 0.0, len(actions)
        while not done:
            mask = env.action_masks()
            action = decide(env, obs) if mask[COMPACT] else CONTINUE
            observations.append(obs)
            actions.append(action)
            masks.append(mask)
            obs, reward, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
        steps = len(actions) - start
        returns += [reward * gamma ** (steps - 1 - i) for i in range(steps)]
    env.close()
    return Demonstrations(
        np.array(observations, dtype=np.float32),
        np.array(actions),
        np.array(masks),
        np.array(returns, dtype=np.float32),
        len(ids),
    )


def imitate(model: MaskablePPO, demos: Demonstrations, epochs: int) -> dict[str, Any]:
    """Full-batch cross-entropy of the (masked) policy on the demonstrated actions, plus the
    value loss on their returns; returns the fitted policy's agreement with the rule."""
    policy = model.policy
    obs = torch.as_tensor(demos.observations)
    actions = torch.as_tensor(demos.actions)
    returns = torch.as_tensor(demos.returns)
    masks = torch.as_tensor(demos.masks)
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
    for _ in range(epochs):
        values, log_prob, _ = policy.evaluate_actions(obs, actions, action_masks=masks)
        loss = -log_prob.mean() + torch.nn.functional.mse_loss(values.flatten(), returns)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        predicted, _ = model.predict(demos.observations, deterministic=True)
    free = demos.masks[:, COMPACT]  # decisions where compacting was allowed
    compact = demos.actions[free] == COMPACT
    agree = predicted[free] == demos.actions[free]
    return {
        "episodes": demos.episodes,
        "decisions": len(demos.actions),
        "free_decisions": int(free.sum()),
        "rule_compactions": int(compact.sum()),
        "agreement": float(agree.mean()),
        "agreement_on_compactions": float(agree[compact].mean()) if compact.any() else None,
        "final_loss": float(loss.detach()),
    }


def train(args: argparse.Namespace) -> MaskablePPO:
    checkpoint, state_file = args.out / "checkpoint.zip", args.out / "training.json"
    state: dict[str, Any] = {"decisions": 0, "wall_s": 0.0, "episodes": [], "cache_base": []}
    if state_file.exists():
        state = json.loads(state_file.read_text())
        state["cache_base"] = state["cache_base"] + state["cache"]  # a new process counts anew
    state["cache"] = [[0, 0] for _ in range(args.n_envs)]
    budget_s = args.minutes * 60
    envs = [lambda: Counted(make_env(args, "train")) for _ in range(args.n_envs)]
    vec = SubprocVecEnv(envs) if args.n_envs > 1 else DummyVecEnv(envs)
    vec.seed(args.seed + len(state["episodes"]))
    if checkpoint.exists():
        model = MaskablePPO.load(checkpoint, env=vec, device="cpu")
    else:
        model = MaskablePPO(
            "MlpPolicy",
            vec,
            n_steps=args.n_steps,
            batch_size=args.n_steps * args.n_envs // 4,
            n_epochs=8,
            learning_rate=3e-4,
            gamma=0.998,
            gae_lambda=0.95,
            ent_coef=0.01,
            policy_kwargs={"net_arch": [64, 64]},
            seed=args.seed,
            device="cpu",
            verbose=0,
        )
        if args.imitate:
            decide = rules()[args.imitate][1]
            demos = demonstrate(args, decide, model.gamma)
            state["imitation"] = {"rule": args.imitate, **imitate(model, demos, args.bc_epochs)}
            print("imitation:", json.dumps(state["imitation"]))
        else:
            # Start from "compaction is rare" (p(compact) ~ 5%): a 50% coin compacts every
            # other turn, which no sensible policy does, and wastes the few episodes we have.
            with torch.no_grad():
                model.policy.action_net.bias.copy_(torch.tensor([0.0, -3.0]))
    if state["wall_s"] < budget_s:
        callback = Progress(args.out, budget_s, state)
        model.learn(args.timesteps, callback=callback, reset_num_timesteps=False)
    vec.close()
    return model


# ---- 2. and 3. rules, episodes ------------------------------------------------------------


def rules() -> dict[str, tuple[str, Decide, str]]:
    """name -> (family, decide, the worker's own compaction rule), cheapest to learn from first
    (the episodes run in this order)."""
    table: dict[str, tuple[str, Decide, str]] = {"never": ("never", decide_by(Never()), "never")}
    table["after_locate"] = ("after_locate", decide_by(Never()), "after_locate")
    table |= {
        f"threshold {t}": ("threshold", decide_by(TokenThreshold(t)), "never") for t in THRESHOLDS
    }
    table |= {f"every {n}": ("every", decide_by(Every(n)), "never") for n in EVERY}
    table["after_fix"] = ("after_fix", decide_by(Never()), "after_fix")
    return table


def run_episode(env: TimingEnv, decide: Decide, task_id: str, stage: str, name: str) -> Outcome:
    obs, _ = env.reset(seed=0, options={"task_id": task_id})
    done, reward, info = False, 0.0, {}
    while not done:
        action = decide(env, obs) if env.action_masks()[COMPACT] else CONTINUE
        obs, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    assert env.inner.trajectory is not None  # the worker's own compactions count too
    compactions = sum(e.trigger != "masking" for e in env.inner.trajectory.compactions())
    return Outcome(
        stage=stage,
        policy=name,
        task_id=task_id,
        success=info["inner_reward"] == 1.0,
        cost_usd=info["cost_usd"],
        reward=float(reward),
        compactions=compactions,
        steps=info["step"],
        exit_reason=info["exit_reason"],
        infra_failure=info["infra_failure"],
    )


def run_all(
    args: argparse.Namespace,
    stage: str,
    subset: str,
    policies: dict[str, tuple[Decide, str]],
    done: dict[tuple[str, str, str], Outcome],
) -> dict[str, list[Outcome]]:
    """Every policy on every task of ``subset``, skipping episodes ``done`` already holds."""
    ids = task_ids(subset)[-1:] if args.quick else task_ids(subset)
    index, count = args.shard
    mine = ids[index::count]
    jobs = [(name, t) for name in policies for t in mine if (stage, name, t) not in done]
    envs: dict[str, TimingEnv] = {}
    with (args.out / f"episodes-{stage}-{index}.jsonl").open("a") as log:
        for name, task_id in tqdm(jobs, desc=f"{stage} episodes", unit="ep"):
            decide, worker = policies[name]
            env = envs.get(worker) or envs.setdefault(worker, make_env(args, subset, worker))
            outcome = run_episode(env, decide, task_id, stage, name)
            done[(stage, name, task_id)] = outcome
            log.write(json.dumps(asdict(outcome)) + "\n")
            log.flush()
    for env in envs.values():
        env.close()
    return {
        name: [done[(stage, name, t)] for t in ids if (stage, name, t) in done] for name in policies
    }


def load_done(out: Path) -> dict[tuple[str, str, str], Outcome]:
    done = {}
    for log in sorted(out.glob("episodes-*.jsonl")):
        for line in log.read_text().splitlines():
            outcome = Outcome(**json.loads(line))
            done[(outcome.stage, outcome.policy, outcome.task_id)] = outcome
    return done


# ---- 4. results ---------------------------------------------------------------------------


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    values = {
        "reward": [[o.reward] for o in outcomes],
        "cost_usd": [[o.cost_usd] for o in outcomes],
        "success": [[float(o.success)] for o in outcomes],
        **{
            f"success_at_{b}": [[float(o.success and o.cost_usd <= b)] for o in outcomes]
            for b in BUDGETS
        },
    }
    row: dict[str, Any] = {k: bootstrap_mean(v).model_dump() for k, v in values.items()}
    row["compactions"] = statistics.mean(o.compactions for o in outcomes)
    row["steps"] = statistics.mean(o.steps for o in outcomes)
    row["infra_failures"] = sum(o.infra_failure for o in outcomes)
    return row


def paired(ppo: list[Outcome], rule: list[Outcome]) -> dict[str, Any]:
    def by_task(outcomes: list[Outcome], value: Callable[[Outcome], float]) -> dict[str, list]:
        return {o.task_id: [value(o)] for o in outcomes if not o.infra_failure}

    metrics: dict[str, Callable[[Outcome], float]] = {
        "reward": lambda o: o.reward,
        "cost_usd": lambda o: o.cost_usd,
        "success": lambda o: float(o.success),
        **{
            f"success_at_{b}": (lambda o, b=b: float(o.success and o.cost_usd <= b))
            for b in BUDGETS
        },
    }
    return {
        name: paired_difference(by_task(ppo, value), by_task(rule, value)).model_dump()
        for name, value in metrics.items()
    }


def plot(path: Path, training: dict[str, Any], evaluation: dict[str, Any]) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    episodes = training["episodes"]
    if episodes:
        x = [e["decisions"] for e in episodes]
        y = [e["reward"] for e in episodes]
        window = max(1, min(20, len(y) // 5))
        smooth = np.convolve(y, np.ones(window) / window, mode="valid")
        left.plot(x, y, ".", alpha=0.3, label="episode")
        left.plot(x[window - 1 :], smooth, label=f"mean of {window}")
    left.set(xlabel="decisions trained", ylabel="train episode reward", title="MaskablePPO")
    left.legend()
    names = list(evaluation)
    means = [evaluation[n]["reward"]["mean"] for n in names]
    errors = [
        [m - evaluation[n]["reward"]["low"] for n, m in zip(names, means, strict=True)],
        [evaluation[n]["reward"]["high"] - m for n, m in zip(names, means, strict=True)],
    ]
    right.barh(names, means, xerr=errors, color=["C3" if n == "ppo" else "C0" for n in names])
    right.set(xlabel="mean eval reward (95% bootstrap)", title="held-out eval tasks")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def export(model: MaskablePPO, path: Path, trained_on: dict, evaluation: dict) -> None:
    """The deterministic policy: policy_net's linear layers (tanh) then action_net."""
    linear = [m for m in model.policy.mlp_extractor.policy_net if isinstance(m, torch.nn.Linear)]
    layers = [
        (m.weight.detach().numpy(), m.bias.detach().numpy())
        for m in [*linear, model.policy.action_net]
    ]
    save_timing_policy(
        path,
        layers,
        activation="tanh",
        description="MaskablePPO timing policy for the reference agent on the long real-code "
        "tasks (32K window): compact when the 'compact' logit is the larger",
        trained_on=trained_on,
        evaluation=evaluation,
        budget_usd=None,  # the training episodes ran without a budget
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (for the tests)")
    parser.add_argument("--out", type=Path, default=Path("runs/ppo_timing_long"))
    parser.add_argument("--cache", type=Path, help="command cache (default OUT/command-cache)")
    parser.add_argument("--minutes", type=float, default=30.0, help="training wall time")
    parser.add_argument("--timesteps", type=int, default=1_000_000, help="decisions, at most")
    parser.add_argument("--n-envs", type=int, default=2)
    parser.add_argument("--n-steps", type=int, default=256, help="decisions per env per update")
    parser.add_argument("--context-window", type=int, default=32_768)
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--cost-penalty", type=float, default=2.0, help="reward lost per USD")
    parser.add_argument("--export", type=Path, help="write the policy file here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--imitate",
        choices=[n for n, (_, _, worker) in rules().items() if worker == "never" and n != "never"],
        help="train: behaviour-clone this rule on the train tasks before PPO",
    )
    parser.add_argument("--bc-epochs", type=int, default=2000, help="imitation's full-batch steps")
    parser.add_argument(
        "--stage",
        choices=["all", "tune", "train", "eval-rules", "final"],
        default="all",
        help="one stage (to run stages in parallel processes), or all",
    )
    parser.add_argument("--shard", default="0/1", help="K/N: this process's share of tasks")
    parser.add_argument("--rules", nargs="+", help="tune/eval-rules: only these rules")
    parser.add_argument(
        "--tune-on", default="0/1", help="final: K/N: tune on every Nth train task from the Kth"
    )
    parser.add_argument(
        "--no-tune-now",
        dest="tune_now",
        action="store_false",
        help="final: tune on the rule episodes already run (skip the rest)",
    )
    args = parser.parse_args()
    if args.quick:
        args.minutes, args.timesteps, args.n_envs, args.n_steps = 0.2, 16, 1, 8
        args.max_steps, args.bc_epochs = 8, 20
    args.out.mkdir(parents=True, exist_ok=True)
    args.cache = args.cache or args.out / "command-cache"
    index, _, count = args.shard.partition("/")
    args.shard = (int(index), int(count))
    table = rules()
    chosen = args.rules or list(table)
    rule_policies = {n: (d, w) for n, (_, d, w) in table.items()}
    stage_rules = {n: rule_policies[n] for n in chosen}
    if args.stage in ("tune", "all"):
        run_all(args, "tune", "train", stage_rules, load_done(args.out))
    if args.stage in ("train", "all"):
        train(args)
    if args.stage in ("eval-rules", "all"):
        run_all(args, "eval", "eval", stage_rules, load_done(args.out))
    if args.stage not in ("final", "all"):
        return

    model = MaskablePPO.load(args.out / "checkpoint.zip", device="cpu")
    training = json.loads((args.out / "training.json").read_text())
    done = load_done(args.out)
    if args.tune_now:
        run_all(args, "tune", "train", rule_policies, done)
    # Tuned on the rules that ran on every train task (a rule whose tuning did not finish is
    # left out, and results.json says so).
    start, _, step = args.tune_on.partition("/")
    train_ids = task_ids("train")[-1:] if args.quick else task_ids("train")[int(start) :: int(step)]
    tuned = [n for n in table if all(("tune", n, t) in done for t in train_ids)]
    train_reward = {
        n: statistics.mean(done[("tune", n, t)].reward for t in train_ids) for n in tuned
    }
    best: dict[str, str] = {}
    for name in tuned:
        family = table[name][0]
        if family not in best or train_reward[name] > train_reward[best[family]]:
            best[family] = name
    best_rule = max(best.values(), key=lambda n: train_reward[n])

    def ppo(env: TimingEnv, obs: np.ndarray) -> int:
        action, _ = model.predict(obs, deterministic=True, action_masks=env.action_masks())
        return int(action)

    evaluated = run_all(args, "eval", "eval", {"ppo": (ppo, "never")}, done)
    tuned_rules = {n: rule_policies[n] for n in best.values()}  # may have run meanwhile
    evaluated |= run_all(args, "eval", "eval", tuned_rules, load_done(args.out))
    evaluation = {name: summary(outcomes) for name, outcomes in evaluated.items()}
    versus = {n: paired(evaluated["ppo"], evaluated[n]) for n in best.values()}

    cache_hits, cache_misses = training["cache_total"]
    imitated = training.get("imitation")
    results = {
        "setting": {
            "split": "long",
            "context_window": args.context_window,
            "max_steps": args.max_steps,
            "cost_penalty_per_usd": args.cost_penalty,
            "budgets_usd": list(BUDGETS),
            "quick": args.quick,
        },
        "training": {
            "wall_s": training["wall_s"],
            "decisions": training["decisions"],
            "episodes": len(training["episodes"]),
            "imitation": imitated,
            "command_cache_hit_rate": cache_hits / max(1, cache_hits + cache_misses),
        },
        "tuning_tasks": train_ids,
        "tuning_train_reward": train_reward,
        "rules_not_tuned": [n for n in table if n not in tuned],
        "tuned_rules": best,
        "best_tuned_rule": best_rule,
        "eval": evaluation,
        "ppo_minus_rule": versus,
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    plot(args.out / "results.png", training, evaluation)
    if args.export:
        trained_on = {
            "tasks": f"real long train subset ({len(task_ids('train'))} tasks), "
            "no forced compaction",
            **results["setting"],
            **results["training"],
            "algorithm": "sb3_contrib MaskablePPO, net_arch [64, 64], tanh"
            + (f", warm-started by cloning '{imitated['rule']}'" if imitated else ""),
        }
        shown = ("reward", "success", "cost_usd", "compactions")
        ppo_row = {k: evaluation["ppo"][k] for k in shown}
        rule_row = {k: evaluation[best_rule][k] for k in shown}
        summary_eval = {
            "tasks": f"real long eval subset ({len(task_ids('eval'))} tasks)",
            "ppo": ppo_row,
            "best_tuned_rule": {"name": best_rule, **rule_row},
            "ppo_minus_best_rule_reward": versus[best_rule]["reward"],
        }
        export(model, args.export, trained_on, summary_eval)
    print(json.dumps({k: results[k] for k in ("training", "best_tuned_rule")}, indent=1))
    width = max(len(n) for n in evaluation)
    print(f"{'policy':<{width}}  reward   success  mean $  compactions")
    for name, row in evaluation.items():
        print(
            f"{name:<{width}}  {row['reward']['mean']:>6.3f}  {row['success']['mean']:>7.2f}"
            f"  {row['cost_usd']['mean']:>6.4f}  {row['compactions']:>5.1f}"
        )


if __name__ == "__main__":
    main()
