"""``ac-bench``: compare compaction strategies on a task suite under per-task budgets.

    ac-bench --out results/bench --split easy --limit 10 \
        --strategies none fixed learned masking summary_ignored --worker reference

Rerunning with the same ``--out`` resumes; another configuration there is refused. Exit
codes: 0 done; 2 a configuration that cannot work (one line on stderr; nothing written); 3 a
cell (strategy x budget) whose episodes all failed for infrastructure reasons (one line each).
``--fork`` runs the counterfactual fork instead (``ac_env.bench.fork``): every compaction of
every episode continued with and without it, at the highest budget, into ``<out>/fork/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ValidationError

from ac_env.bench.config import BenchConfig
from ac_env.bench.failures import bench_failures, fork_failures
from ac_env.bench.fork import EPISODES_FILE, FORK_DIR, ForkEpisode, run_fork
from ac_env.bench.fork_report import write_fork_report
from ac_env.bench.report import write_report
from ac_env.bench.runner import run_benchmark
from ac_env.config_flags import add_config_flags, config_kwargs
from ac_env.records import read_jsonl
from ac_env.runs.failures import INFRA_EXIT_CODE, FailedCell
from ac_env.runs.run_dir import ConfigMismatchError

# Flags whose names differ from the BenchConfig field they set.
FLAGS = {"task_source": "--source", "task_ids": "--ids"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``--out``, ``--no-progress`` and ``--fork``, plus one flag per ``BenchConfig`` field
    (``--source`` for ``task_source``, ``--ids`` for ``task_ids``; ``--split all`` selects
    every split)."""
    parser = argparse.ArgumentParser(prog="ac-bench", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="results directory (resumed if it exists)")
    add_config_flags(parser, BenchConfig, FLAGS)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--fork",
        action="store_true",
        help="fork each compaction: continue with and without it (regret per compaction)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        settings = config_kwargs(args, BenchConfig)
        if settings.get("split") == "all":
            settings["split"] = None
        config = BenchConfig(**settings)
        if args.fork:
            forks = run_fork(config, args.out, progress=not args.no_progress)
        else:
            records = run_benchmark(config, args.out, progress=not args.no_progress)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()
        )
        print(f"ac-bench: {problems}", file=sys.stderr)
        return 2
    except (ConfigMismatchError, ValueError) as err:
        print(f"ac-bench: {err}", file=sys.stderr)
        return 2
    if args.fork:
        fork_report = write_fork_report(config, forks, args.out)
        print(fork_report.text)
        print(f"\nreport: {fork_report.markdown}\nsummary: {fork_report.summary}")
        print(f"plot: {fork_report.plot}")
        episodes = read_jsonl(Path(args.out) / FORK_DIR / EPISODES_FILE, ForkEpisode)
        return _exit_code(fork_failures(episodes))
    report = write_report(config, records, args.out)
    print(report.text)
    print(f"\nreport: {report.markdown}\nsummary: {report.summary}")
    print("plots: " + ", ".join(str(p) for p in report.plots))
    return _exit_code(bench_failures(records, config.budgets))


def _exit_code(failed: list[FailedCell]) -> int:
    for cell in failed:
        print(f"ac-bench: {cell.line()}", file=sys.stderr)
    return INFRA_EXIT_CODE if failed else 0


if __name__ == "__main__":
    sys.exit(main())
