"""``ac-env``: the environment's command line.

    ac-env tasks build toolz==1.2.0 boltons==26.2.0 --out DIR [--max-tasks N]

mines bug-fix tasks from real libraries (see ``ac_env.mining.build``) and writes
``DIR/tasks.jsonl``, which ``gym.make("AutoCompact-SWE-v0", task_source=...)`` accepts;

    ac-env tasks pack DIR --into ac_env/tasks/real/data [--held-out NAME ...]

turns such a build into the real-code suite's data (``ac_env.mining.pack``), which
``task_source="real"`` reads.

    ac-env tasks long DIR [--per-library 16] [--bugs 2-4] [--per-file 1] [--max-failing N]
        [--seed 0] [--solved-alone]

composes long-horizon tasks (split ``long``) of several bugs each from a build's tasks (see
``ac_env.mining.long``; ``--solved-alone``: only bugs ``python -m ac_env.bench.solo`` saw the
reference agent fix alone) and writes ``DIR/long.jsonl``.

    ac-env serve [--port 8000] [--max-episodes 4] [--idle-timeout 600] [--compress]
        [gym.make flags...]

serves ``AutoCompact-SWE-v0`` over OpenEnv's HTTP/WebSocket interface (needs the ``openenv``
extra; see ``ac_env.integrations.openenv_server`` and docs/openenv.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ValidationError

from ac_env.config import EnvConfig
from ac_env.config_flags import add_config_flags, config_kwargs
from ac_env.mining.build import BuildOptions, build
from ac_env.mining.long import LongOptions, compose, parse_bug_range
from ac_env.mining.pack import pack_suite
from ac_env.tasks.git_repo import cache_root
from ac_env.tasks.real.suite import DATA_DIR

# Flags whose names differ from the BuildOptions field they set.
FLAGS = {"timeout_s": "--timeout"}
# EnvConfig fields that also take Python objects: on the command line, their string form.
OBJECT_FIELDS = ("sandbox", "token_counter", "pricing", "action_parser")


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
    mine.add_argument(
        "libraries",
        nargs="+",
        help="NAME==VERSION, NAME (the latest version, recorded in the build directory's "
        "versions.json) or a local sdist archive",
    )
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
    pack = tasks.add_parser("pack", help="write the real-code suite's data from a build")
    pack.add_argument("build_dir", type=Path, help="a directory `tasks build` wrote")
    pack.add_argument(
        "--into", type=Path, default=DATA_DIR, help="data directory (default: %(default)s)"
    )
    pack.add_argument(
        "--held-out", nargs="*", default=[], help="libraries whose tasks are all eval"
    )
    pack.add_argument(
        "--eval-every", type=int, default=5, help="one task in N of the others is eval"
    )
    pack.add_argument(
        "--max-per-function", type=int, default=None, help="one-bug tasks kept per function"
    )
    long = tasks.add_parser(
        "long", help="compose long-horizon tasks of several bugs from a build's tasks"
    )
    long.add_argument("build_dir", type=Path, help="a build directory of `ac-env tasks build`")
    long.add_argument("--libraries", nargs="+", help="library folders (name-version); default all")
    long.add_argument("--per-library", type=int, default=16, help="long tasks per library")
    long.add_argument("--bugs", default="2-4", help="bugs per task: N or N-M (default 2-4)")
    long.add_argument("--seed", type=int, default=0, help="which groups of bugs are drawn")
    long.add_argument(
        "--per-file", type=int, default=1, help="most bugs from one file, in different functions"
    )
    long.add_argument(
        "--max-failing",
        type=int,
        help="most failing tests in a task, all its bugs together (default: no cap)",
    )
    long.add_argument("--unisolated", action="store_true", help="run suites without bubblewrap")
    long.add_argument(
        "--solved-alone",
        action="store_true",
        help="draw only bugs the reference agent fixed alone (<slug>/solo.jsonl, written by "
        "`python -m ac_env.bench.solo`)",
    )
    long.add_argument(
        "--solo-peak-at-most",
        type=int,
        help="with --solved-alone: only bugs whose solo run's context peaked at most N tokens",
    )
    _add_serve(commands)
    return parser


def _add_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve", help="serve AutoCompact-SWE-v0 over OpenEnv's HTTP interface (openenv extra)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address (default: %(default)s)")
    serve.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    serve.add_argument(
        "--max-episodes",
        type=int,
        default=4,
        help="concurrent sessions, one sandbox each; past it a client is refused "
        "(default: %(default)s)",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=600.0,
        help="seconds a silent session is kept before its sandbox is removed; must exceed "
        "command_timeout + grading_timeout (default: %(default)s)",
    )
    serve.add_argument(
        "--compress",
        action="store_true",
        help="compress WebSocket frames (permessage-deflate): for slow networks; costs "
        "milliseconds a step on a large context",
    )
    add_config_flags(serve, EnvConfig, skip=OBJECT_FIELDS)
    for field in OBJECT_FIELDS:
        serve.add_argument(
            "--" + field.replace("_", "-"),
            dest=field,
            default=argparse.SUPPRESS,
            help=str(EnvConfig.model_fields[field].description).replace("%", "%%"),
        )


def _serve(args: argparse.Namespace) -> int:
    from ac_env.integrations.openenv_server import ServeOptions, serve

    try:
        options = ServeOptions(
            host=args.host,
            port=args.port,
            max_episodes=args.max_episodes,
            idle_timeout_s=args.idle_timeout,
            compress=args.compress,
            env=config_kwargs(args, EnvConfig),
        )
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg']}" for e in error.errors()
        )
        print(f"ac-env serve: {problems}", file=sys.stderr)
        return 2
    serve(options)
    return 0


def _long(args: argparse.Namespace) -> int:
    low, high = parse_bug_range(args.bugs)
    options = LongOptions(
        build_dir=args.build_dir,
        per_library=args.per_library,
        min_bugs=low,
        max_bugs=high,
        seed=args.seed,
        per_file=args.per_file,
        max_failing=args.max_failing,
        isolation="none" if args.unisolated else "bwrap",
        solved_alone=args.solved_alone,
        solo_peak_at_most=args.solo_peak_at_most,
    )
    return 0 if compose(options, args.libraries) else 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.group == "serve":
        return _serve(args)
    if args.command == "pack":
        manifest = pack_suite(
            args.build_dir, args.into, args.held_out, args.eval_every, args.max_per_function
        )
        print(f"suite {manifest.suite_version}: {len(manifest.libraries)} libraries in {args.into}")
        return 0
    if args.command == "long":
        return _long(args)
    options = BuildOptions(
        isolation="none" if args.unisolated else "bwrap",
        progress=not args.no_progress,
        **config_kwargs(args, BuildOptions),
    )
    reports = build(args.libraries, options)
    return 0 if any(report.status == "built" for report in reports) else 1


if __name__ == "__main__":
    raise SystemExit(main())
