"""``ac-bench``: compare compaction strategies on a task suite under per-task budgets.

    ac-bench --out results/bench --split easy --limit 10 \
        --strategies none fixed learned masking summary_ignored --worker reference

Rerunning with the same ``--out`` resumes; another configuration there is refused.
``--fork`` runs the counterfactual fork instead (``ac_env.bench.fork``): every compaction of
every episode continued with and without it, at the highest budget, into ``<out>/fork/``.
"""

from __future__ import annotations

import argparse
import sys

from pydantic import ValidationError

from ac_env.bench.config import DEFAULT_BUDGETS, BenchConfig, ConfigMismatchError
from ac_env.bench.fork import run_fork
from ac_env.bench.fork_report import write_fork_report
from ac_env.bench.report import write_report
from ac_env.bench.runner import run_benchmark
from ac_env.strategies import DEFAULT_THRESHOLD, STRATEGIES


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ac-bench", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="results directory (resumed if it exists)")
    parser.add_argument("--source", default="builtin", help="'builtin' or a task file")
    parser.add_argument("--split", default="easy", help="task split; 'all' for every split")
    parser.add_argument("--ids", nargs="+", default=None, help="only these task ids")
    parser.add_argument("--limit", type=int, default=None, help="first N tasks")
    parser.add_argument(
        "--strategies",
        nargs="+",
        default=["none", "fixed", "learned"],
        help=f"of: {', '.join(STRATEGIES)}",
    )
    parser.add_argument(
        "--worker", default="reference", help="reference | hf:<path|smollm2> | openai:<model>@<url>"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--budgets", type=float, nargs="+", default=list(DEFAULT_BUDGETS))
    parser.add_argument(
        "--fallback-threshold", type=int, default=None, help="forced compaction, any strategy"
    )
    parser.add_argument(
        "--fixed-threshold", type=int, default=DEFAULT_THRESHOLD, help="the 'fixed' strategy's"
    )
    parser.add_argument("--pricing", default="qwen3-coder-flash")
    parser.add_argument("--max-steps", type=int, default=50)
    parser.add_argument("--sandbox", default="local")
    parser.add_argument("--workers", type=int, default=2)
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
        config = BenchConfig(
            task_source=args.source,
            split=None if args.split == "all" else args.split,
            task_ids=args.ids,
            limit=args.limit,
            strategies=args.strategies,
            worker=args.worker,
            seeds=args.seeds,
            budgets=args.budgets,
            fallback_threshold=args.fallback_threshold,
            fixed_threshold=args.fixed_threshold,
            pricing=args.pricing,
            max_steps=args.max_steps,
            sandbox=args.sandbox,
            workers=args.workers,
        )
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
        return 0
    report = write_report(config, records, args.out)
    print(report.text)
    print(f"\nreport: {report.markdown}")
    print("plots: " + ", ".join(str(p) for p in report.plots))
    return 0


if __name__ == "__main__":
    sys.exit(main())
