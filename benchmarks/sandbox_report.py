"""Sandbox report: the adversarial cases x backends table, then speed figures per backend.

The table comes from running tests/test_sandbox_adversarial.py under pytest with a JUnit XML
report (the same checks CI runs); a backend without its engine shows as skipped. Speed:
round trip of ``true`` and of a pytest run, sandbox start (container creation for Docker),
warm reset against a new container, and 8 concurrent episodes (wall time against one).

    .venv/bin/python benchmarks/sandbox_report.py [--runs 20] [--no-table]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from ac_env.sandbox.base import Sandbox, SandboxError
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks.model import Task

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from sandbox_task import make_task  # noqa: E402

EPISODE = ("ls", "cat calc/ops.py", "sed -i 's/a - b/a + b/' calc/ops.py", "git diff --stat")
PYTEST = "python3 -m pytest -q -p no:cacheprovider tests"


def adversarial_table() -> str:
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.xml"
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             str(ROOT / "tests" / "test_sandbox_adversarial.py"), f"--junitxml={report}"],
            cwd=ROOT, capture_output=True, check=False,
        )  # fmt: skip
        cases: dict[str, dict[str, str]] = defaultdict(dict)
        for case in ElementTree.parse(report).iter("testcase"):
            match = re.fullmatch(r"test_(.+)\[(\w+)\]", case.get("name", ""))
            if match is None:
                continue
            outcome = "pass"
            for child, word in (("failure", "FAIL"), ("error", "ERROR"), ("skipped", "skip")):
                if case.find(child) is not None:
                    outcome = word
            cases[match.group(1)][match.group(2)] = outcome
    backends = sorted({b for outcomes in cases.values() for b in outcomes})
    width = max(len(name) for name in cases)
    lines = [f"{'case':<{width}}  " + "  ".join(f"{b:>7}" for b in backends)]
    for name, outcomes in cases.items():
        cells = "  ".join(f"{outcomes.get(b, '-'):>7}" for b in backends)
        lines.append(f"{name:<{width}}  {cells}")
    return "\n".join(lines)


def timed(action: Callable[[], object], runs: int) -> tuple[float, float]:
    durations = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        durations.append(time.perf_counter() - started)
    return statistics.median(durations), min(durations)


def episode(make: Callable[[], Sandbox], task: Task) -> None:
    box = make()
    try:
        box.start(task)
        for command in EPISODE:
            box.exec(command, 30, 10_000)
        box.exec(PYTEST, 60, 10_000)
        box.diff()
    finally:
        box.close()


def speed(name: str, make: Callable[..., Sandbox], task: Task, runs: int) -> list[str]:
    rows = []
    box = make()
    box.start(task)
    try:
        rows.append(("`true` round trip", timed(lambda: box.exec("true", 10, 1000), runs)))
        rows.append(("pytest run", timed(lambda: box.exec(PYTEST, 60, 10_000), max(3, runs // 4))))
        rows.append(("diff", timed(box.diff, max(3, runs // 4))))
    finally:
        box.close()

    def cold_start() -> None:
        fresh = make()
        fresh.start(task)
        fresh.close()

    rows.append(("start + close (new sandbox)", timed(cold_start, max(3, runs // 4))))
    if name == "docker":
        warm = make(warm=True)
        warm.start(task)
        warm.close()

        def warm_reset() -> None:
            warm.start(task)
            warm.close()

        rows.append(("start + close (warm reset)", timed(warm_reset, max(3, runs // 4))))
    one = timed(lambda: episode(make, task), 2)[1]
    with ThreadPoolExecutor(8) as pool:
        started = time.perf_counter()
        list(pool.map(lambda _: episode(make, task), range(8)))
        eight = time.perf_counter() - started
    rows.append(("1 episode (5 commands, pytest, diff)", (one, one)))
    rows.append(("8 concurrent episodes, wall", (eight, eight)))
    lines = [f"{name}: {'figure':<38} {'median':>9} {'min':>9}"]
    lines += [f"{'':<{len(name)}}  {label:<38} {m * 1000:>7.1f}ms {n * 1000:>7.1f}ms"
              for label, (m, n) in rows]  # fmt: skip
    lines.append(f"{'':<{len(name)}}  8 concurrent / 1 = {eight / one:.2f}x the wall time of one")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-table", action="store_true", help="speed figures only")
    args = parser.parse_args()
    if not args.no_table:
        print("Adversarial cases x backends (pytest tests/test_sandbox_adversarial.py):")
        print(adversarial_table(), "\n", flush=True)
    backends: dict[str, Callable[..., Sandbox]] = {"bwrap": LocalSandbox}
    try:
        from ac_env.sandbox.docker import DockerSandbox
        from ac_env.sandbox.docker.session import docker_client

        docker_client()
        backends["docker"] = DockerSandbox
    except SandboxError as error:
        print(f"docker: skipped ({error})")
    with tempfile.TemporaryDirectory() as scratch:
        task = make_task(Path(scratch))
        for name, make in tqdm(backends.items(), desc="speed", unit="backend"):
            print("\n".join(speed(name, make, task, args.runs)), flush=True)


if __name__ == "__main__":
    main()
