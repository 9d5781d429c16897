"""The report of a counterfactual fork run (``fork``): per strategy, the distribution of the
regret of its compactions and their cost difference, as JSON, a markdown table and a PNG.

Means come with 95% bootstrap intervals over tasks (each task first averaged over its forks),
as in the benchmark's report; forks whose grading failed are counted apart and left out.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from ac_env.analysis.stats import Estimate, bootstrap_mean
from ac_env.bench.config import BenchConfig
from ac_env.bench.fork import FORK_DIR, ForkRecord
from ac_env.bench.report import KIND_MARKERS, _pyplot


class StrategyRegret(BaseModel):
    """``helped``/``same``/``hurt``: forks with regret +1, 0, -1; ``ungraded``: regret None."""

    strategy: str
    forks: int
    proactive: int
    forced: int
    helped: int
    same: int
    hurt: int
    ungraded: int
    regret: Estimate
    cost_difference_usd: Estimate
    success_with: float
    success_without: float


@dataclass(frozen=True)
class ForkReport:
    summary: Path
    markdown: Path
    plot: Path
    text: str


def strategy_regret(strategy: str, forks: Sequence[ForkRecord]) -> StrategyRegret:
    graded = [f for f in forks if f.regret is not None]
    return StrategyRegret(
        strategy=strategy,
        forks=len(forks),
        proactive=sum(f.kind == "proactive" for f in forks),
        forced=sum(f.kind == "forced" for f in forks),
        helped=sum(f.regret == 1 for f in graded),
        same=sum(f.regret == 0 for f in graded),
        hurt=sum(f.regret == -1 for f in graded),
        ungraded=len(forks) - len(graded),
        regret=_over_tasks(graded, lambda f: f.regret),
        cost_difference_usd=_over_tasks(graded, lambda f: f.cost_difference_usd),
        success_with=_mean([f.with_compaction.success for f in graded]),
        success_without=_mean([f.without_compaction.success for f in graded]),
    )


def write_fork_report(
    config: BenchConfig, forks: Sequence[ForkRecord], out_dir: str | Path
) -> ForkReport:
    out = Path(out_dir) / FORK_DIR
    out.mkdir(parents=True, exist_ok=True)
    groups = _by_strategy(config, forks)
    rows = [strategy_regret(name, group) for name, group in groups.items()]
    summary = out / "summary.json"
    summary.write_text(
        json.dumps(
            {
                "config": json.loads(config.model_dump_json()),
                "budget_usd": config.run_budget,
                "strategies": [row.model_dump() for row in rows],
                "forks": [fork.model_dump() for fork in forks],
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    text = "\n\n".join(
        [
            f"# ac-bench fork: worker `{config.worker}`, split `{config.split}`, budget "
            f"${config.run_budget:g}, fixed threshold {config.fixed_threshold}, "
            f"{len(forks)} compactions forked",
            "## Regret per strategy: success(with) - success(without) [95% CI over tasks]",
            regret_table(rows),
            "'without' skips the compaction and every later one (ac_env/bench/fork.py). "
            "cost diff: USD(with) - USD(without); success: over the graded forks.",
            "## Every fork",
            forks_table(forks),
        ]
    )
    markdown = out / "report.md"
    markdown.write_text(text + "\n", encoding="utf-8")
    plot = _plot_regret(config, groups, out / "regret.png")
    return ForkReport(summary=summary, markdown=markdown, plot=plot, text=text)


def regret_table(rows: Sequence[StrategyRegret]) -> str:
    lines = [
        "| strategy | forks (proactive/forced) | helped +1 | same 0 | hurt -1 | ungraded "
        "| mean regret | mean cost diff $ | success with | success without |",
        "|---" * 10 + "|",
    ]
    for r in rows:
        lines.append(
            f"| {r.strategy} | {r.forks} ({r.proactive}/{r.forced}) | {r.helped} | {r.same} "
            f"| {r.hurt} | {r.ungraded} | {_estimate(r.regret, '{:+.2f}')} "
            f"| {_estimate(r.cost_difference_usd, '{:+.4f}')} | {r.success_with:.0%} "
            f"| {r.success_without:.0%} |"
        )
    return "\n".join(lines)


def forks_table(forks: Sequence[ForkRecord]) -> str:
    lines = [
        "| strategy | task | seed | step | kind | tokens | with: reward, exit, steps, $ "
        "| without: reward, exit, steps, $ | regret |",
        "|---" * 9 + "|",
    ]
    for f in forks:
        branches = [
            f"{b.reward}, {b.exit_reason}, {b.steps}, {b.cost.usd:.4f}"
            for b in (f.with_compaction, f.without_compaction)
        ]
        lines.append(
            f"| {f.strategy} | {f.instance_id} | {f.seed} | {f.step} | {f.kind} "
            f"| {f.tokens_before}->{f.tokens_after} | {branches[0]} | {branches[1]} "
            f"| {'n/a' if f.regret is None else f'{f.regret:+.0f}'} |"
        )
    return "\n".join(lines)


def _by_strategy(config: BenchConfig, forks: Sequence[ForkRecord]) -> dict[str, list[ForkRecord]]:
    groups: dict[str, list[ForkRecord]] = {name: [] for name in config.strategies}
    for fork in forks:
        groups.setdefault(fork.strategy, []).append(fork)
    return groups


def _over_tasks(forks: Sequence[ForkRecord], value: Callable[[ForkRecord], Any]) -> Estimate:
    per_task: dict[str, list[float]] = defaultdict(list)
    for fork in forks:
        per_task[fork.instance_id].append(float(value(fork)))
    return bootstrap_mean(list(per_task.values()))


def _mean(values: Sequence[float | None]) -> float:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else float("nan")


def _estimate(e: Estimate, fmt: str) -> str:
    if e.n == 0:
        return "n/a"
    return f"{fmt.format(e.mean)} [{fmt.format(e.low)}, {fmt.format(e.high)}]"


def _plot_regret(config: BenchConfig, groups: dict[str, list[ForkRecord]], path: Path) -> Path:
    """Left: each fork's regret (jittered around -1, 0, +1), marker by compaction kind, with
    the mean and its 95% CI; right: the same for the cost difference."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8))
    rng = np.random.default_rng(0)
    names = list(groups)
    panels = [
        (axes[0], lambda f: f.regret, "regret = success(with) - success(without)"),
        (axes[1], lambda f: f.cost_difference_usd, "cost(with) - cost(without), USD"),
    ]
    for ax, value, label in panels:
        marked: set[str] = set()
        for x, name in enumerate(names):
            graded = [f for f in groups[name] if f.regret is not None]
            for kind, color in (("proactive", "tab:orange"), ("forced", "tab:blue")):
                ys = [float(value(f)) for f in graded if f.kind == kind]
                if not ys:
                    continue
                ax.scatter(
                    x + rng.uniform(-0.18, 0.18, len(ys)),
                    np.array(ys) + (rng.uniform(-0.06, 0.06, len(ys)) if ax is axes[0] else 0),
                    marker=KIND_MARKERS[kind],
                    color=color,
                    alpha=0.6,
                    label=kind if kind not in marked else None,
                )
                marked.add(kind)
            if ax is axes[0]:
                counts = [sum(f.regret == r for f in graded) for r in (1, 0, -1)]
                ax.text(x, 1.22, "+1: {}   0: {}   -1: {}".format(*counts), ha="center", fontsize=8)
            estimate = _over_tasks(graded, value)
            if estimate.n:
                ax.errorbar(
                    [x + 0.3],
                    [estimate.mean],
                    yerr=[[estimate.mean - estimate.low], [estimate.high - estimate.mean]],
                    fmt="D",
                    color="black",
                    capsize=4,
                    label="mean, 95% CI" if "mean" not in marked else None,
                )
                marked.add("mean")
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(names)), names)
        ax.set_xlim(-0.6, len(names) - 0.4)
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylim(-1.4, 1.4)
    axes[0].set_yticks([-1, 0, 1])
    handles, labels = axes[0].get_legend_handles_labels()
    if labels:  # none when nothing was forked (every run failed, or none compacted)
        fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.suptitle(
        f"Counterfactual fork per compaction ({config.worker}, budget ${config.run_budget:g}):"
        " continue with vs without it"
    )
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
