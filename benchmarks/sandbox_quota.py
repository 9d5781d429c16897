"""The disk quota on both backends: what a write past it prints, and what it costs.

For each backend (bubblewrap, and Docker when a daemon answers) it starts and closes sandboxes
on a small task with the quota (``disk_quota_mb``) and without it (None), interleaved, and
prints the median and minimum start+close time of each, and of a ``true`` command's round
trip (the quota adds a free-space check after each command); then, with a quota of 16 MB, it
runs ``dd`` past the quota in the workspace and in /tmp and prints the observation.

    .venv/bin/python benchmarks/sandbox_quota.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from sandbox_task import make_task

from ac_env.sandbox.base import Sandbox, SandboxError
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks.model import Task

DD_QUOTA_MB = 16


def backends() -> dict[str, Callable[[int | None], Sandbox]]:
    found: dict[str, Callable[[int | None], Sandbox]] = {
        "bwrap": lambda quota: LocalSandbox(isolation="bwrap", disk_quota_mb=quota)
    }
    try:
        from ac_env.sandbox.docker import DockerSandbox
        from ac_env.sandbox.docker.session import docker_client

        docker_client()
        found["docker"] = lambda quota: DockerSandbox(disk_quota_mb=quota)
    except SandboxError as error:
        print(f"docker: skipped ({error})")
    return found


def start_close_s(make: Callable[[int | None], Sandbox], quota: int | None, task: Task) -> float:
    started = time.perf_counter()
    box = make(quota)
    box.start(task)
    box.close()
    return time.perf_counter() - started


def round_trip_s(make: Callable[[int | None], Sandbox], quota: int | None, task: Task) -> float:
    box = make(quota)
    box.start(task)
    try:
        box.exec("true", 10, 100)
        started = time.perf_counter()
        box.exec("true", 10, 100)
        return time.perf_counter() - started
    finally:
        box.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    task = make_task(Path(tempfile.mkdtemp(prefix="quota-bench-")), hidden_test=True)
    print("| backend | quota | start+close median (ms) | min | `true` median (ms) | min |")
    print("|---|---|---|---|---|---|")
    for name, make in backends().items():
        quotas = {"1024 MB": 1024, "none": None}
        starts: dict[str, list[float]] = {label: [] for label in quotas}
        trips: dict[str, list[float]] = {label: [] for label in quotas}
        for _ in range(args.runs):
            for label, quota in quotas.items():
                starts[label].append(start_close_s(make, quota, task))
                trips[label].append(round_trip_s(make, quota, task))
        for label in quotas:
            cells = [
                f"{1000 * f(values):.1f}"
                for values in (starts[label], trips[label])
                for f in (statistics.median, min)
            ]
            print(f"| {name} | {label} | " + " | ".join(cells) + " |")
    for name, make in backends().items():
        box = make(DD_QUOTA_MB)
        box.start(task)
        try:
            for target in ("big.bin", "/tmp/big.bin"):
                command = f"dd if=/dev/zero of={target} bs=1M count={4 * DD_QUOTA_MB}"
                result = box.exec(command, 60, 10_000)
                print(f"\n{name}, quota {DD_QUOTA_MB} MB, `{command}` (exit {result.exit_code}):")
                print(result.output.rstrip())
                box.exec(f"rm -f {target}", 10, 1000)
        finally:
            box.close()


if __name__ == "__main__":
    main()
