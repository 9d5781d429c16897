"""What the static capability gate (``ac_env.grading.capability_gate``) refuses, and what it
costs.

    .venv/bin/python benchmarks/capability_gate.py [--source builtin real] [--tasks 0]
    .venv/bin/python benchmarks/capability_gate.py --history GIT_DIR [GIT_DIR ...] [--commits 500]

Without ``--history``: every shipped gold patch (``--source``'s suites; ``--tasks N``: the first
N of each) is gated as ``grade`` gates it, in relative and in strict mode, its files read from
the task's snapshot. Prints the gold patches refused (false rejections), the milliseconds the
gate takes per graded patch (parsing and comparing; ``grade`` also reads the files back from
the sandbox), and, per shipped repository, the capabilities its base product files already
use (what the relative rule leaves open in them), and what the detectors
(``ac_env.grading.detectors``) flag on the gold patches (false positives: gold patches are
correct fixes).

With ``--history``: for each git directory (a bare clone is enough), the last ``--commits``
non-merge commits that change product ``.py`` files (not tests, not docs), each changed file's
parent and commit versions gated in relative mode as if the commit were a patch. Prints the
share of commits refused and the most frequent reasons.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path, PurePosixPath

from tqdm import tqdm

from ac_env.grading.capabilities import capability_uses
from ac_env.grading.capability_gate import GateMode, check_patch, gates
from ac_env.grading.detectors import detect, literals_of_tests
from ac_env.grading.patch_filter import added_lines, graded_test_files, looks_like_test, split_diff
from ac_env.tasks import load_tasks
from ac_env.tasks.model import Task

NOT_PRODUCT = frozenset({"doc", "docs", "examples", "example", "bin", "scripts", "benchmarks"})


def product_file(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return (
        gates(path)
        and not looks_like_test(path)
        and parts[-1] != "conftest.py"
        and not NOT_PRODUCT.intersection(parts[:-1])
    )


# -- the shipped gold patches ------------------------------------------------------------------


def gold_files(
    task: Task, scratch: Path
) -> tuple[dict[str, tuple[bytes | None, bytes]], list[str]]:
    """Base and patched bytes of the Python files ``task``'s gold patch changes or adds, read
    from the task's snapshot through a scratch index (the snapshot is left untouched), and
    what the detectors flag on the patch (the test patch applied, as ``grade`` does)."""
    assert task.snapshot_dir is not None
    repo = task.snapshot_dir
    index = {"GIT_INDEX_FILE": str(scratch / "index")}
    _git_in(repo, index, "read-tree", "HEAD")
    for name, patch in (("gold", task.patch), ("test", task.test_patch)):
        if patch.strip():
            (scratch / name).write_text(patch)
            _git_in(repo, index, "apply", "--cached", str(scratch / name))
    changes = [c for c in split_diff(task.patch) if gates(c.path) and not c.deleted]
    files = {
        c.path: (
            None if c.created else _git_in(repo, index, "show", f"HEAD:{c.path}"),
            _git_in(repo, index, "show", f":{c.path}"),
        )
        for c in changes
    }
    tests = sorted(p for p in graded_test_files(task) if p.endswith(".py"))
    literals = literals_of_tests(
        [_git_in(repo, index, "show", f":{p}", check=False) for p in tests]
    )
    flags = [
        flag
        for path, lines in added_lines(task.patch).items()
        if path in files
        for flag in detect(files[path][1], lines, path, literals)
    ]
    return files, flags


def _git_in(repo: Path, env: dict[str, str], *args: str, check: bool = True) -> bytes:
    return subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **env}, capture_output=True, check=check
    ).stdout


def base_capabilities(task: Task) -> dict[str, int]:
    """Capability -> how many of the base commit's product files use it."""
    assert task.snapshot_dir is not None
    counts: Counter[str] = Counter()
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=task.snapshot_dir, capture_output=True, check=True
    )
    for path in listing.stdout.decode().split("\0"):
        if path and product_file(path):
            source = (task.snapshot_dir / path).read_bytes()
            counts.update({use.capability for use in capability_uses(source)})
    return dict(sorted(counts.items()))


def gold_report(sources: list[str], limit: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        for source in sources:
            tasks = load_tasks(source, split=None)
            tasks = tasks[:limit] if limit else tasks
            costs: list[float] = []
            refused: dict[GateMode, list[str]] = {"relative": [], "strict": []}
            open_by_repo: dict[str, dict[str, int]] = {}
            flagged: list[str] = []
            for task in tqdm(tasks, desc=source, unit="task"):
                files, flags = gold_files(task, Path(scratch))
                flagged += [f"{task.instance_id}: {flag}" for flag in flags]
                started = time.perf_counter()
                verdict = check_patch(files, "relative")
                costs.append((time.perf_counter() - started) * 1000)
                refused["relative"] += [f"{task.instance_id}: {u}" for u in verdict.rejected]
                strict = check_patch(files, "strict").rejected
                refused["strict"] += [f"{task.instance_id}: {u}" for u in strict]
                if task.repo not in open_by_repo:
                    open_by_repo[task.repo] = base_capabilities(task)
            costs.sort()
            p95 = costs[min(len(costs) - 1, int(0.95 * len(costs)))]
            print(
                f"{source}: {len(tasks)} gold patches; refused in relative mode: "
                f"{len(refused['relative'])}, in strict mode: {len(refused['strict'])}; gate "
                f"median {statistics.median(costs):.1f} ms, p95 {p95:.1f} ms, "
                f"max {costs[-1]:.1f} ms per patch"
            )
            for line in refused["relative"] + refused["strict"]:
                print("   refused:", line)
            print(f"  detector flags on gold patches (false positives): {len(flagged)}")
            for line in flagged:
                print("   flagged:", line)
            print(f"  capabilities the relative rule leaves open ({len(open_by_repo)} repos):")
            for repo, counts in sorted(open_by_repo.items()):
                shown = ", ".join(f"{name} ({n} files)" for name, n in counts.items()) or "none"
                print(f"    {repo}: {shown}")


# -- real history ------------------------------------------------------------------------------


def git(directory: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={directory}", *args], capture_output=True, check=True
    ).stdout


def changed_product_files(directory: Path, commit: str) -> list[tuple[str, str, str]]:
    """(status, path before, path after) of the product files ``commit`` changes against its
    first parent (a moved file is compared with where it was)."""
    out = git(directory, "diff-tree", "--no-commit-id", "-r", "--name-status", "-M",
              f"{commit}^", commit)  # fmt: skip
    changes = []
    for line in out.decode("utf-8", "surrogateescape").splitlines():
        status, *paths = line.split("\t")
        if product_file(paths[-1]):
            changes.append((status[:1], paths[0], paths[-1]))
    return changes


def history_report(directory: Path, commits: int) -> None:
    log = git(directory, "log", "--no-merges", "--format=%H", "-n", str(commits * 6), "HEAD")
    refused: list[str] = []
    reasons: Counter[str] = Counter()
    seen = 0
    for commit in log.decode().split():
        if seen == commits:
            break
        try:
            changes = changed_product_files(directory, commit)
        except subprocess.CalledProcessError:  # a root commit
            continue
        changes = [change for change in changes if change[0] != "D"]
        if not changes:
            continue
        seen += 1
        files = {
            after: (
                None if status == "A" else git(directory, "show", f"{commit}^:{before}"),
                git(directory, "show", f"{commit}:{after}"),
            )
            for status, before, after in changes
        }
        verdict = check_patch(files, "relative")
        if verdict.rejected:
            refused.append(f"{commit[:10]} {verdict.rejected[0]}")
            reasons.update({f"{u.capability}: {_reason(u.detail)}" for u in verdict.rejected})
    print(
        f"{directory}: {len(refused)} of {seen} commits refused "
        f"({100 * len(refused) / max(seen, 1):.1f}%)"
    )
    for reason, count in reasons.most_common(10):
        print(f"   {count:3d}  {reason}")
    for line in refused:
        print("   refused:", line)


def _reason(detail: str) -> str:
    return detail.split("'")[0].strip() if "string" in detail else detail


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", nargs="+", default=["builtin", "real"])
    parser.add_argument("--tasks", type=int, default=0, help="first N of each source (0: all)")
    parser.add_argument("--history", nargs="+", type=Path, metavar="GIT_DIR")
    parser.add_argument("--commits", type=int, default=500)
    args = parser.parse_args()
    if args.history:
        for directory in args.history:
            history_report(directory, args.commits)
    else:
        gold_report(args.source, args.tasks)


if __name__ == "__main__":
    main()
