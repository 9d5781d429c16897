"""Which single-bug tasks of a build the reference agent fixes on its own.

    python -m ac_env.bench.solo BUILD_DIR --libraries boltons-26.2.0 toolz-1.2.0 \\
        [--max-steps 100] [--workers 1]

Runs the reference agent once per task of ``<BUILD_DIR>/<slug>/tasks.jsonl`` with full
history, a 128K window, no budget and no forced compaction (the long split's ``full128``
setting), and appends one ``SoloRun`` per task to ``<slug>/solo.jsonl`` as soon as it is
known, so an interrupted run resumes where it stopped. ``ac-env tasks long --solved-alone``
then draws its groups from the bugs solved here only: a long task is long because there is
more work the agent *can* do, not because it holds a bug the agent never fixes.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import gymnasium as gym
from tqdm import tqdm

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.reference import ReferenceAgent
from ac_env.agents.rollout import RolloutJob, rollout_many
from ac_env.mining.long import SOLO_FILE, SoloRun
from ac_env.records import append_jsonl, read_jsonl
from ac_env.tasks.swebench_file import read_task_file
from ac_env.trajectory import Trajectory

SOLO_WINDOW = 131_072
"""The context window of a solo run: the long split's ``full128`` setting."""


def solo_record(trajectory: Trajectory) -> SoloRun:
    end = trajectory.end
    return SoloRun(
        instance_id=trajectory.header.instance_id,
        solved=end is not None and end.reward == 1.0 and not end.infra_error,
        steps=len(trajectory.model_calls()),
        peak_context=max((call.context_tokens for call in trajectory.model_calls()), default=0),
        exit_reason=end.exit_reason if end is not None else "no end",
    )


def run_library(directory: Path, max_steps: int, workers: int) -> list[SoloRun]:
    """Every task of ``directory/tasks.jsonl`` run alone, resuming ``directory/solo.jsonl``."""
    task_file = directory / "tasks.jsonl"
    ids = [task.instance_id for task in read_task_file(task_file) if task.split != "long"]
    solo_path = directory / SOLO_FILE
    done = {run.instance_id: run for run in read_jsonl(solo_path, SoloRun)}
    pending = [instance_id for instance_id in ids if instance_id not in done]

    def make_env() -> gym.Env[Any, Any]:
        return gym.make(
            "AutoCompact-SWE-v0",
            task_source=str(task_file),
            split=None,
            task_ids=ids,
            context_window=SOLO_WINDOW,
            forced_compaction_threshold=None,
            max_steps=max_steps,
        )

    with tqdm(total=len(ids), initial=len(ids) - len(pending), desc=directory.name) as bar:
        for start in range(0, len(pending), workers):
            jobs = [
                RolloutJob(options={"task_id": instance_id})
                for instance_id in pending[start : start + workers]
            ]
            for trajectory in rollout_many(
                make_env, lambda: ReferenceAgent("never"), jobs, workers=workers, progress=False
            ):
                record = solo_record(trajectory)
                append_jsonl(solo_path, record)
                done[record.instance_id] = record
                bar.update(1)
    return [done[instance_id] for instance_id in ids]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build_dir", type=Path, help="a build directory of `ac-env tasks build`")
    parser.add_argument("--libraries", nargs="+", required=True, help="library folders")
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    for slug in args.libraries:
        runs = run_library(args.build_dir / slug, args.max_steps, args.workers)
        solved = sum(run.solved for run in runs)
        print(f"{slug}: {solved}/{len(runs)} solved alone", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
