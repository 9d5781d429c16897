"""Running a benchmark: episodes in parallel, results written as they finish, resumable.

``out_dir`` holds ``config.json`` (the run's identity), ``episodes.jsonl`` (one
``EpisodeRecord`` per finished episode, appended as each finishes: metrics, the outcome at
every budget, summary audits, continuation figures) and ``trajectories/``. A
rerun skips every episode already in ``episodes.jsonl`` (a torn last line from an interrupted
write is dropped). An episode that fails for infrastructure reasons (an exception from the
env or sandbox, a model server that did not answer, or grading that could not run) is retried
once; if it fails again it is recorded as ``infra_error`` and left out of every success rate,
never counted as a failure. The whole configuration is checked first (``validate``): a run
that cannot work writes nothing.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
from pydantic import BaseModel
from tqdm import tqdm

import ac_env  # noqa: F401  (registers the env id)
from ac_env.agents.rollout import rollout
from ac_env.bench.audit import SummaryAudit, SummaryWorkspace, audit_trajectory
from ac_env.bench.budgets import BudgetCrossings, BudgetOutcome, budget_outcomes
from ac_env.bench.config import BenchConfig, claim_directory
from ac_env.bench.continuation import Continuation, continuations
from ac_env.bench.episode_policy import BindPolicy, episode_policies, run_timing_policy
from ac_env.bench.metrics import EpisodeMetrics, episode_metrics
from ac_env.bench.validate import validate_bench
from ac_env.cost import make_pricing
from ac_env.paths import safe_child
from ac_env.records import append_jsonl, read_jsonl
from ac_env.sandbox import make_sandbox_factory
from ac_env.strategies import get_strategy
from ac_env.tasks import Task, load_tasks
from ac_env.timing.policy_file import TimingPolicy

logger = logging.getLogger(__name__)

RECORDS_FILE = "episodes.jsonl"
ATTEMPTS = 2  # the first try and one retry after an infrastructure failure


class EpisodeRecord(BaseModel):
    strategy: str
    instance_id: str
    split: str
    seed: int
    status: Literal["ok", "infra_error"]
    attempts: int
    error: str | None = None
    trajectory: str | None = None  # path relative to the results directory
    metrics: EpisodeMetrics | None = None
    budgets: list[BudgetOutcome] = []
    audits: list[SummaryAudit] = []
    continuations: list[Continuation] = []

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.strategy, self.instance_id, self.seed)


@dataclass(frozen=True)
class Job:
    strategy: str
    task: Task
    seed: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.strategy, self.task.instance_id, self.seed)


def select_tasks(config: BenchConfig) -> list[Task]:
    tasks = load_tasks(config.task_source, config.split, config.task_ids, config.subset)
    if not tasks:
        raise ValueError(f"no tasks in {config.task_source!r} split {config.split!r}")
    return tasks[: config.limit]


def read_records(out_dir: Path) -> list[EpisodeRecord]:
    return read_jsonl(out_dir / RECORDS_FILE, EpisodeRecord)


def run_benchmark(
    config: BenchConfig, out_dir: str | Path, *, progress: bool = True
) -> list[EpisodeRecord]:
    """Run every episode of ``config`` not yet in ``out_dir``; return all records (those of
    earlier runs included) in job order."""
    out = Path(out_dir)
    tasks = validate_bench(config)  # nothing is written before all of it checks out
    timing = run_timing_policy(config)
    claim_directory(config, out)
    jobs = [
        Job(strategy, task, seed)
        for strategy in config.strategies
        for task in tasks
        for seed in config.seeds
    ]
    records = {r.key: r for r in read_records(out)}
    todo = [job for job in jobs if job.key not in records]
    bar = tqdm(
        total=len(jobs),
        initial=len(jobs) - len(todo),
        desc="ac-bench",
        unit="ep",
        disable=not progress,
    )
    with bar, ThreadPoolExecutor(config.workers, thread_name_prefix="bench") as pool:
        futures = [pool.submit(run_episode, config, job, out, timing) for job in todo]
        for future in as_completed(futures):
            record = future.result()
            append_jsonl(out / RECORDS_FILE, record)
            records[record.key] = record
            bar.update(1)
            bar.set_postfix_str(f"{record.strategy} {record.instance_id}")
    return [records[job.key] for job in jobs]


def run_episode(
    config: BenchConfig, job: Job, out: Path, timing: TimingPolicy | None
) -> EpisodeRecord:
    """One episode, retried once after an infrastructure failure (the last recorded attempt,
    with its trajectory, stands). A policy that cannot be made (a bad worker) raises: that is
    the run's configuration, not the infrastructure. ``timing``: the run's timing policy
    (``run_timing_policy``)."""
    make_policy = episode_policies(config, get_strategy(job.strategy), timing)
    error, last = None, None
    for attempt in range(1, ATTEMPTS + 1):
        bind = make_policy(job.seed)
        try:
            record = _attempt(config, job, out, attempt, bind)
        except Exception as err:  # env or sandbox failure: infrastructure, not the policy
            logger.warning("%s: attempt %d failed: %s", job.key, attempt, err)
            error = f"{type(err).__name__}: {err}"
            continue
        if record.status == "ok":
            return record
        logger.warning("%s: attempt %d: %s", job.key, attempt, record.error)
        last = record
    if last is not None:
        return last.model_copy(update={"attempts": ATTEMPTS})
    return EpisodeRecord(
        strategy=job.strategy,
        instance_id=job.task.instance_id,
        split=job.task.split,
        seed=job.seed,
        status="infra_error",
        attempts=ATTEMPTS,
        error=error,
    )


def episode_env_kwargs(config: BenchConfig, job: Job) -> dict[str, Any]:
    """The env keywords of one episode: the job's task alone, at the run budget."""
    strategy = get_strategy(job.strategy)
    return {
        "task_source": config.task_source,
        "split": None,
        "task_ids": [job.task.instance_id],
        "sandbox": config.sandbox,
        "pricing": config.pricing,
        "budget_usd": config.run_budget,
        "context_window": config.context_window,
        "max_steps": config.max_steps,
        "command_cache": config.command_cache,
        **strategy.env_kwargs(config.fallback_threshold, config.fixed_threshold),
    }


def _attempt(
    config: BenchConfig, job: Job, out: Path, attempt: int, bind: BindPolicy
) -> EpisodeRecord:
    env_kwargs = episode_env_kwargs(config, job)
    budgets = BudgetCrossings(gym.make("AutoCompact-SWE-v0", **env_kwargs), config.budgets)
    env = SummaryWorkspace(budgets)
    try:
        policy = bind(env.unwrapped)  # type: ignore[arg-type]
        trajectory = rollout(env, policy, seed=job.seed, options={"task_id": job.task.instance_id})
        crossings, changed_at = list(budgets.crossings), dict(env.changed)
        env_config = env.unwrapped.config  # type: ignore[attr-defined]
    finally:
        env.close()
    relative = f"trajectories/{job.strategy}/{job.task.instance_id}__seed{job.seed}.jsonl"
    path = safe_child(out, relative)
    path.parent.mkdir(parents=True, exist_ok=True)
    trajectory.write(path)
    end = trajectory.end
    assert end is not None
    base = EpisodeRecord(
        strategy=job.strategy,
        instance_id=job.task.instance_id,
        split=job.task.split,
        seed=job.seed,
        status="ok",
        attempts=attempt,
        trajectory=relative,
    )
    if end.infra_error is not None:
        return base.model_copy(update={"status": "infra_error", "error": end.infra_error})
    outcomes = budget_outcomes(
        trajectory,
        crossings,
        config.budgets,
        job.task,
        make_sandbox_factory(config.sandbox),
        env_config.grading_timeout,
    )
    graded_error = next((o.infra_error for o in outcomes if o.infra_error), None)
    if graded_error is not None:
        return base.model_copy(update={"status": "infra_error", "error": graded_error})
    metrics = episode_metrics(
        trajectory, job.task, make_pricing(config.pricing), env_config.context_window
    )
    audits = audit_trajectory(trajectory, job.task, changed_at, metrics.root_cause_step)
    return base.model_copy(
        update={
            "metrics": metrics,
            "budgets": outcomes,
            "audits": audits,
            "continuations": continuations(trajectory),
        }
    )
