"""The red-team table: every cheat of ``tests/reward_hacks.py`` and the legitimate fixes, graded
on a built-in and a mined task in each sandbox backend: reward and what was found.

    .venv/bin/python benchmarks/reward_hacking.py [--backends local docker]
        [--kinds builtin mined] [--grader-from REV]

``--grader-from REV`` grades with ``ac_env/grading.py`` as it is at git revision ``REV``
(e.g. the commit before the hardening) instead of the working tree's, to show what the
cheats earned before. Prints a table; no assertions (``tests/test_reward_hacking.py`` has them).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from reward_hacks import CHEATS, FIXES, builtin_task, cheat_diff, mined_task  # noqa: E402

from ac_env.sandbox.base import Sandbox  # noqa: E402
from ac_env.sandbox.local import LocalSandbox  # noqa: E402
from ac_env.tasks.model import Task  # noqa: E402


def grader(revision: str | None) -> Callable[..., Any]:
    if revision is None:
        from ac_env.grading import grade

        return grade
    source = subprocess.run(
        ["git", "show", f"{revision}:ac_env/grading.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "grading_at_revision.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("grading_at_revision", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.grade  # type: ignore[no-any-return]


def sandbox_factory(backend: str) -> Callable[[], Sandbox]:
    if backend == "docker":
        from ac_env.sandbox.docker import DockerSandbox

        return DockerSandbox
    return lambda: LocalSandbox(isolation="bwrap")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", nargs="+", default=["local", "docker"])
    parser.add_argument("--kinds", nargs="+", default=["builtin", "mined"])
    parser.add_argument("--grader-from", default=None, metavar="REV")
    args = parser.parse_args()
    grade = grader(args.grader_from)
    tasks: dict[str, Task] = {}
    if "builtin" in args.kinds:
        tasks["builtin"] = builtin_task()
    if "mined" in args.kinds:
        tasks["mined"] = mined_task(Path(tempfile.mkdtemp()), "bwrap")
    label = args.grader_from or "working tree"
    print(f"grader: ac_env/grading.py at {label}")
    print(f"| {'cheat':<44} | {'backend':<7} | {'task':<7} | reward | {'s':>4} | tampered / reason")
    print(f"|{'-' * 46}|{'-' * 9}|{'-' * 9}|--------|------|------")
    for cheat in [*CHEATS, *FIXES]:
        for kind, task in tasks.items():
            assert task.snapshot_dir is not None
            patch = cheat_diff(task, cheat.make(task, task.snapshot_dir))
            for backend in args.backends:
                started = time.monotonic()
                result = grade(task, patch, sandbox_factory(backend)(), 120)
                seconds = time.monotonic() - started
                detail = getattr(result, "tampered", None) or result.reason
                reward = "nan" if result.reward is None else f"{result.reward:g}"
                print(
                    f"| {cheat.name:<44} | {backend:<7} | {kind:<7} | {reward:>6} "
                    f"| {seconds:4.1f} | {detail[:110]}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
