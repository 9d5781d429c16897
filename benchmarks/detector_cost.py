"""What the grader's detectors cost, and how often they fire on correct fixes: each task's
gold patch and test patch are applied in a local sandbox, then the detectors
(``ac_env.grading.detectors``) read the patched files and the graded tests back and parse
them, as ``grade`` does. (``benchmarks/capability_gate.py`` counts the same false positives
faster, from the tasks' snapshots.)

    .venv/bin/python benchmarks/detector_cost.py [--source builtin real] [--tasks 0]

``--tasks N`` takes the first N tasks of each source (0: all). Prints, per source, the
median and 95th-percentile milliseconds of the detectors per graded patch (reading the
files back included), the share of a whole grade that is, and every finding on a gold
patch (a false positive: gold patches are correct fixes).
"""

from __future__ import annotations

import argparse
import statistics
import time

from tqdm import tqdm

from ac_env.grading.grader import _detector_flags
from ac_env.grading.patch_filter import added_lines
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks import load_tasks
from ac_env.tasks.model import Task


def detector_ms(task: Task, sandbox: LocalSandbox) -> tuple[float, list[str]]:
    """Milliseconds the detectors take on ``task``'s gold patch, and what they find."""
    sandbox.reset(task)
    for name, patch in (("gold", task.patch), ("test", task.test_patch)):
        if not patch.strip():
            continue
        sandbox.write_file(f".{name}.patch", patch.encode())
        applied = sandbox.exec(f"git apply .{name}.patch && rm .{name}.patch", 60, 10_000)
        if applied.exit_code != 0:
            raise RuntimeError(f"{task.instance_id}: the {name} patch does not apply")
    added = {path: lines for path, lines in added_lines(task.patch).items() if path.endswith(".py")}
    started = time.perf_counter()
    patched: dict[str, bytes | None] = {path: sandbox.read_file(path) for path in added}
    flags = _detector_flags(sandbox, task, patched, added)
    return (time.perf_counter() - started) * 1000, flags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", nargs="+", default=["builtin", "real"])
    parser.add_argument("--tasks", type=int, default=0, help="first N of each source (0: all)")
    args = parser.parse_args()
    sandbox = LocalSandbox()
    try:
        for source in args.source:
            tasks = load_tasks(source, split=None)
            tasks = tasks[: args.tasks] if args.tasks else tasks
            costs, false_positives = [], []
            for task in tqdm(tasks, desc=source, unit="task"):
                ms, flags = detector_ms(task, sandbox)
                costs.append(ms)
                false_positives += [f"{task.instance_id}: {flag}" for flag in flags]
            costs.sort()
            p95 = costs[min(len(costs) - 1, int(0.95 * len(costs)))]
            print(
                f"{source}: {len(tasks)} gold patches, detectors median "
                f"{statistics.median(costs):.2f} ms, p95 {p95:.2f} ms, max {costs[-1]:.2f} ms; "
                f"findings on gold patches: {len(false_positives)}"
            )
            for finding in false_positives:
                print("  ", finding)
    finally:
        sandbox.close()


if __name__ == "__main__":
    main()
