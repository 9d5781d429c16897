"""Benchmark two compaction strategies with the Python API (what ``ac-bench`` runs).

    .venv/bin/python examples/compare_strategies.py [--out runs/compare] [--tasks 3]

Full history (``none``) against forced compaction at a token threshold (``fixed``), with the
reference agent on built-in easy tasks; every budget's outcome is read from one run at the
highest budget. Prints the report's table and where the plots are; rerunning resumes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ac_env.bench import BenchConfig, run_benchmark, write_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/compare"))
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--threshold", type=int, default=4096, help="of the 'fixed' strategy")
    args = parser.parse_args()

    config = BenchConfig(
        split="easy",
        limit=args.tasks,
        strategies=["none", "fixed"],
        worker="reference",
        budgets=[0.005, 0.01, 0.02],
        fixed_threshold=args.threshold,
    )
    records = run_benchmark(config, args.out)
    report = write_report(config, records, args.out)
    print(report.text)
    print(f"\nplots: {', '.join(str(p) for p in report.plots)}")


if __name__ == "__main__":
    main()
