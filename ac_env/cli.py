"""``ac-env``: the environment's command line.

    ac-env tasks build toolz==1.2.0 boltons==26.2.0 --out DIR [--max-tasks N]

mines bug-fix tasks from real libraries (see ``ac_env.mining.build``) and writes
``DIR/tasks.jsonl``, which ``gym.make("AutoCompact-SWE-v0", task_source=...)`` accepts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ac_env.mining.build import BuildOptions, build
from ac_env.tasks.synthetic.git_repo import cache_root


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ac-env", description="AutoCompact environment tools")
    commands = parser.add_subparsers(dest="group", required=True)
    tasks = commands.add_parser("tasks", help="task sources").add_subparsers(
        dest="command", required=True
    )
    mine = tasks.add_parser(
        "build", help="mine bug-fix tasks from PyPI libraries (sdists that ship their tests)"
    )
    mine.add_argument("libraries", nargs="+", help="NAME==VERSION or a local sdist archive")
    mine.add_argument(
        "--out",
        type=Path,
        default=cache_root() / "mined",
        help="build directory (default: $AUTOCOMPACT_CACHE/mined or ~/.cache/autocompact/mined)",
    )
    mine.add_argument("--max-tasks", type=int, default=None, help="tasks per library")
    mine.add_argument("--max-candidates", type=int, default=None, help="mutants per library")
    mine.add_argument("--max-failing", type=int, default=10, help="most failing tests per task")
    mine.add_argument("--jobs", type=int, default=1, help="mutants tested at once")
    mine.add_argument("--timeout", type=float, default=None, help="seconds per mutant run")
    mine.add_argument(
        "--slow-test-s", type=float, default=0.25, help="tests slower than this are left out"
    )
    mine.add_argument("--seed", type=int, default=0, help="order in which mutants are tried")
    mine.add_argument(
        "--unisolated",
        action="store_true",
        help="run test suites without bubblewrap (no isolation: only for trusted code)",
    )
    mine.add_argument("--no-progress", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    options = BuildOptions(
        out=args.out,
        max_tasks=args.max_tasks,
        max_candidates=args.max_candidates,
        max_failing=args.max_failing,
        jobs=args.jobs,
        timeout_s=args.timeout,
        slow_test_s=args.slow_test_s,
        seed=args.seed,
        isolation="none" if args.unisolated else "bwrap",
        progress=not args.no_progress,
    )
    reports = build(args.libraries, options)
    return 0 if any(report.status == "built" for report in reports) else 1


if __name__ == "__main__":
    raise SystemExit(main())
