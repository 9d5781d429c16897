"""``ac-env``: the environment's command line.

    ac-env tasks build toolz==1.2.0 boltons==26.2.0 --out DIR [--max-tasks N]

mines bug-fix tasks from real libraries (see ``ac_env.mining.build``) and writes
``DIR/tasks.jsonl``, which ``gym.make("AutoCompact-SWE-v0", task_source=...)`` accepts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ac_env.config_flags import add_config_flags, config_kwargs
from ac_env.mining.build import BuildOptions, build
from ac_env.tasks.git_repo import cache_root

# Flags whose names differ from the BuildOptions field they set.
FLAGS = {"timeout_s": "--timeout"}


def _parser() -> argparse.ArgumentParser:
    """``tasks build``: one flag per ``BuildOptions`` field, plus ``--out``, ``--unisolated``
    (isolation) and ``--no-progress``."""
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
    add_config_flags(mine, BuildOptions, FLAGS, skip=("out", "isolation", "progress"))
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
        isolation="none" if args.unisolated else "bwrap",
        progress=not args.no_progress,
        **config_kwargs(args, BuildOptions),
    )
    reports = build(args.libraries, options)
    return 0 if any(report.status == "built" for report in reports) else 1


if __name__ == "__main__":
    raise SystemExit(main())
