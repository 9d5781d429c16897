"""What one benchmark episode is: a job (strategy x task x seed), the tasks a run selects, and
the env keywords an episode runs under. Shared by the runner, the fork and the validator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ac_env.bench.config import BenchConfig
from ac_env.config import env_settings
from ac_env.strategies import get_strategy
from ac_env.tasks import IMPOSSIBLE, Task, load_tasks


@dataclass(frozen=True)
class Job:
    strategy: str
    task: Task
    seed: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.strategy, self.task.instance_id, self.seed)

    @property
    def label(self) -> str:
        """How logs name the episode."""
        return f"{self.strategy} {self.task.instance_id} seed {self.seed}"


def select_tasks(config: BenchConfig) -> list[Task]:
    tasks = load_tasks(
        config.task_source,
        config.split,
        config.task_ids,
        config.subset,
        hide_fail_to_pass_tests=config.hide_fail_to_pass_tests,
    )
    if not tasks:
        raise ValueError(f"no tasks in {config.task_source!r} split {config.split!r}")
    return tasks[: config.limit]


def run_jobs(config: BenchConfig, tasks: list[Task]) -> list[Job]:
    """Every episode of the run, in the order results are reported."""
    return [
        Job(strategy, task, seed)
        for strategy in config.strategies
        for task in tasks
        for seed in config.seeds
    ]


def episode_env_kwargs(config: BenchConfig, job: Job) -> dict[str, Any]:
    """The env keywords of one episode: the run's env settings (``BenchConfig``'s fields that
    are ``EnvConfig``'s), for the job's task alone, at the run budget, under its strategy."""
    strategy = get_strategy(job.strategy)
    return {
        **env_settings(config),
        "split": IMPOSSIBLE if job.task.split == IMPOSSIBLE else None,
        "subset": None,
        "task_ids": [job.task.instance_id],
        "budget_usd": config.run_budget,
        **strategy.env_kwargs(config.fallback_threshold, config.fixed_threshold),
    }
