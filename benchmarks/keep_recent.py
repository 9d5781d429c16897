"""How many recent interactions to keep verbatim after a summary (``keep_recent``): 0, 1, 2, 4,
with the reference agent, on the long real-code split at a 32K window and on the built-in
medium split.

    .venv/bin/python benchmarks/keep_recent.py --out runs/keep-recent [--long-limit 8]
        [--medium-limit 20] [--keeps 0 1 2 4] [--quick]

Each (regime, keep) is one ``ac-bench`` run (``--keep-recent K``) of the strategies that
compact: ``fixed`` (forced at the threshold: 16K on the long split, 4K on the built-in one,
whose contexts stay small) and ``self`` (the rubric as a rule). Runs resume: an interrupted
one continues from the episodes it wrote. Printed per regime, keep and strategy:

- success: episodes whose final patch passes (at the run's one budget);
- cost: mean USD per episode;
- compactions: summary rewrites per episode;
- rereads: per compaction, commands in the next turns that read a file read before it
  (``ac_env.analysis.continuation``);
- loops: forced compactions asked for within one turn of the previous rewrite (the kept
  turns plus the summary already past the threshold: a summary that buys nothing);
- steps: model turns per episode.

Writes ``keep_recent.json`` and ``keep_recent.png`` under ``--out``.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

from ac_env.bench import BenchConfig, run_benchmark
from ac_env.bench.runner import EpisodeRecord

LONG_IDS = (  # the main job's four tasks come first
    "cachetools-8.0.2__long-2495612ce7",
    "toolz-1.2.0__long-0461ebdbc5",
    "toolz-1.2.0__long-d7913ae228",
    "isodate-0.7.2__long-60dfe92321",
)


def regimes(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    long: dict[str, Any] = {
        "task_source": "real",
        "split": "long",
        "context_window": 32_768,
        "max_steps": 100,
        "fixed_threshold": 16_384,
        "budgets": [0.4],
    }
    if args.long_limit <= len(LONG_IDS):
        long["task_ids"] = list(LONG_IDS[: args.long_limit])
    else:
        long["limit"] = args.long_limit
    medium: dict[str, Any] = {
        "task_source": "builtin",
        "split": "medium",
        "limit": args.medium_limit,
        "fixed_threshold": 4_096,
        "budgets": [0.4],
    }
    return {"long-32k": long, "builtin-medium": medium}


def loops(record: EpisodeRecord) -> int:
    """Forced compactions within one turn of the previous rewrite."""
    if record.metrics is None:
        return 0
    rewrites = [c for c in record.metrics.compactions if c.kind in ("proactive", "forced")]
    return sum(
        1
        for before, after in itertools.pairwise(rewrites)
        if after.kind == "forced" and after.step - before.step <= 2
    )


def row(records: list[EpisodeRecord]) -> dict[str, float]:
    ok = [r for r in records if r.metrics is not None]
    metrics = [r.metrics for r in ok if r.metrics is not None]
    continuations = [c for r in ok for c in r.continuations]
    n = max(len(metrics), 1)
    return {
        "episodes": len(records),
        "infra_errors": len(records) - len(ok),
        "success": sum(m.success for m in metrics) / n,
        "cost_usd": sum(
            m.cost.uncached_input_usd + m.cost.cached_input_usd + m.cost.output_usd for m in metrics
        )
        / n,
        "compactions": sum(m.count("proactive") + m.count("forced") for m in metrics) / n,
        "rereads_per_compaction": (
            sum(c.rereads for c in continuations) / len(continuations) if continuations else 0.0
        ),
        "loops": sum(loops(r) for r in ok) / n,
        "steps": sum(m.steps for m in metrics) / n,
    }


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4), squeeze=False)
    for axis, (regime, by_keep) in zip(axes[0], results.items(), strict=True):
        keeps = sorted(by_keep, key=int)
        for strategy in next(iter(by_keep.values())):
            axis.plot(
                [int(k) for k in keeps],
                [by_keep[k][strategy]["success"] for k in keeps],
                marker="o",
                label=strategy,
            )
        axis.set(title=regime, xlabel="keep_recent", ylabel="success", ylim=(-0.05, 1.05))
        axis.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--keeps", type=int, nargs="+", default=[0, 1, 2, 4])
    parser.add_argument("--long-limit", type=int, default=8, help="long tasks (0: none)")
    parser.add_argument("--medium-limit", type=int, default=20, help="medium tasks (0: none)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="2 medium tasks, keeps 0 and 2")
    args = parser.parse_args()
    if args.quick:
        args.keeps, args.long_limit, args.medium_limit = [0, 2], 0, 2
    chosen = {
        name: settings
        for name, settings in regimes(args).items()
        if (args.long_limit if name.startswith("long") else args.medium_limit) > 0
    }
    results: dict[str, Any] = {}
    for regime, settings in chosen.items():
        results[regime] = {}
        cache = str(args.out / regime / "command-cache")
        for keep in args.keeps:
            config = BenchConfig(
                **settings,
                strategies=["fixed", "self"],
                keep_recent=keep,
                workers=args.workers,
                command_cache=cache if settings["task_source"] == "real" else None,
            )
            records = run_benchmark(config, args.out / regime / f"keep-{keep}")
            results[regime][str(keep)] = {
                strategy: row([r for r in records if r.strategy == strategy])
                for strategy in config.strategies
            }
    header = f"{'regime':<16}{'keep':>5} {'strategy':<8}" + "".join(
        f"{c:>12}" for c in ("success", "cost $", "compact", "rereads", "loops", "steps")
    )
    print(header)
    for regime, by_keep in results.items():
        for keep, by_strategy in by_keep.items():
            for strategy, r in by_strategy.items():
                print(
                    f"{regime:<16}{keep:>5} {strategy:<8}{r['success']:>12.0%}"
                    f"{r['cost_usd']:>12.4f}{r['compactions']:>12.2f}"
                    f"{r['rereads_per_compaction']:>12.2f}{r['loops']:>12.2f}{r['steps']:>12.1f}"
                )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "keep_recent.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, args.out / "keep_recent.png")
    print(f"wrote {args.out / 'keep_recent.json'} and keep_recent.png")


if __name__ == "__main__":
    main()
