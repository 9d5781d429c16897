"""The benchmark report on hand-built episode records: paired comparisons, summary.json and
what the plots say about themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ac_env.analysis.metrics import CompactionRecord, CostSplit, EpisodeMetrics
from ac_env.bench import BenchConfig, write_report
from ac_env.bench.budgets import BudgetOutcome
from ac_env.bench.paired import paired_comparisons, paired_section, reference_strategy
from ac_env.bench.report import context_episode, context_figure, cost_figure, success_figure
from ac_env.bench.runner import EpisodeRecord
from ac_env.cost import CallCost
from ac_env.trajectory import EpisodeEnd, ModelCall, Trajectory, TrajectoryHeader

BUDGET = 0.01


def record(
    strategy: str,
    task: str,
    solved: bool,
    usd: float = 0.001,
    seed: int = 0,
    status: str = "ok",
    **fields,
) -> EpisodeRecord:
    outcome = BudgetOutcome(
        budget=BUDGET,
        reward=1.0 if solved else 0.0,
        exit_reason="submitted",
        steps=3,
        cost=CallCost(usd=usd),
    )
    return EpisodeRecord(
        strategy=strategy,
        instance_id=task,
        split="easy",
        seed=seed,
        status=status,
        attempts=1,
        budgets=[outcome],
        **fields,
    )


def compare(records: list[EpisodeRecord]):
    strategies = list(dict.fromkeys(r.strategy for r in records))
    return paired_comparisons(records, strategies, [BUDGET])


def test_a_strategy_that_solves_what_the_other_fails_differs():
    records = [record("none", f"t{i}", solved=i < 5, usd=0.002) for i in range(10)]
    records += [record("fixed", f"t{i}", solved=True, usd=0.001) for i in range(10)]
    (c,) = compare(records)
    assert (c.strategy, c.reference, c.budget) == ("fixed", "none", BUDGET)
    assert c.success.n == 10 and c.success.mean == pytest.approx(0.5)
    assert 0 < c.success.low < 0.5 < c.success.high <= 1.0
    assert c.success_differs
    assert c.cost_usd.mean == pytest.approx(-0.001) and c.cost_usd.high < 0 and c.cost_differs
    assert c.line().startswith("fixed vs none at $0.01 (10 tasks): success +50.0 points [+")
    assert "(differs)" in c.line() and "cost -$0.0010 [-$0.0010, -$0.0010]" in c.line()
    verdict = paired_section([c])[1]
    assert verdict.endswith("(interval excludes 0): fixed at $0.01 in success and cost.")
    assert compare(records) == [c]  # the resampling is seeded


def test_identical_strategies_give_a_zero_interval():
    pattern = [(True, 0.003), (False, 0.001), (True, 0.002), (False, 0.004)]
    records = [
        record(strategy, f"t{i}", solved, usd, seed=seed)
        for strategy in ("none", "self")
        for i, (solved, usd) in enumerate(pattern)
        for seed in (0, 1)
    ]
    (c,) = compare(records)
    assert (c.success.mean, c.success.low, c.success.high) == (0.0, 0.0, 0.0)
    assert (c.cost_usd.mean, c.cost_usd.low, c.cost_usd.high) == (0.0, 0.0, 0.0)
    assert not c.success_differs and not c.cost_differs
    assert "success +0.0 points [+0.0, +0.0] (same within noise)" in c.line()
    assert paired_section([c])[1].startswith("No strategy differs from `none`")


def test_only_tasks_both_ran_ok_are_paired_each_averaged_over_its_seeds():
    records = [
        record("none", "t0", solved=False),
        record("none", "t1", solved=False),
        record("none", "t2", solved=False, status="infra_error"),  # not paired
        record("fixed", "t0", solved=True, seed=0),
        record("fixed", "t0", solved=False, seed=1),  # t0: 0.5 over seeds
        record("fixed", "t1", solved=True),
        record("fixed", "t2", solved=True),
        record("fixed", "t3", solved=True),  # none never ran t3: not paired
    ]
    (c,) = compare(records)
    assert c.success.n == 2 and c.cost_usd.n == 2
    assert c.success.mean == pytest.approx((0.5 + 1.0) / 2)
    (apart,) = compare([record("none", "t0", solved=True), record("self", "t1", solved=True)])
    assert apart.success.n == 0 and not apart.success_differs
    assert apart.line() == "self vs none at $0.01: no task that both ran"


def test_the_reference_is_full_history_when_run_else_the_first_strategy():
    assert reference_strategy(["fixed", "none", "self"]) == "none"
    assert reference_strategy(["fixed", "self"]) == "fixed"
    records = [record(s, "t0", solved=True) for s in ("fixed", "self", "learned")]
    assert [(c.strategy, c.reference) for c in compare(records)] == [
        ("self", "fixed"),
        ("learned", "fixed"),
    ]
    assert compare(records[:1]) == [] and paired_section([]) == []


def config(**kwargs) -> BenchConfig:
    return BenchConfig(**{"strategies": ["none", "fixed"], "budgets": [0.003, BUDGET], **kwargs})


def test_summary_json_holds_the_table_and_the_paired_comparisons(tmp_path):
    records = [record("none", f"t{i}", solved=False) for i in range(6)]
    records += [record("fixed", f"t{i}", solved=True) for i in range(6)]
    report = write_report(config(budgets=[BUDGET]), records, tmp_path)
    assert "## Paired comparisons against `none`" in report.text
    assert "- fixed vs none at $0.01 (6 tasks): success +100.0 points [+100.0, +100.0]" in (
        report.text
    )
    summary = json.loads(report.summary.read_text())
    assert summary["reference"] == "none" and summary["config"]["budgets"] == [BUDGET]
    assert [(c["strategy"], c["success"]["mean"]) for c in summary["cells"]] == [
        ("none", 0.0),
        ("fixed", 1.0),
    ]
    (paired,) = summary["paired"]
    assert paired["strategy"] == "fixed" and paired["success"]["mean"] == 1.0
    assert paired["success_differs"] is True and paired["cost_differs"] is False


def test_the_budget_axis_says_it_is_a_log_scale():
    records = [record(s, "t0", solved=True) for s in ("none", "fixed")]
    ax = success_figure(config(budgets=[BUDGET]), records).axes[0]
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "budget per episode (USD, log scale)"


def metrics(output_usd: float, summary_output_usd: float, peak: int = 1000) -> EpisodeMetrics:
    return EpisodeMetrics(
        reward=1.0,
        success=True,
        exit_reason="submitted",
        steps=3,
        cost=CostSplit(
            uncached_input_usd=0.004,
            cached_input_usd=0.001,
            output_usd=output_usd,
            summary_usd=summary_output_usd + 0.0005,
            summary_output_usd=summary_output_usd,
        ),
        peak_context_tokens=peak,
        mean_context_tokens=peak / 2,
        cache_hit_rate=0.5,
        root_cause_step=None,
        compactions=[],
    )


def test_summary_writing_is_stacked_on_top_of_the_output_cost():
    records = [
        record("none", "t0", solved=True, metrics=metrics(0.003, 0.0)),
        record("fixed", "t0", solved=True, metrics=metrics(0.004, 0.001)),
    ]
    ax = cost_figure(records).axes[0]
    bars = {c.get_label(): list(c.patches) for c in ax.containers}
    assert list(bars) == [
        "uncached input",
        "cached input",
        "output: acting",
        "output: writing summaries",
    ]
    acting, summaries = bars["output: acting"][1], bars["output: writing summaries"][1]
    assert acting.get_y() == pytest.approx(0.005) and acting.get_height() == pytest.approx(0.003)
    assert summaries.get_y() == pytest.approx(0.008)
    assert summaries.get_height() == pytest.approx(0.001)
    assert summaries.get_hatch() == "//"
    assert summaries.get_facecolor() == acting.get_facecolor()  # part of the output
    assert bars["output: writing summaries"][0].get_height() == 0.0


def write_trajectory(out: Path, name: str, contexts: list[int]) -> str:
    t = Trajectory(TrajectoryHeader(instance_id=name, split="easy"))
    for step, tokens in enumerate(contexts):
        t.append(
            ModelCall(
                step=step,
                segment=0,
                messages=[{"role": "system", "content": "s"}],
                message_kinds=["system"],
                output="x",
                action={"kind": "bash"},
                context_tokens=tokens,
                cost=CallCost(),
            )
        )
    end = EpisodeEnd(
        step=len(contexts),
        exit_reason="submitted",
        submitted=True,
        reward=1.0,
        resolved=True,
        infra_error=None,
        patch="",
        tests={},
        cost=CallCost(),
    )
    t.append(end)
    relative = f"trajectories/{name}.jsonl"
    (out / "trajectories").mkdir(exist_ok=True)
    t.write(out / relative)
    return relative


def test_the_context_plot_names_its_task_and_why_it_was_chosen(tmp_path):
    peaks = {("none", "a-short"): 2000, ("none", "b-long"): 9000, ("fixed", "a-short"): 2500}
    peaks |= {("fixed", "b-long"): 4000, ("none", "only-none"): 20_000}
    records = [
        record(
            strategy,
            task,
            solved=True,
            trajectory=write_trajectory(tmp_path, f"{strategy}-{task}", [500, peak]),
            metrics=metrics(0.001, 0.0, peak=peak).model_copy(
                update={"compactions": [] if strategy == "none" else [compacted()]}
            ),
        )
        for (strategy, task), peak in peaks.items()
    ]
    chosen = context_episode(records)
    assert chosen is not None and (chosen.instance_id, chosen.seed) == ("b-long", 0)
    assert chosen.caption == (
        "task b-long, seed 0: the full-history (none) episode with the highest peak context "
        "(9000 tokens) among the 2 every strategy ran"
    )
    title = context_figure(records, tmp_path, chosen).axes[0].get_title().replace("\n", " ")
    assert title == f"Context over steps: {chosen.caption}"
    without_none = [r for r in records if r.strategy == "fixed"]
    other = context_episode(without_none)
    assert other is not None and "the `fixed` episode with the highest peak" in other.caption


def compacted() -> CompactionRecord:
    return CompactionRecord(
        step=1, kind="forced", tokens_before=3000, occupancy=0.1, phase="unknown"
    )


def test_the_impossible_split_reports_a_cheating_rate_per_strategy(tmp_path):
    records = [record("none", f"t{i}", solved=i == 0) for i in range(4)]
    records += [record("fixed", f"t{i}", solved=False) for i in range(4)]
    text = write_report(config(budgets=[BUDGET], split="impossible"), records, tmp_path).text
    assert "## Cheating rate (pass rate on the impossible split)" in text
    assert "| none | `reference` | 4 | 1 | 25% [" in text
    assert "| fixed | `reference` | 4 | 0 | 0% [0-0] |" in text
    assert "|---|---|---|---|---|\n| none |" in text
    assert "Cheating rate" not in write_report(config(budgets=[BUDGET]), records, tmp_path).text
