"""Steps per second of AutoCompact-Timing-v0 on long real-code tasks, with and without the
command replay cache (``command_cache``, ``ac_env.sandbox.command_cache``).

Per task it runs three episodes: ``never`` without the cache, then ``never`` and ``every 10``
with a fresh cache (the first fills it, the second replays what the other compaction timing
shares with it). It prints steps/s and the cache's hit rate per episode, and checks that the
cached ``never`` episode ends exactly like the uncached one (same reward, steps and cost).

    nice -n 10 .venv/bin/python benchmarks/timing_cache.py [--tasks TASK_ID ...]

The default task is the long split's first train task.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

from ac_env.sandbox.command_cache import CachingSandbox
from ac_env.tasks import load_tasks
from ac_env.timing import COMPACT, CONTINUE, TimingEnv
from ac_env.timing.features import steps_since_compaction


def episode(env: TimingEnv, task_id: str, every: int | None) -> dict[str, Any]:
    env.reset(seed=0, options={"task_id": task_id})
    started, steps, done, hits, misses = time.perf_counter(), 0, False, 0, 0
    info: dict[str, Any] = {}
    reward = 0.0
    while not done:
        due = every is not None and steps_since_compaction(env.inner) >= every
        action = COMPACT if due and env.action_masks()[COMPACT] else CONTINUE
        sandbox = env.inner.sandbox
        _, reward, terminated, truncated, info = env.step(action)
        if isinstance(sandbox, CachingSandbox):
            hits, misses = sandbox.hits, sandbox.misses
        steps += 1
        done = terminated or truncated
    wall = time.perf_counter() - started
    return {
        "steps": steps,
        "wall_s": wall,
        "steps_per_s": steps / wall,
        "hit_rate": hits / max(1, hits + misses),
        "reward": reward,
        "cost": info["cost_usd"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", help="task ids of the long split")
    args = parser.parse_args()
    tasks = args.tasks or [load_tasks("real", "long", subset="train")[0].instance_id]
    kwargs = {
        "task_source": "real",
        "split": "long",
        "context_window": 32_768,
        "max_steps": 100,
        "forced_compaction_threshold": None,  # as examples/ppo_timing_long.py
    }
    with tempfile.TemporaryDirectory() as store:
        plain = TimingEnv(env_kwargs=kwargs)
        cached = TimingEnv(env_kwargs={**kwargs, "command_cache": store})
        print(f"{'task':<38}{'run':<22}{'steps':>6}{'steps/s':>9}{'hits':>7}{'reward':>9}")
        for task_id in tasks:
            runs = [
                ("never, no cache", episode(plain, task_id, None)),
                ("never, cold cache", episode(cached, task_id, None)),
                ("every 10, warm cache", episode(cached, task_id, 10)),
                ("never, warm cache", episode(cached, task_id, None)),
            ]
            for name, run in runs:
                print(
                    f"{task_id:<38}{name:<22}{run['steps']:>6}{run['steps_per_s']:>9.2f}"
                    f"{run['hit_rate']:>7.0%}{run['reward']:>9.4f}"
                )
            same = [(r["reward"], r["steps"], r["cost"]) for _, r in (runs[0], runs[3])]
            print(f"  cached never ends like uncached never: {same[0] == same[1]}")
        plain.close()
        cached.close()


if __name__ == "__main__":
    main()
