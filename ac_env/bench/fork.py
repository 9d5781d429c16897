"""Counterfactual fork: what each compaction was worth, found by continuing the same episode
with it and without it.

For every episode of a ``BenchConfig`` (strategy x task x seed, at the run budget: the highest
of ``budgets``) the original run takes an env snapshot (``ac_env.snapshot``) before each step
that compacts: a summary the policy wrote that the env applies (``proactive``), or the answer
to a forced compaction request (``forced``; masking is not a compaction here). From each
snapshot two branches run to the end, each in a fresh env restored from it, under the same
budget and step limit:

- **with**: the same output is stepped again and the compaction applies; the strategy goes on
  as in the original (a deterministic worker repeats the original's continuation exactly);
- **without**: the same output is stepped with compaction switched off from there on: the
  compaction is skipped as under ``summary_ignored`` (no summary generated, billed or kept:
  the model's turn stays in the history cut at the summary heading, followed by
  ``COMPACTION_SKIPPED``), and no later compaction happens, proactive or forced. (Skipping
  this one alone is no counterfactual for a forced compaction: the very next turn would be
  asked again.) The worker goes on as under ``summary_ignored``: the reference agent, seeing
  its compaction skipped, continues as the agent that never compacts.

Per compaction: ``regret = success(with) - success(without)`` (+1: the compaction, with the
compactions after it, won the episode; -1: it lost it; None when a branch's grading failed),
and ``cost_difference_usd = cost(with) - cost(without)``. A model worker samples afresh in
each branch: its random state is not part of a snapshot.

Results go to ``<out>/fork/``: ``forks.jsonl`` (one ``ForkRecord`` per compaction, appended
as each finishes), ``episodes.jsonl`` (one ``ForkEpisode`` per original run, appended once its
forks are written) and ``trajectories/`` (each original run and both branches of each fork);
``fork_report.write_fork_report`` adds the summary, table and plot. ``<out>/config.json`` is the
run's identity, shared with an ``ac-bench`` run in the same directory. A rerun skips finished
episodes, and in an unfinished one the forks already written (its original runs again to
reach the others). An original run that crashes or ends in an infrastructure error is retried
once (``ac_env.runs.retry``), then recorded as an infra error.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
from pydantic import BaseModel
from tqdm import tqdm

from ac_env.actions import Compact, make_parser
from ac_env.agents.rollout import play, rollout
from ac_env.bench.config import BenchConfig
from ac_env.bench.episode_policy import (
    BindPolicy,
    EpisodePolicy,
    episode_policies,
    run_timing_policy,
)
from ac_env.bench.episodes import Job, episode_env_kwargs, run_jobs
from ac_env.bench.validate import validate_bench
from ac_env.cost import CallCost
from ac_env.env import AutoCompactSWEEnv
from ac_env.paths import safe_child
from ac_env.policy import PolicyOutput
from ac_env.records import append_jsonl, read_jsonl
from ac_env.runs.retry import recorded_infra_error, run_episode_with_retries
from ac_env.runs.run_dir import claim_directory
from ac_env.snapshot import EpisodeSnapshot
from ac_env.strategies import Strategy, get_strategy
from ac_env.timing.policy_file import TimingPolicy
from ac_env.trajectory import Trajectory

FORK_DIR = "fork"
FORKS_FILE = "forks.jsonl"
EPISODES_FILE = "episodes.jsonl"
CompactionKind = Literal["proactive", "forced"]
COMPACTION_KINDS: tuple[CompactionKind, ...] = ("proactive", "forced")
WITHOUT_COMPACTION: dict[str, Any] = {"skip_compaction": True, "forced_compaction_threshold": None}
"""The env keywords of the branch without compaction (on top of the strategy's own)."""


class BranchOutcome(BaseModel):
    """How one branch ended. ``compactions``: those applied from the fork on (the fork's
    own included)."""

    reward: float | None
    exit_reason: str
    steps: int
    cost: CallCost
    compactions: int
    infra_error: str | None = None
    trajectory: str

    @property
    def success(self) -> float | None:
        """1.0 or 0.0; None when the grading failed."""
        if self.infra_error is not None or self.reward is None or math.isnan(self.reward):
            return None
        return float(self.reward == 1.0)


class ForkRecord(BaseModel):
    """One compaction of one episode and its two continuations. ``step``: the model call that
    compacted (0-based); ``spent_usd``: the cost before it."""

    strategy: str
    instance_id: str
    split: str
    seed: int
    step: int
    kind: CompactionKind
    tokens_before: int
    tokens_after: int
    spent_usd: float
    with_compaction: BranchOutcome
    without_compaction: BranchOutcome
    regret: float | None
    cost_difference_usd: float

    @property
    def key(self) -> tuple[str, str, int, int]:
        return (self.strategy, self.instance_id, self.seed, self.step)


class ForkEpisode(BaseModel):
    """An original run: the steps it compacted at (each one a ``ForkRecord``), its outcome.
    ``infra_error``: it crashed twice (no forks), or its own grading failed (its forks, graded
    apart, stand)."""

    strategy: str
    instance_id: str
    split: str
    seed: int
    status: Literal["ok", "infra_error"]
    error: str | None = None
    fork_steps: list[int] = []
    reward: float | None = None
    cost_usd: float | None = None
    trajectory: str | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.strategy, self.instance_id, self.seed)


def regret(with_compaction: BranchOutcome, without_compaction: BranchOutcome) -> float | None:
    """success(with) - success(without); None when either branch has no grade."""
    gained, kept = with_compaction.success, without_compaction.success
    return None if gained is None or kept is None else gained - kept


@dataclass(frozen=True)
class ForkPoint:
    """A step that compacted, the snapshot from just before it and the action stepped there."""

    step: int
    kind: CompactionKind
    tokens_before: int
    tokens_after: int
    snapshot: EpisodeSnapshot
    action: Any


class CompactionPoints(gym.Wrapper[Any, Any, Any, Any]):
    """Around an ``AutoCompactSWEEnv``: snapshots the episode before each step that may
    compact (a compaction was requested, or the action is a summary) and keeps the snapshot
    as a ``ForkPoint`` when the step did compact."""

    def __init__(self, env: AutoCompactSWEEnv) -> None:
        super().__init__(env)
        self.points: list[ForkPoint] = []
        self._parser = make_parser(env.config.action_parser)
        self._requested = False

    def reset(self, **kwargs: Any) -> Any:
        self.points = []
        observation, info = self.env.reset(**kwargs)
        self._requested = info["compaction_requested"]
        return observation, info

    def step(self, action: Any) -> Any:
        base: AutoCompactSWEEnv = self.env.unwrapped  # type: ignore[assignment]
        text = action.text if isinstance(action, PolicyOutput) else action
        candidate = self._requested or isinstance(self._parser.parse(text), Compact)
        snapshot = base.snapshot() if candidate else None
        result = self.env.step(action)
        info = result[4]
        self._requested = info["compaction_requested"]
        compaction = info.get("compaction")
        if snapshot is not None and compaction and compaction["kind"] in COMPACTION_KINDS:
            self.points.append(
                ForkPoint(
                    step=info["step"] - 1,
                    kind=compaction["kind"],
                    tokens_before=compaction["tokens_before"],
                    tokens_after=compaction["tokens_after"],
                    snapshot=snapshot,
                    action=action,
                )
            )
        return result


def run_fork(
    config: BenchConfig, out_dir: str | Path, *, progress: bool = True
) -> list[ForkRecord]:
    """Fork every compaction of every episode of ``config`` not yet done in ``out_dir``;
    return all fork records (earlier runs' included) in job order, then by step."""
    out = Path(out_dir)
    tasks = validate_bench(config)  # nothing is written before all of it checks out
    timing = run_timing_policy(config)
    claim_directory(config, out)
    fork_dir = out / FORK_DIR
    (fork_dir / "trajectories").mkdir(parents=True, exist_ok=True)
    jobs = run_jobs(config, tasks)
    finished = {e.key for e in read_jsonl(fork_dir / EPISODES_FILE, ForkEpisode)}
    forks = {f.key: f for f in read_jsonl(fork_dir / FORKS_FILE, ForkRecord)}
    todo = [job for job in jobs if job.key not in finished]
    lock = threading.Lock()
    bar = tqdm(
        total=len(jobs),
        initial=len(jobs) - len(todo),
        desc="ac-bench fork",
        unit="ep",
        disable=not progress,
    )

    def written(fork: ForkRecord) -> None:
        with lock:
            append_jsonl(fork_dir / FORKS_FILE, fork)
            forks[fork.key] = fork
            bar.set_postfix_str(f"{len(forks)} forks")

    with bar, ThreadPoolExecutor(config.workers, thread_name_prefix="fork") as pool:
        futures = [
            pool.submit(
                fork_episode,
                config,
                job,
                fork_dir,
                {key[3] for key in forks if key[:3] == job.key},
                written,
                timing,
            )
            for job in todo
        ]
        for future in as_completed(futures):
            append_jsonl(fork_dir / EPISODES_FILE, future.result())
            bar.update(1)
    order = {job.key: index for index, job in enumerate(jobs)}
    return sorted(
        (f for f in forks.values() if f.key[:3] in order),
        key=lambda f: (order[f.key[:3]], f.step),
    )


def fork_episode(
    config: BenchConfig,
    job: Job,
    fork_dir: Path,
    done_steps: set[int],
    written: Callable[[ForkRecord], None],
    timing: TimingPolicy | None,
) -> ForkEpisode:
    """The original run of ``job`` and the forks of its compactions not in ``done_steps``
    (each passed to ``written`` as it finishes); retried once after a crash or an
    infrastructure error of the original run (then the last attempt's record stands).
    ``timing``: the run's timing policy (``run_timing_policy``)."""
    strategy = get_strategy(job.strategy)
    makers = (
        episode_policies(config, strategy, timing),
        episode_policies(config, _skipping(strategy), timing),
    )
    retried = run_episode_with_retries(
        lambda bind, attempt: _fork_attempt(
            config, job, fork_dir, done_steps, written, makers, bind
        ),
        make_policy=lambda: makers[0](job.seed),
        infra_error=recorded_infra_error,
        crashed=lambda error: ForkEpisode(
            strategy=job.strategy,
            instance_id=job.task.instance_id,
            split=job.task.split,
            seed=job.seed,
            status="infra_error",
            error=error,
        ),
        label=f"fork {job.label}",
    )
    return retried.result


def _fork_attempt(
    config: BenchConfig,
    job: Job,
    fork_dir: Path,
    done_steps: set[int],
    written: Callable[[ForkRecord], None],
    makers: tuple[EpisodePolicy, EpisodePolicy],
    bind: BindPolicy,
) -> ForkEpisode:
    """One attempt: the original run (its policy bound by ``bind``), then its forks."""
    env_kwargs = episode_env_kwargs(config, job)
    base = AutoCompactSWEEnv(**env_kwargs)
    env = CompactionPoints(base)
    try:
        original = rollout(
            env, bind(base), seed=job.seed, options={"task_id": job.task.instance_id}
        )
        points = list(env.points)
    finally:
        env.close()
    name = f"{job.strategy}/{job.task.instance_id}__seed{job.seed}"
    relative = _write(original, fork_dir, f"{name}.jsonl")
    for point in points:
        if point.step in done_steps:
            continue
        with_compaction = _branch(
            env_kwargs, point.snapshot, point, makers[0](job.seed), fork_dir, name, "with"
        )
        without_compaction = _branch(
            {**env_kwargs, **WITHOUT_COMPACTION},
            dataclasses.replace(point.snapshot, compaction_pending=None),
            point,
            makers[1](job.seed),
            fork_dir,
            name,
            "without",
        )
        written(
            ForkRecord(
                strategy=job.strategy,
                instance_id=job.task.instance_id,
                split=job.task.split,
                seed=job.seed,
                step=point.step,
                kind=point.kind,
                tokens_before=point.tokens_before,
                tokens_after=point.tokens_after,
                spent_usd=point.snapshot.meter.total.usd,
                with_compaction=with_compaction,
                without_compaction=without_compaction,
                regret=regret(with_compaction, without_compaction),
                cost_difference_usd=with_compaction.cost.usd - without_compaction.cost.usd,
            )
        )
        done_steps.add(point.step)
    end = original.end
    assert end is not None
    return ForkEpisode(
        strategy=job.strategy,
        instance_id=job.task.instance_id,
        split=job.task.split,
        seed=job.seed,
        status="ok" if end.infra_error is None else "infra_error",
        error=end.infra_error,
        fork_steps=[p.step for p in points],
        reward=end.reward,
        cost_usd=end.cost.usd,
        trajectory=relative,
    )


def _branch(
    env_kwargs: dict[str, Any],
    snapshot: EpisodeSnapshot,
    point: ForkPoint,
    bind: BindPolicy,
    fork_dir: Path,
    name: str,
    label: str,
) -> BranchOutcome:
    """Restore ``snapshot`` in a fresh env, step the fork point's action, play to the end."""
    env = AutoCompactSWEEnv(**env_kwargs)
    try:
        env.restore(snapshot)
        observation, _, terminated, truncated, _ = env.step(point.action)
        if not (terminated or truncated):
            play(env, bind(env), observation)
        trajectory = env.trajectory
    finally:
        env.close()
    assert trajectory is not None and trajectory.end is not None
    relative = _write(trajectory, fork_dir, f"{name}__step{point.step}__{label}.jsonl")
    end = trajectory.end
    return BranchOutcome(
        reward=end.reward,
        exit_reason=end.exit_reason,
        steps=len(trajectory.model_calls()),
        cost=end.cost,
        compactions=sum(
            1 for c in trajectory.compactions() if c.step >= point.step and c.trigger != "masking"
        ),
        infra_error=end.infra_error,
        trajectory=relative,
    )


def _skipping(strategy: Strategy) -> Strategy:
    """The strategy as the worker of the branch without compaction sees it: its compactions
    are skipped (so the reference agent goes on as under ``summary_ignored``)."""
    return dataclasses.replace(strategy, env={**strategy.env, "skip_compaction": True})


def _write(trajectory: Trajectory, fork_dir: Path, name: str) -> str:
    relative = f"trajectories/{name}"
    path = safe_child(fork_dir, relative)
    path.parent.mkdir(parents=True, exist_ok=True)
    trajectory.write(path)
    return relative
