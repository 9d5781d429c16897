"""A mined task as a SWE-bench-format Docker instance: what building its image costs, and
how starting and grading it compare with the same task run from its snapshot directory (the
base image with the snapshot copied in at start).

    .venv/bin/python benchmarks/swebench_docker.py TASKS.jsonl [--id ID] [--runs 3]

TASKS.jsonl: a task file with snapshot_dir tasks (``ac-env tasks build`` writes one). Needs a
Docker daemon (``scripts/docker_daemon.sh start``). Prints one table of medians and minima
(the minimum is what the machine can do; the median what it did under its current load); the
image is removed at the end.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from ac_env.grading import grade
from ac_env.sandbox.docker import BASE_IMAGE, DockerSandbox
from ac_env.sandbox.docker.session import docker_client
from ac_env.tasks import load_tasks
from ac_env.tasks.model import Task

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "swebench_image.py"
REPOSITORY = "autocompact/bench-swe-task"


def load_script() -> ModuleType:
    """scripts/swebench_image.py as a module (scripts are not a package)."""
    spec = importlib.util.spec_from_file_location("swebench_image", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(function: Callable[[], object], runs: int) -> list[float]:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - started)
    return seconds


def start_and_test(task: Task) -> None:
    with DockerSandbox() as box:
        box.start(task)
        result = box.exec("python3 -m pytest -q -p no:cacheprovider -x -o addopts=", 300, 10_000)
        assert "passed" in result.output or "failed" in result.output, result.output


def start_only(task: Task) -> None:
    with DockerSandbox() as box:
        box.start(task)


def grade_gold(task: Task) -> None:
    result = grade(task, task.patch, DockerSandbox())
    assert result.resolved, result.reason


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", type=Path)
    parser.add_argument("--id", default=None, help="the task (default: the file's first)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    task = load_tasks(str(args.tasks), task_ids=[args.id] if args.id else None)[0]
    client = docker_client()
    script = load_script()
    build_s = timed(lambda: script.build_image(client, task, BASE_IMAGE, REPOSITORY), 1)[0]
    image = f"{REPOSITORY}:{task.instance_id}"
    added_mb = (
        client.images.get(image).attrs["Size"] - client.images.get(BASE_IMAGE).attrs["Size"]
    ) / 1e6
    instance = task.model_copy(update={"image_name": image, "snapshot_dir": None})
    try:
        rows = []
        for name, function in (
            ("start", start_only),
            ("start + full test suite", start_and_test),
            ("grade gold patch", grade_gold),
        ):
            for where, which in (("image", instance), ("snapshot", task)):
                seconds = timed(functools.partial(function, which), args.runs)
                rows.append((name, where, statistics.median(seconds), min(seconds)))
    finally:
        client.images.remove(image, force=True)
    print(
        f"task {task.instance_id}: image built in {build_s:.2f} s, {added_mb:.1f} MB over the base"
    )
    print(f"\n| step ({args.runs} runs) | repo from | median s | min s |\n|---|---|---|---|")
    for name, where, median, least in rows:
        print(f"| {name} | {where} | {median:.2f} | {least:.2f} |")


if __name__ == "__main__":
    main()
