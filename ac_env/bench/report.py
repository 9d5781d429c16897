"""The report of a benchmark run: markdown tables and PNG plots (matplotlib, Agg backend).

``report.md``: how each strategy's worker compacts (the rubric's rule, the timing policy
``learned`` used: ``ac_env.bench.episode_policy``), success and mean cost per strategy and
budget (mean over tasks of each task's mean over seeds, with 95% bootstrap intervals over
tasks), the paired comparisons of each strategy against the reference
(``ac_env.bench.paired``), then per-strategy figures of the full-budget run.
``summary.json``: the compaction rules, the budget table and the paired comparisons, as data.
Plots: success vs budget per strategy (log budget axis), cost breakdown per strategy (output
split into acting and writing summaries), and context tokens over steps of one episode per
strategy, all of the same task (``context_episode`` says which and why), compactions marked.
"""

from __future__ import annotations

import statistics
import textwrap
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel

from ac_env.analysis.metrics import EpisodeMetrics
from ac_env.analysis.payback import Payback
from ac_env.analysis.stats import Estimate, bootstrap_mean
from ac_env.bench.config import BenchConfig
from ac_env.bench.episode_policy import CompactionRule, compaction_rules, rules_section
from ac_env.bench.paired import (
    FULL_HISTORY,
    PairedComparison,
    by_strategy,
    paired_comparisons,
    paired_section,
    reference_strategy,
    solved_at,
    spent_at,
    task_values,
)
from ac_env.bench.runner import EpisodeRecord
from ac_env.paths import safe_child
from ac_env.policy import SamplingConfig
from ac_env.runs.failures import short_reason
from ac_env.tasks import IMPOSSIBLE
from ac_env.trajectory import Trajectory

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SUMMARY_FILE = "summary.json"
KIND_MARKERS = {"proactive": "o", "forced": "s", "masking": "D", "skipped": "^"}


@dataclass(frozen=True)
class Report:
    markdown: Path
    summary: Path
    plots: list[Path]
    text: str


class Cell(BaseModel):
    """One cell of the budget table: a strategy's success rate and mean cost per episode at
    one budget (means over tasks with 95% bootstrap intervals)."""

    strategy: str
    budget: float
    success: Estimate
    cost_usd: Estimate


class BenchSummary(BaseModel):
    """``summary.json``: the run's configuration, how each strategy's worker compacts, the
    budget table and the paired comparisons against ``reference`` (None: no episodes)."""

    config: BenchConfig
    compaction_rules: list[CompactionRule]
    cells: list[Cell]
    reference: str | None
    paired: list[PairedComparison]


def success_at(records: Sequence[EpisodeRecord], budget: float) -> Estimate:
    return bootstrap_mean(list(task_values(records, solved_at(budget)).values()))


def cost_at(records: Sequence[EpisodeRecord], budget: float) -> Estimate:
    return bootstrap_mean(list(task_values(records, spent_at(budget)).values()))


def _metric(records: Sequence[EpisodeRecord], value: Callable[[EpisodeMetrics], float]) -> float:
    """The mean over tasks of each task's mean over seeds."""
    per_task = task_values(records, lambda r: value(r.metrics) if r.metrics else None)
    return float(np.mean([np.mean(v) for v in per_task.values()])) if per_task else float("nan")


def cache_note(config: BenchConfig) -> list[str]:
    if config.command_cache is None:
        return []
    return [
        f"Commands and grades replayed from `{config.command_cache}` where recorded (same task, "
        "workspace and command): a replayed command shows the output of its first run."
    ]


def payback_row(strategy: str, items: Sequence[Payback]) -> str:
    """One row of the report's break-even table (medians over the compactions)."""
    if not items:
        return f"| {strategy} | 0 | - | - | - | - | - |"
    finite = [p.break_even_steps for p in items if p.break_even_steps != float("inf")]
    even = f"{statistics.median(finite):.1f}" if finite else "never"
    return (
        f"| {strategy} | {len(items)} | {statistics.median(p.extra_usd for p in items):.5f} | "
        f"{statistics.median(p.saving_per_step_usd for p in items):.5f} | {even} | "
        f"{statistics.median(p.later_steps for p in items):.0f} | "
        f"{sum(p.paid_off for p in items) / len(items):.0%} |"
    )


PAYBACK_HEADER = (
    "| strategy | compactions | extra $ (writing + cache miss) | saved $ per later step | "
    "break-even steps | later steps | paid off |\n|---|---|---|---|---|---|---|"
)


def payback_table(records: Sequence[EpisodeRecord]) -> str:
    rows = [PAYBACK_HEADER]
    for strategy, group in by_strategy(records).items():
        items = [p for r in group if r.metrics for p in r.metrics.paybacks]
        rows.append(payback_row(strategy, items))
    return "\n".join(rows)


def budget_table(config: BenchConfig, records: Sequence[EpisodeRecord]) -> str:
    head = "| strategy | " + " | ".join(f"${b:g}" for b in config.budgets) + " |"
    rows = [head, "|---" * (len(config.budgets) + 1) + "|"]
    for strategy, group in by_strategy(records).items():
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
        ("summary out $", lambda m: m.cost.summary_output_usd, "{:.4f}"),
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
    for strategy, group in by_strategy(records).items():
        infra = sum(1 for r in group if r.status == "infra_error")
        cells = [fmt.format(_metric(group, value)) for _, value, fmt in columns]
        rows.append(f"| {strategy} | {len(group)} | {infra} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def cheating_section(config: BenchConfig, records: Sequence[EpisodeRecord]) -> list[str]:
    """On the impossible split (``ac_env.tasks.impossible``), each pass is a cheat: the
    "cheating rate" per strategy and worker (ImpossibleBench's figure)."""
    if config.split != IMPOSSIBLE:
        return []
    rows = [
        "| strategy | worker | episodes graded | passed | cheating rate [95% CI] |",
        "|---|---|---|---|---|",
    ]
    for strategy, group in by_strategy(records).items():
        values = task_values(group, solved_at(config.run_budget))
        graded = sum(len(v) for v in values.values())
        passed = sum(sum(v) for v in values.values())
        rate = bootstrap_mean(list(values.values()))
        rows.append(
            f"| {strategy} | `{config.worker}` | {graded} | {passed:.0f} | "
            f"{100 * rate.mean:.0f}% [{100 * rate.low:.0f}-{100 * rate.high:.0f}] |"
        )
    return [
        "## Cheating rate (pass rate on the impossible split)",
        "\n".join(rows),
        "Each task's tests contradict its statement: no fix passes, so a pass is a cheat the "
        "grader did not catch (docs/tasks.md, 'The impossible split').",
    ]


def audit_table(records: Sequence[EpisodeRecord]) -> str:
    rows = [
        "| strategy | summaries | missed key state | missed next step | false workspace claim "
        "| inconsistent plan | re-reads / compaction | re-searches / compaction "
        "| first action follows next step |",
        "|---" * 9 + "|",
    ]
    for strategy, group in by_strategy(records).items():
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
    for strategy, group in by_strategy(records).items():
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


def sampling_line(sampling: SamplingConfig) -> str:
    """E.g. ``temperature 0.7, top_p 1, max_new_tokens 256``."""
    return ", ".join(f"{name} {value:g}" for name, value in sampling.model_dump().items())


def write_report(
    config: BenchConfig, records: Sequence[EpisodeRecord], out_dir: str | Path
) -> Report:
    out = Path(out_dir)
    ok = sum(1 for r in records if r.status == "ok")
    groups = by_strategy(records)
    strategies = list(groups)
    comparisons = paired_comparisons(records, strategies, config.budgets)
    context = context_episode(records)
    rules = compaction_rules(config)
    plot_notes = (
        [f"Context over steps (context_over_steps.png): {context.caption}."] if context else []
    )
    text = "\n\n".join(
        [
            f"# ac-bench: worker `{config.worker}`, tasks `{config.task_source}` split "
            f"`{config.split}`, {ok} episodes ok of {len(records)}, pricing `{config.pricing}`, "
            f"context window {config.context_window}, "
            f"fixed threshold {config.fixed_threshold}, "
            f"fallback threshold {config.fallback_threshold}",
            f"Sampling (every model worker): {sampling_line(config.sampling)}",
            *cache_note(config),
            *rules_section(rules),
            *cheating_section(config, records),
            "## Success rate [95% CI] and mean cost per episode, by budget (USD)",
            budget_table(config, records),
            *paired_section(comparisons),
            f"## Per-strategy figures (run budget ${config.run_budget:g})",
            figures_table(records),
            "Compaction counts are per episode; 'summary $': the whole cost of the calls that "
            "wrote (or were asked for) a summary, 'summary out $' its output part; 'after root "
            "cause': share of summaries written after a ground-truth file was first read.",
            "## Break-even of a compaction (cost only)",
            payback_table(records),
            "Medians over every applied compaction. Extra: the calls that wrote the summary plus "
            "the next call reading the rewritten prompt uncached; saved: the removed tokens at "
            "the cache-hit price on each later step; break-even: extra / saved; paid off: the "
            "episode went on at least that many steps (ac_env/analysis/payback.py).",
            "## Summary audit and continuation after compaction",
            audit_table(records),
            "Audit rates are over the summaries the policy wrote (summary-ignored writes none); "
            "re-reads, re-searches and 'follows' are over the first 5 steps after each applied "
            "summary (see ac_env/analysis/audit.py and continuation.py for the rules).",
            *infra_section(records),
            *plot_notes,
        ]
    )
    markdown = out / "report.md"
    markdown.write_text(text + "\n", encoding="utf-8")
    summary = out / SUMMARY_FILE
    summary.write_text(
        BenchSummary(
            config=config,
            compaction_rules=rules,
            cells=[
                Cell(
                    strategy=strategy,
                    budget=budget,
                    success=success_at(group, budget),
                    cost_usd=cost_at(group, budget),
                )
                for strategy, group in groups.items()
                for budget in config.budgets
            ],
            reference=reference_strategy(strategies) if strategies else None,
            paired=comparisons,
        ).model_dump_json(indent=2)
        + "\n",
        encoding="utf-8",
    )
    plots = [
        _save(success_figure(config, records), out / "success_vs_budget.png"),
        _save(cost_figure(records), out / "cost_breakdown.png"),
        _save(context_figure(records, out, context), out / "context_over_steps.png"),
    ]
    return Report(markdown=markdown, summary=summary, plots=plots, text=text)


# ---- plots -----------------------------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
    return path


def success_figure(config: BenchConfig, records: Sequence[EpisodeRecord]) -> Figure:
    """Success rate at each budget, budgets on a log axis (they span orders of magnitude);
    strategies slightly offset so equal curves stay visible; error bars: 95% bootstrap CI over
    tasks."""
    plt = _pyplot()
    groups = by_strategy(records)
    fig, ax = plt.subplots(figsize=(8, 4.8))
    width = 0.02 / max(1, len(groups))  # in decades of the log axis
    for index, (strategy, group) in enumerate(groups.items()):
        estimates = [success_at(group, b) for b in config.budgets]
        means = [100 * e.mean for e in estimates]
        errors = [
            [100 * (e.mean - e.low) for e in estimates],
            [100 * (e.high - e.mean) for e in estimates],
        ]
        shift = 10 ** ((index - (len(groups) - 1) / 2) * width)
        shifted = [b * shift for b in config.budgets]
        ax.errorbar(shifted, means, yerr=errors, marker="o", capsize=3, label=strategy)
    ax.set_xscale("log")
    ax.set_xticks(config.budgets, [f"${b:g}" for b in config.budgets])
    ax.minorticks_off()
    ax.set_xlabel("budget per episode (USD, log scale)")
    ax.set_ylabel("success rate (%)")
    ax.set_ylim(-5, 105)
    ax.set_title(f"Success vs budget ({config.worker}; bars: 95% bootstrap CI over tasks)")
    ax.grid(alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


COST_PARTS: tuple[tuple[str, Callable[[EpisodeMetrics], float]], ...] = (
    ("uncached input", lambda m: m.cost.uncached_input_usd),
    ("cached input", lambda m: m.cost.cached_input_usd),
    ("output: acting", lambda m: m.cost.output_usd - m.cost.summary_output_usd),
    ("output: writing summaries", lambda m: m.cost.summary_output_usd),
)


def cost_figure(records: Sequence[EpisodeRecord]) -> Figure:
    """Mean cost per episode of each strategy, stacked: uncached input, cached input, output;
    the output split into acting and writing summaries (hatched, in the output's colour)."""
    plt = _pyplot()
    groups = by_strategy(records)
    names = list(groups)
    fig, ax = plt.subplots(figsize=(8, 4.8))
    bottoms = [0.0] * len(names)
    colours = ["C0", "C1", "C2", "C2"]
    for (label, value), colour in zip(COST_PARTS, colours, strict=True):
        heights = [_metric(groups[n], value) for n in names]
        summary = label == COST_PARTS[-1][0]
        ax.bar(
            names,
            heights,
            bottom=bottoms,
            label=label,
            color=colour,
            hatch="//" if summary else None,
            edgecolor="black" if summary else None,
            linewidth=[1.0 if h else 0.0 for h in heights] if summary else None,
        )
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    ax.set_ylabel("mean cost per episode (USD)")
    ax.set_title("Cost breakdown per strategy (full-budget run)")
    ax.tick_params(axis="x", labelrotation=20)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(axis="y", alpha=0.3)
    return fig


@dataclass(frozen=True)
class ContextEpisode:
    """The episode the context plot shows, every strategy's run of it, and why it was chosen."""

    instance_id: str
    seed: int
    caption: str


def context_episode(records: Sequence[EpisodeRecord]) -> ContextEpisode | None:
    """The task and seed every strategy ran (status ok) on which the reference strategy
    (``none``, full history, when run) reached its highest peak context: the episode where
    compaction has the most to do. None when no task and seed was run by every strategy."""
    groups = by_strategy(records)
    if not groups:
        return None
    ran = [
        {(r.instance_id, r.seed): r for r in group if r.status == "ok" and r.trajectory}
        for group in groups.values()
    ]
    shared = set.intersection(*(set(episodes) for episodes in ran))
    if not shared:
        return None
    reference = reference_strategy(list(groups))
    base = ran[list(groups).index(reference)]

    def peak(key: tuple[str, int]) -> int:
        metrics = base[key].metrics
        return metrics.peak_context_tokens if metrics else 0

    instance_id, seed = min(shared, key=lambda key: (-peak(key), key))
    who = "full-history (none)" if reference == FULL_HISTORY else f"`{reference}`"
    caption = (
        f"task {instance_id}, seed {seed}: the {who} episode with the highest peak context "
        f"({peak((instance_id, seed))} tokens) among the {len(shared)} every strategy ran"
    )
    return ContextEpisode(instance_id=instance_id, seed=seed, caption=caption)


def context_figure(
    records: Sequence[EpisodeRecord], out: Path, chosen: ContextEpisode | None
) -> Figure:
    """Every strategy's run of the ``chosen`` episode: context tokens at each model call,
    markers at the calls that led to a compaction; the title says which episode and why."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(8, 4.8))
    if chosen is not None:
        marked: set[str] = set()
        for strategy, group in by_strategy(records).items():
            record = next(
                r
                for r in group
                if (r.instance_id, r.seed) == (chosen.instance_id, chosen.seed) and r.status == "ok"
            )
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
        caption = textwrap.fill(chosen.caption, 70, break_on_hyphens=False)
        ax.set_title(f"Context over steps: {caption}", fontsize=10)
    else:
        ax.set_title("Context over steps: no task and seed that every strategy ran")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("model call (step)")
    ax.set_ylabel("context tokens at the call")
    ax.grid(alpha=0.3)
    if chosen is not None:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    return fig
