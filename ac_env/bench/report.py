"""The report of a benchmark run: markdown tables and PNG plots (matplotlib, Agg backend).

``report.md``: success and mean cost per strategy and budget (mean over tasks of each task's
mean over seeds, with 95% bootstrap intervals over tasks), then per-strategy figures of the
full-budget run. Plots: success vs budget per strategy, cost breakdown per strategy, and
context tokens over steps for a few episodes with compaction events marked.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ac_env.bench.budgets import BudgetOutcome
from ac_env.bench.config import BenchConfig
from ac_env.bench.failures import short_reason
from ac_env.bench.metrics import EpisodeMetrics, Estimate, bootstrap_mean
from ac_env.bench.runner import EpisodeRecord
from ac_env.paths import safe_child
from ac_env.trajectory import Trajectory

KIND_MARKERS = {"proactive": "o", "forced": "s", "masking": "D", "skipped": "^"}


@dataclass(frozen=True)
class Report:
    markdown: Path
    plots: list[Path]
    text: str


def _per_task(
    records: Sequence[EpisodeRecord], value: Callable[[EpisodeRecord], float | None]
) -> list[list[float]]:
    by_task: dict[str, list[float]] = defaultdict(list)
    for record in records:
        if record.status != "ok":
            continue
        v = value(record)
        if v is not None:
            by_task[record.instance_id].append(v)
    return list(by_task.values())


def _by_strategy(records: Sequence[EpisodeRecord]) -> dict[str, list[EpisodeRecord]]:
    grouped: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for record in records:
        grouped[record.strategy].append(record)
    return grouped


def success_at(records: Sequence[EpisodeRecord], budget: float) -> Estimate:
    def solved(record: EpisodeRecord) -> float | None:
        outcome = _outcome_at(record, budget)
        return None if outcome is None else float(outcome.reward == 1.0)

    return bootstrap_mean(_per_task(records, solved))


def cost_at(records: Sequence[EpisodeRecord], budget: float) -> Estimate:
    def spent(record: EpisodeRecord) -> float | None:
        outcome = _outcome_at(record, budget)
        return None if outcome is None else outcome.cost.usd

    return bootstrap_mean(_per_task(records, spent))


def _outcome_at(record: EpisodeRecord, budget: float) -> BudgetOutcome | None:
    return next((o for o in record.budgets if o.budget == budget), None)


def _metric(records: Sequence[EpisodeRecord], value: Callable[[EpisodeMetrics], float]) -> float:
    """The mean over tasks of each task's mean over seeds."""
    per_task = _per_task(records, lambda r: value(r.metrics) if r.metrics else None)
    return float(np.mean([np.mean(v) for v in per_task])) if per_task else float("nan")


def budget_table(config: BenchConfig, records: Sequence[EpisodeRecord]) -> str:
    head = "| strategy | " + " | ".join(f"${b:g}" for b in config.budgets) + " |"
    rows = [head, "|---" * (len(config.budgets) + 1) + "|"]
    for strategy, group in _by_strategy(records).items():
        cells = []
        for budget in config.budgets:
            s, c = success_at(group, budget), cost_at(group, budget)
            cells.append(
                f"{100 * s.mean:.0f}% [{100 * s.low:.0f}-{100 * s.high:.0f}] ${c.mean:.4f}"
            )
        rows.append(f"| {strategy} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def figures_table(records: Sequence[EpisodeRecord]) -> str:
    columns = [
        ("steps", lambda m: m.steps, "{:.1f}"),
        ("peak ctx", lambda m: m.peak_context_tokens, "{:.0f}"),
        ("mean ctx", lambda m: m.mean_context_tokens, "{:.0f}"),
        ("cache hit", lambda m: m.cache_hit_rate, "{:.0%}"),
        ("uncached $", lambda m: m.cost.uncached_input_usd, "{:.4f}"),
        ("cached $", lambda m: m.cost.cached_input_usd, "{:.4f}"),
        ("output $", lambda m: m.cost.output_usd, "{:.4f}"),
        ("summary $", lambda m: m.cost.summary_usd, "{:.4f}"),
        ("proactive", lambda m: m.count("proactive"), "{:.2f}"),
        ("forced", lambda m: m.count("forced"), "{:.2f}"),
        ("masking", lambda m: m.count("masking"), "{:.2f}"),
        ("skipped", lambda m: m.count("skipped"), "{:.2f}"),
        ("after root cause", _after_root_cause_share, "{:.0%}"),
    ]
    rows = [
        "| strategy | episodes | infra errors | " + " | ".join(c[0] for c in columns) + " |",
        "|---" * (len(columns) + 3) + "|",
    ]
    for strategy, group in _by_strategy(records).items():
        infra = sum(1 for r in group if r.status == "infra_error")
        cells = [fmt.format(_metric(group, value)) for _, value, fmt in columns]
        rows.append(f"| {strategy} | {len(group)} | {infra} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def audit_table(records: Sequence[EpisodeRecord]) -> str:
    rows = [
        "| strategy | summaries | missed key state | missed next step | false workspace claim "
        "| inconsistent plan | re-reads / compaction | re-searches / compaction "
        "| first action follows next step |",
        "|---" * 9 + "|",
    ]
    for strategy, group in _by_strategy(records).items():
        audits = [a for r in group if r.status == "ok" for a in r.audits]
        after = [c for r in group if r.status == "ok" for c in r.continuations]
        judged = [c.follows_next_step for c in after if c.follows_next_step is not None]
        cells = [
            str(len(audits)),
            *(
                _share(sum(getattr(a, name) for a in audits), len(audits))
                for name in (
                    "missed_key_state",
                    "missed_next_step",
                    "false_workspace_claim",
                    "inconsistent_plan",
                )
            ),
            f"{sum(c.rereads for c in after) / len(after):.2f}" if after else "-",
            f"{sum(c.researches for c in after) / len(after):.2f}" if after else "-",
            _share(sum(judged), len(judged)),
        ]
        rows.append(f"| {strategy} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def infra_section(records: Sequence[EpisodeRecord]) -> list[str]:
    """Episodes that failed for infrastructure reasons (left out of every rate above), per
    strategy with their reasons; nothing when there are none."""
    failed = [r for r in records if r.status == "infra_error"]
    if not failed:
        return []
    rows = ["| strategy | infra errors | episodes | reasons |", "|---|---|---|---|"]
    for strategy, group in _by_strategy(records).items():
        reasons = Counter(short_reason(r.error or "?") for r in group if r.status != "ok")
        if reasons:
            why = "; ".join(f"{n}x `{reason}`" for reason, n in reasons.most_common(3))
            rows.append(f"| {strategy} | {sum(reasons.values())} | {len(group)} | {why} |")
    return ["## Infrastructure failures (not counted as failures above)", "\n".join(rows)]


def _share(count: int, total: int) -> str:
    return f"{count / total:.0%} ({count}/{total})" if total else "-"


def _after_root_cause_share(m: EpisodeMetrics) -> float:
    """Share of this episode's summaries (proactive, forced, skipped) written after the root
    cause was first read; 0 when it wrote none."""
    summaries = [c for c in m.compactions if c.kind != "masking"]
    if not summaries:
        return 0.0
    return sum(c.phase == "after_root_cause" for c in summaries) / len(summaries)


def write_report(
    config: BenchConfig, records: Sequence[EpisodeRecord], out_dir: str | Path
) -> Report:
    out = Path(out_dir)
    ok = sum(1 for r in records if r.status == "ok")
    text = "\n\n".join(
        [
            f"# ac-bench: worker `{config.worker}`, tasks `{config.task_source}` split "
            f"`{config.split}`, {ok} episodes ok of {len(records)}, pricing `{config.pricing}`, "
            f"context window {config.context_window}, "
            f"fixed threshold {config.fixed_threshold}, "
            f"fallback threshold {config.fallback_threshold}",
            "## Success rate [95% CI] and mean cost per episode, by budget (USD)",
            budget_table(config, records),
            f"## Per-strategy figures (run budget ${config.run_budget:g})",
            figures_table(records),
            "Compaction counts are per episode; 'after root cause': share of summaries written "
            "after a ground-truth file was first read.",
            "## Summary audit and continuation after compaction",
            audit_table(records),
            "Audit rates are over the summaries the policy wrote (summary-ignored writes none); "
            "re-reads, re-searches and 'follows' are over the first 5 steps after each applied "
            "summary (see ac_env/bench/audit.py and continuation.py for the rules).",
            *infra_section(records),
        ]
    )
    markdown = out / "report.md"
    markdown.write_text(text + "\n", encoding="utf-8")
    plots = [
        _plot_success(config, records, out / "success_vs_budget.png"),
        _plot_costs(records, out / "cost_breakdown.png"),
        _plot_context(records, out, out / "context_over_steps.png"),
    ]
    return Report(markdown=markdown, plots=plots, text=text)


# ---- plots -----------------------------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_success(config: BenchConfig, records: Sequence[EpisodeRecord], path: Path) -> Path:
    """Budgets evenly spaced (they span orders of magnitude); strategies slightly offset so
    equal curves stay visible; error bars: 95% bootstrap CI over tasks."""
    plt = _pyplot()
    groups = _by_strategy(records)
    fig, ax = plt.subplots(figsize=(8, 4.8))
    positions = list(range(len(config.budgets)))
    width = 0.3 / max(1, len(groups))
    for index, (strategy, group) in enumerate(groups.items()):
        estimates = [success_at(group, b) for b in config.budgets]
        means = [100 * e.mean for e in estimates]
        errors = [
            [100 * (e.mean - e.low) for e in estimates],
            [100 * (e.high - e.mean) for e in estimates],
        ]
        shifted = [x + (index - (len(groups) - 1) / 2) * width for x in positions]
        ax.errorbar(shifted, means, yerr=errors, marker="o", capsize=3, label=strategy)
    ax.set_xticks(positions, [f"${b:g}" for b in config.budgets])
    ax.set_xlabel("budget per task (USD)")
    ax.set_ylabel("success rate (%)")
    ax.set_ylim(-5, 105)
    ax.set_title(f"Success vs budget ({config.worker}; bars: 95% bootstrap CI over tasks)")
    ax.grid(alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _plot_costs(records: Sequence[EpisodeRecord], path: Path) -> Path:
    plt = _pyplot()
    groups = _by_strategy(records)
    names = list(groups)
    parts = [
        ("uncached input", lambda m: m.cost.uncached_input_usd),
        ("cached input", lambda m: m.cost.cached_input_usd),
        ("output", lambda m: m.cost.output_usd),
    ]
    fig, ax = plt.subplots(figsize=(8, 4.8))
    bottoms = [0.0] * len(names)
    for label, value in parts:
        heights = [_metric(groups[n], value) for n in names]
        ax.bar(names, heights, bottom=bottoms, label=label)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    summary = [_metric(groups[n], lambda m: m.cost.summary_usd) for n in names]
    ax.bar(
        names,
        summary,
        width=0.4,
        fill=False,
        hatch="//",
        edgecolor="black",
        label="of which: writing summaries",
    )
    ax.set_ylabel("mean cost per episode (USD)")
    ax.set_title("Cost breakdown per strategy (full-budget run)")
    ax.tick_params(axis="x", labelrotation=20)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _plot_context(records: Sequence[EpisodeRecord], out: Path, path: Path) -> Path:
    """One episode per strategy, all of the same task and seed (the first one every strategy
    ran), context tokens at each model call; markers at the calls that led to a compaction."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    groups = _by_strategy(records)
    shared = set.intersection(
        *({(r.instance_id, r.seed) for r in g if r.trajectory} for g in groups.values())
    )
    fig, ax = plt.subplots(figsize=(8, 4.8))
    if shared:
        instance_id, seed = min(shared)
        marked: set[str] = set()
        for strategy, group in groups.items():
            record = next(r for r in group if (r.instance_id, r.seed) == (instance_id, seed))
            calls = Trajectory.read(safe_child(out, str(record.trajectory))).model_calls()
            tokens = {c.step: c.context_tokens for c in calls}
            (line,) = ax.plot(list(tokens), list(tokens.values()), label=strategy)
            for c in record.metrics.compactions if record.metrics else []:
                ax.scatter(
                    [c.step],
                    [tokens.get(c.step, c.tokens_before)],
                    marker=KIND_MARKERS[c.kind],
                    s=70,
                    color=line.get_color(),
                    edgecolors="black",
                    zorder=3,
                    label=f"({c.kind})" if c.kind not in marked else None,
                )
                marked.add(c.kind)
        ax.set_title(f"Context over steps: {instance_id}, seed {seed}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("model call (step)")
    ax.set_ylabel("context tokens at the call")
    ax.grid(alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
