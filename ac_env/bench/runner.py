"""Running a benchmark: episodes in parallel, results written as they finish, resumable.

``out_dir`` holds ``config.json`` (the run's identity), ``episodes.jsonl`` (one
``EpisodeRecord`` per finished episode, appended as each finishes: metrics, the outcome at
every budget, summary audits, continuation figures) and ``trajectories/``. A
rerun skips every episode already in ``episodes.jsonl`` (a torn last line from an interrupted
write is dropped). An episode that fails for infrastructure reasons (an exception from the
env or sandbox, a model server that did not answer, or grading that could not run) is retried
once (``ac_env.runs.retry``); if it fails again it is recorded as ``infra_error`` and left out
of every success rate, never counted as a failure. The whole configuration is checked first
(``validate``): a run that cannot work writes nothing.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Literal

import gymnasium as gym
from pydantic import BaseModel
from tqdm import tqdm

import ac_env  # noqa: F401  (registers the env id)
from ac_env.agents.rollout import rollout
from ac_env.analysis.audit import SummaryAudit, SummaryWorkspace, audit_trajectory
from ac_env.analysis.continuation import Continuation, continuations
from ac_env.analysis.metrics import EpisodeMetrics, episode_metrics
from ac_env.bench.budgets import BudgetCrossings, BudgetOutcome, budget_outcomes
from ac_env.bench.config import BenchConfig
from ac_env.bench.episode_policy import BindPolicy, episode_policies, run_timing_policy
from ac_env.bench.episodes import Job, episode_env_kwargs, run_jobs
from ac_env.bench.validate import validate_bench
from ac_env.cost import make_pricing
from ac_env.paths import safe_child
from ac_env.records import append_jsonl, read_jsonl
from ac_env.runs.retry import recorded_infra_error, run_episode_with_retries
from ac_env.runs.run_dir import claim_directory
from ac_env.sandbox import make_sandbox_factory
from ac_env.strategies import get_strategy
from ac_env.timing.policy_file import TimingPolicy

RECORDS_FILE = "episodes.jsonl"


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
    jobs = run_jobs(config, tasks)
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
    """One episode, under the one infrastructure-retry policy (``ac_env.runs.retry``: the last
    recorded attempt, with its trajectory, stands). A policy that cannot be made (a bad
    worker) raises: that is the run's configuration, not the infrastructure. ``timing``: the
    run's timing policy (``run_timing_policy``)."""
    make_policy = episode_policies(config, get_strategy(job.strategy), timing)
    retried = run_episode_with_retries(
        lambda bind, attempt: _attempt(config, job, out, attempt, bind),
        make_policy=lambda: make_policy(job.seed),
        infra_error=recorded_infra_error,
        crashed=lambda error: EpisodeRecord(
            strategy=job.strategy,
            instance_id=job.task.instance_id,
            split=job.task.split,
            seed=job.seed,
            status="infra_error",
            attempts=0,
            error=error,
        ),
        label=job.label,
    )
    return retried.result.model_copy(update={"attempts": retried.attempts})


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
