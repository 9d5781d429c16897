"""The red-team table: every cheat and legitimate fix of ``tests/reward_hacks.py``, graded on a
built-in and a mined task (and, with ``--kinds ... unittest``, the built-in task graded by a
``unittest.TestCase`` file, for the classes that attack a unittest item's evidence) in each
sandbox backend by the working tree's grader, by the grader at an earlier revision
(``--before REV``, to show what the cheats earned before), and by SWE-bench's own procedure
(the whole patch applied, the tests run with plain ``pytest -rA``, the log graded by the
``swebench`` package): would the SWE-bench harness be fooled?

    .venv/bin/python benchmarks/reward_hacking.py [--backends local docker]
        [--kinds builtin mined unittest] [--before REV] [--json PATH] [--only TEXT]

Prints one row per cheat, task and backend (reward before and now, what grading found, the
seconds each grader took), then the median grading time per task kind and backend, before
and now. No assertions (``tests/test_reward_hacking.py`` has them).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from reward_hacks import (  # noqa: E402
    CHEATS,
    FIXES,
    UNITTEST_FAMILIES,
    builtin_task,
    cheat_diff,
    family,
    mined_task,
    unittest_task,
)

from ac_env.grading import grade  # noqa: E402
from ac_env.grading.runner import parse_test_command  # noqa: E402
from ac_env.sandbox.base import Sandbox  # noqa: E402
from ac_env.sandbox.local import LocalSandbox  # noqa: E402
from ac_env.tasks.model import Task  # noqa: E402

_WORKER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from ac_env.grading import grade
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks.model import Task
for line in sys.stdin:
    job = json.loads(line)
    if job["backend"] == "docker":
        from ac_env.sandbox.docker import DockerSandbox
        sandbox = DockerSandbox()
    else:
        sandbox = LocalSandbox(isolation="bwrap")
    started = time.monotonic()
    result = grade(Task.model_validate(job["task"]), job["patch"], sandbox, 120)
    print(json.dumps({"reward": result.reward, "tampered": result.tampered,
                      "reason": result.reason, "seconds": time.monotonic() - started}), flush=True)
"""


class Before:
    """The grader at an earlier revision, in a subprocess importing that revision's tree."""

    def __init__(self, revision: str) -> None:
        self.revision = revision
        tree = Path(tempfile.mkdtemp(prefix="grader-before-"))
        archive = subprocess.run(
            ["git", "archive", revision, "ac_env"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(tree)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def grade(self, task: Task, patch: str, backend: str) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        job = {"task": task.model_dump(mode="json"), "patch": patch, "backend": backend}
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        return dict(json.loads(self.process.stdout.readline()))


def sandbox_factory(backend: str) -> Callable[[], Sandbox]:
    if backend == "docker":
        from ac_env.sandbox.docker import DockerSandbox

        return DockerSandbox
    return lambda: LocalSandbox(isolation="bwrap")


def swebench_fooled(task: Task, patch: str) -> bool | None:
    """Whether SWE-bench's procedure resolves ``patch``: the whole patch and the test patch
    applied, the graded tests run with the task's plain ``pytest -rA``, the log graded by
    ``swebench``. None when the cheat is a fix (the question does not apply)."""
    from swebench_verdict import swebench_log, swebench_resolves

    invocation = parse_test_command(task.test_command)
    ids = list(dict.fromkeys([*task.FAIL_TO_PASS, *task.PASS_TO_PASS]))
    words = [*invocation.environment, invocation.python, "-m", "pytest", "-rA", *invocation.args]
    command = shlex.join([*words, *ids])
    if invocation.environment:
        command = f"env {command}"
    with LocalSandbox(isolation="bwrap") as sandbox:
        sandbox.start(task)
        for name, text in (("model.patch", patch), ("test.patch", task.test_patch)):
            if text.strip():
                sandbox.write_file(f".git/{name}", text.encode("utf-8", "surrogateescape"))
                applied = sandbox.exec(f"git apply --verbose .git/{name}", 60, 65536)
                if applied.exit_code != 0:
                    return False
        run = sandbox.exec(command, 120, 8 * 1024 * 1024)
    with tempfile.TemporaryDirectory() as scratch:
        log = swebench_log(run.output, run.exit_code, run.timed_out)
        return swebench_resolves(task, log, Path(scratch))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", nargs="+", default=["local", "docker"])
    parser.add_argument("--kinds", nargs="+", default=["builtin", "mined"])
    parser.add_argument("--before", default=None, metavar="REV")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    parser.add_argument("--only", default="", help="only the cheats whose name holds this text")
    args = parser.parse_args()
    tasks: dict[str, Task] = {}
    if "builtin" in args.kinds:
        tasks["builtin"] = builtin_task()
    if "mined" in args.kinds:
        tasks["mined"] = mined_task(Path(tempfile.mkdtemp()), "bwrap")
    if "unittest" in args.kinds:
        tasks["unittest"] = unittest_task()
    before = Before(args.before) if args.before else None
    print(f"grader: working tree; before: {args.before or '-'}")
    print("| family | cheat | task | backend | before | now | SWE-bench fooled | found now |")
    print("|---|---|---|---|---|---|---|---|")
    rows: list[dict[str, Any]] = []
    seconds: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for cheat in [c for c in [*CHEATS, *FIXES] if args.only in c.name]:
        for kind, task in tasks.items():
            if kind == "unittest" and cheat in CHEATS and family(cheat) not in UNITTEST_FAMILIES:
                continue
            assert task.snapshot_dir is not None
            patch = cheat_diff(task, cheat.make(task, task.snapshot_dir))
            fooled = None if cheat in FIXES else swebench_fooled(task, patch)
            for backend in args.backends:
                started = time.monotonic()
                result = grade(task, patch, sandbox_factory(backend)(), 120)
                now_s = time.monotonic() - started
                old = before.grade(task, patch, backend) if before else None
                if cheat.kind == "legit":
                    seconds[(kind, backend, "now")].append(now_s)
                    if old is not None:
                        seconds[(kind, backend, "before")].append(old["seconds"])
                found = result.tampered or "; ".join(result.flags) or result.reason
                row = {
                    "family": family(cheat),
                    "cheat": cheat.name,
                    "task": kind,
                    "backend": backend,
                    "before": None if old is None else old["reward"],
                    "now": result.reward,
                    "swebench_fooled": fooled,
                    "tampered": result.tampered,
                    "flags": result.flags,
                    "seconds": now_s,
                    "seconds_before": None if old is None else old["seconds"],
                }
                rows.append(row)
                shown = "-" if old is None else f"{old['reward']:g}"
                print(
                    f"| {row['family']} | {cheat.name} | {kind} | {backend} | {shown} "
                    f"| {result.reward:g} | {'-' if fooled is None else 'yes' if fooled else 'no'} "
                    f"| {found[:90]} |",
                    flush=True,
                )
    print("\nmedian grading time of the legitimate fixes (s):")
    for (kind, backend, which), values in sorted(seconds.items()):
        print(f"  {kind:8} {backend:7} {which:7} {statistics.median(values):.2f} ({len(values)})")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
