"""Local sandbox speed: command round trip, workspace reset, a pytest run, diff and grading.

Targets: a `true` round trip through bubblewrap no slower than mini-swe-agent's bubblewrap
environment, reset (close + start of a ~50-file repo) under 100 ms, grading a small task under
2 s. Prints medians and minima (the minimum is what the machine can do; the median what it did
under its current load) and ratios against a plain subprocess, a bare bubblewrap call and,
given ``--mini-swe-agent PYTHON`` (an interpreter with ``mini-swe-agent`` installed), its
``BubblewrapEnvironment`` timed in that interpreter in the same run. ``--parent-mb`` grows this
process first, as a trainer holding a model would be (a round trip's cost may grow with the
parent: see ``ac_env.sandbox.process``). Reset is measured with the snapshot's objects loose and
packed (``git gc``), with workspaces on the system temp dir and on /dev/shm.

    .venv/bin/python benchmarks/sandbox_roundtrip.py [--runs 50] [--parent-mb 2000] \
        [--mini-swe-agent /path/to/venv/bin/python]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ac_env.grading import grade
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks.model import Task

ROOT_DIRS = [None, *(["/dev/shm"] if os.path.isdir("/dev/shm") else [])]
MODULES = 40
TEST_MODULES = 8
BARE_BWRAP = [
    "bwrap",
    "--unshare-all",
    "--die-with-parent",
    "--ro-bind",
    "/usr",
    "/usr",
    "--symlink",
    "usr/bin",
    "/bin",
    "--symlink",
    "usr/lib",
    "/lib",
    "--symlink",
    "usr/lib64",
    "/lib64",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "/bin/bash",
    "-c",
    "true",
]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def build_task(root: Path) -> Task:
    """A one-commit repo of about 50 files with a bug in ``pkg/m0.py``."""
    repo = root / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    for i in range(MODULES):
        body = "\n\n".join(f"def f{j}(x):\n    return x + {j}\n" for j in range(30))
        (repo / "pkg" / f"m{i}.py").write_text(f'"""Module {i}."""\n\n{body}')
    for i in range(TEST_MODULES):
        (repo / "tests" / f"test_m{i}.py").write_text(
            f"from pkg.m{i} import f1, f2\n\n\n"
            "def test_f1():\n    assert f1(1) == 2\n\n\n"
            "def test_f2():\n    assert f2(1) == 3\n"
        )
    (repo / "README.md").write_text("benchmark repo\n")
    git(repo, "init", "-q")
    (repo / "pkg" / "m0.py").write_text(
        (repo / "pkg" / "m0.py").read_text().replace("return x + 1\n", "return x - 1\n", 1)
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "pkg" / "m0.py").write_text(
        (repo / "pkg" / "m0.py").read_text().replace("return x - 1\n", "return x + 1\n", 1)
    )
    gold = git(repo, "diff")
    git(repo, "checkout", "-q", "--", ".")
    return Task(
        instance_id="bench-1",
        repo="bench/repo",
        problem_statement="f1(1) is 0",
        patch=gold,
        FAIL_TO_PASS=["tests/test_m0.py::test_f1"],
        PASS_TO_PASS=[f"tests/test_m{i}.py::test_f2" for i in range(TEST_MODULES)],
        snapshot_dir=repo,
        test_files=[f"tests/test_m{i}.py" for i in range(TEST_MODULES)],
    )


MINI_SWE_AGENT_TIMING = """
import statistics, sys, time
from minisweagent.environments.extra.bubblewrap import BubblewrapEnvironment
env = BubblewrapEnvironment()
for _ in range(3):
    env.execute({"command": "true"})
times = []
for _ in range(int(sys.argv[1])):
    started = time.perf_counter()
    env.execute({"command": "true"})
    times.append(time.perf_counter() - started)
env.cleanup()
print(" ".join(str(t) for t in times))
"""


def mini_swe_agent_times(python: str, runs: int) -> list[float]:
    """``BubblewrapEnvironment().execute({"command": "true"})`` round trips, in ``python``."""
    done = subprocess.run(
        [python, "-c", MINI_SWE_AGENT_TIMING, str(runs)], capture_output=True, text=True, check=True
    )
    return [float(t) for t in done.stdout.strip().splitlines()[-1].split()]  # after its banner


def timed(function: Callable[[], object], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return times


def report(name: str, times: list[float], target_ms: float | None = None) -> float:
    median = statistics.median(times) * 1000
    verdict = "" if target_ms is None else f"  target < {target_ms:g} ms"
    print(f"{name:42s} median {median:8.2f} ms   min {min(times) * 1000:8.2f} ms{verdict}")
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="repetitions per figure")
    parser.add_argument("--parent-mb", type=int, default=0, help="grow this process first (MB)")
    parser.add_argument(
        "--mini-swe-agent", metavar="PYTHON", help="an interpreter with mini-swe-agent installed"
    )
    args = parser.parse_args()
    runs = args.runs
    ballast = bytearray(args.parent_mb * 1024 * 1024)
    for page in range(0, len(ballast), 4096):  # touched, so the pages are really held
        ballast[page] = 1
    if args.parent_mb:
        print(f"this process holds {args.parent_mb} MB more, as a trainer with a model would")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {runs} runs each\n")
    with tempfile.TemporaryDirectory() as scratch:
        task = build_task(Path(scratch))
        files = sum(1 for _ in Path(scratch, "repo").rglob("*") if ".git" not in _.parts)
        print(f"task repo: {files} files and directories besides .git\n")

        plain = report(
            "plain subprocess bash -c true",
            timed(lambda: subprocess.run(["bash", "-c", "true"], check=True), runs),
        )
        bare = (
            report("bare bwrap bash -c true", timed(lambda: subprocess.run(BARE_BWRAP), runs))
            if shutil.which("bwrap")
            else None
        )
        with LocalSandbox(isolation="none") as unisolated:
            unisolated.start(task)
            none_rt = report(
                'LocalSandbox("none").exec("true")',
                timed(lambda: unisolated.exec("true", 10, 1000), runs),
            )
        print(f"{'':42s} {none_rt / plain:.1f}x plain")
        if bare is None:
            print("bubblewrap missing: no isolated figures")
            return
        with LocalSandbox() as box:
            box.start(task)
            rt = report(
                'LocalSandbox("bwrap").exec("true")',
                timed(lambda: box.exec("true", 10, 1000), runs),
                10,
            )
            print(f"{'':42s} {rt / plain:.1f}x plain, {rt / bare:.2f}x bare bwrap")
            if args.mini_swe_agent:
                peer = report(
                    "mini-swe-agent BubblewrapEnvironment",
                    mini_swe_agent_times(args.mini_swe_agent, runs),
                )
                print(f"{'':42s} ours {rt / peer:.2f}x mini-swe-agent's")
            report(
                "pytest run inside (16 tests)",
                timed(lambda: box.exec("python3 -m pytest -q -p no:cacheprovider", 60, 100_000), 5),
            )
            box.exec("sed -i 's/x - 1/x + 1/' pkg/m0.py && echo n > notes.txt", 10, 1000)
            report("diff()", timed(box.diff, 10))
        for packed in (False, True):
            if packed:
                git(Path(scratch, "repo"), "gc", "-q", "--prune=now")
            for root_dir in ROOT_DIRS:
                label = f"{'packed' if packed else 'loose'} objects, root {root_dir or 'tmp'}"
                with LocalSandbox(root_dir=root_dir) as box:
                    box.start(task)
                    times = timed(lambda box=box: box.reset(task), max(10, runs // 2))
                    report(f"reset ({label})", times, 100)
        for root_dir in ROOT_DIRS:
            gradings = timed(
                lambda r=root_dir: grade(task, task.patch, LocalSandbox(root_dir=r)), 5
            )
            report(f"grade(gold patch), 9 tests, root {root_dir or 'tmp'}", gradings, 2000)
        result = grade(task, task.patch, LocalSandbox(), 60.0)
        print(f"\ngold patch: reward {result.reward}, {result.reason}")


if __name__ == "__main__":
    main()
