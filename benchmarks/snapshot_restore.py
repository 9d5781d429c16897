"""Snapshot and restore of a built-in task's workspace: archive size, and the median time of
``snapshot``, of ``archive_check`` alone (the share of ``restore`` that checks the archive)
and of ``restore``, per sandbox backend (docker only when a daemon answers).

    .venv/bin/python benchmarks/snapshot_restore.py [--runs 20]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

from ac_env.sandbox.archive_check import check_archive
from ac_env.sandbox.base import SandboxError
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks import load_tasks


def median_ms(function: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    task = load_tasks(split="easy")[0]
    backends: list[tuple[str, Callable[[], Any]]] = [("local", LocalSandbox)]
    try:
        from ac_env.sandbox.docker import DockerSandbox
        from ac_env.sandbox.docker.session import docker_client

        docker_client()
        backends.append(("docker", DockerSandbox))
    except SandboxError as error:
        print(f"docker skipped: {error}")
    print(f"task {task.instance_id}, {args.runs} runs, medians")
    print("| backend | archive KiB | snapshot ms | archive_check ms | restore ms |")
    print("|---|---|---|---|---|")
    for name, make in backends:
        with make() as box:
            box.start(task)
            box.exec("echo edit >> README.md; mkdir -p /tmp/w && echo x > /tmp/w/f", 10, 1000)
            archive = box.snapshot()
            snapshot = median_ms(box.snapshot, args.runs)
            check = median_ms(functools.partial(check_archive, archive), args.runs)
            restore = median_ms(functools.partial(box.restore, archive), args.runs)
        print(
            f"| {name} | {len(archive) / 1024:.0f} | {snapshot:.1f} | {check:.2f} | {restore:.1f} |"
        )


if __name__ == "__main__":
    main()
