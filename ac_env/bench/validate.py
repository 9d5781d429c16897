"""A benchmark run's whole configuration, checked before its first episode and before anything
is written: the tasks (file, split, ids; each one's test_command one the grader runs), the env
keywords of every strategy, the pricing preset, the sandbox, the worker and the timing policy
file ``learned`` uses (the checks themselves: ``ac_env.runs.checks``). A failure is one
``ConfigurationError`` line naming what to fix; the output directory is not even created.
"""

from __future__ import annotations

from ac_env.bench.config import BenchConfig
from ac_env.bench.episode_policy import run_timing_policy
from ac_env.bench.episodes import Job, episode_env_kwargs, select_tasks
from ac_env.runs.checks import (
    check_env_kwargs,
    check_sandbox,
    check_test_commands,
    check_worker_usable,
    checked,
)
from ac_env.tasks import Task


def validate_bench(config: BenchConfig) -> list[Task]:
    """The tasks of an ``ac-bench`` run (or its fork), once everything it needs checks out."""
    tasks = checked("tasks", lambda: select_tasks(config))
    checked("tasks", lambda: check_test_commands(tasks))
    for strategy in config.strategies:
        check_env_kwargs(episode_env_kwargs(config, Job(strategy, tasks[0], config.seeds[0])))
    check_sandbox(config.sandbox, tasks)
    check_worker_usable("worker", config.worker)
    checked("timing_policy", lambda: run_timing_policy(config))
    return tasks
