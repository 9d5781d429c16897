"""Episode metrics and their aggregates, on hand-built trajectories."""

from __future__ import annotations

import math

import pytest

from ac_env.analysis.metrics import episode_metrics, root_cause_step
from ac_env.analysis.stats import bootstrap_mean
from ac_env.cost import CallCost, Pricing
from ac_env.tasks.model import GroundTruth, Task
from ac_env.trajectory import (
    CompactionEvent,
    EpisodeEnd,
    ModelCall,
    ToolResult,
    Trajectory,
    TrajectoryHeader,
)

PRICING = Pricing.flat(input_per_mtok=1.0, output_per_mtok=2.0)  # cached: 0.2
TASK = Task(
    instance_id="t-1",
    repo="r",
    problem_statement="p",
    patch="",
    FAIL_TO_PASS=["tests/test_a.py::test_a"],
    PASS_TO_PASS=[],
    ground_truth=GroundTruth(files=["pkg/core.py"], functions=["pkg.core:f"]),
)


def call(step: int, kind: str, context: int, uncached: int, cached: int, output: int, **kw):
    return ModelCall(
        step=step,
        segment=kw.pop("segment", 0),
        messages=[{"role": "system", "content": "s"}],
        message_kinds=["system"],
        output="x",
        action={"kind": kind},
        context_tokens=context,
        cost=CallCost(input_uncached=uncached, input_cached=cached, output=output),
        **kw,
    )


def tool(step: int, command: str) -> ToolResult:
    return ToolResult(
        step=step,
        command=command,
        output="",
        exit_code=0,
        timed_out=False,
        truncated=False,
        duration_s=0.1,
    )


def compaction(step: int, trigger: str, before: int, segment: int) -> CompactionEvent:
    return CompactionEvent(
        step=step,
        trigger=trigger,
        summarizer="policy" if trigger != "masking" else "none",
        summary="",
        rewrite_from=2,
        segment_before=segment - 1,
        segment_after=segment,
        tokens_before=before,
        tokens_after=100,
        kept_messages=0,
    )


def episode() -> Trajectory:
    """grep (step 0), a proactive summary (1, before the root cause is read), reading the
    root-cause file (2), a skipped summary (3), a forced summary (4), submit (5)."""
    t = Trajectory(TrajectoryHeader(instance_id="t-1", split="easy"))
    events = [
        call(0, "bash", 1000, 1000, 0, 100),
        tool(0, "grep -rn 'def f' pkg"),
        call(1, "compact", 2000, 1000, 1000, 300),
        compaction(1, "proactive", 2000, 1),
        call(2, "bash", 400, 400, 0, 50, segment=1),
        tool(2, "cat -n pkg/core.py | sed -n '1,20p'"),
        call(3, "compact", 3000, 2600, 400, 200, segment=1),
        call(4, "compact", 5000, 0, 5000, 200, segment=1, forced_compaction_request=True),
        compaction(4, "forced", 5000, 2),
        call(5, "submit", 500, 500, 0, 10, segment=2),
        EpisodeEnd(
            step=6,
            exit_reason="submitted",
            submitted=True,
            reward=1.0,
            resolved=True,
            infra_error=None,
            patch="",
            tests={},
            cost=CallCost(),
        ),
    ]
    for event in events:
        t.append(event)
    return t


def test_episode_metrics_from_a_hand_built_trajectory():
    m = episode_metrics(episode(), TASK, PRICING, context_window=10_000)
    assert m.success and m.steps == 6 and m.exit_reason == "submitted"
    uncached, cached, output = 5500, 6400, 860
    assert m.cost.uncached_input_usd == pytest.approx(uncached * 1.0 / 1e6)
    assert m.cost.cached_input_usd == pytest.approx(cached * 0.2 / 1e6)
    assert m.cost.output_usd == pytest.approx(output * 2.0 / 1e6)
    summary_calls = (1000 + 1000 * 0.2 + 600) + (2600 + 400 * 0.2 + 400) + (5000 * 0.2 + 400)
    assert m.cost.summary_usd == pytest.approx(summary_calls / 1e6)
    assert m.cost.summary_output_usd == pytest.approx((300 + 200 + 200) * 2.0 / 1e6)
    assert m.cache_hit_rate == pytest.approx(cached / (cached + uncached))
    assert m.peak_context_tokens == 5000
    assert m.mean_context_tokens == pytest.approx((1000 + 2000 + 400 + 3000 + 5000 + 500) / 6)
    assert m.root_cause_step == 2
    assert [(c.step, c.kind, c.phase) for c in m.compactions] == [
        (1, "proactive", "before_root_cause"),
        (3, "skipped", "after_root_cause"),
        (4, "forced", "after_root_cause"),
    ]
    assert m.compactions[2].occupancy == pytest.approx(0.5)
    assert (m.count("proactive"), m.count("forced"), m.count("skipped")) == (1, 1, 1)


def test_an_invalid_answer_to_a_summary_request_is_summary_writing_cost():
    """The env asked for a summary (the prompt ends with its request); the answer was not a
    valid summary (a format error: the fallback summarizer wrote it), yet it was paid for
    writing one. A call that is no summary and answers no request is not counted."""
    t = episode()
    asked = call(2, "format_error", 400, 400, 0, 50, segment=1).model_copy(
        update={
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "?"}],
            "message_kinds": ["system", "compaction_request"],
        }
    )
    t.events[4] = asked
    m = episode_metrics(t, TASK, PRICING, context_window=10_000)
    assert m.cost.summary_output_usd == pytest.approx((300 + 50 + 200 + 200) * 2.0 / 1e6)
    summary_calls = (1000 + 1000 * 0.2 + 600) + (400 + 100) + (2600 + 400 * 0.2 + 400)
    summary_calls += 5000 * 0.2 + 400
    assert m.cost.summary_usd == pytest.approx(summary_calls / 1e6)


def test_a_failed_episode_and_unknown_phase():
    t = episode()
    t.events[-1] = t.events[-1].model_copy(update={"reward": 0.0, "exit_reason": "budget"})
    no_truth = TASK.model_copy(update={"ground_truth": None})
    m = episode_metrics(t, no_truth, PRICING, context_window=10_000)
    assert not m.success and m.exit_reason == "budget"
    assert m.root_cause_step is None
    assert {c.phase for c in m.compactions} == {"unknown"}


def test_root_cause_needs_the_file_shown_not_mentioned():
    assert root_cause_step([tool(0, "grep -rn core pkg/core.py")], TASK) is None
    ranking = tool(2, "python3 locate.py").model_copy(update={"output": "pkg/core.py:3 in f"})
    assert root_cause_step([ranking], TASK) == 2  # a ranking that names file and function
    other = ranking.model_copy(update={"output": "pkg/core.py:3 in g"})
    assert root_cause_step([other], TASK) is None
    assert root_cause_step([tool(3, "sed -n '1,9p' pkg/core.py")], TASK) == 3
    commented = "# read: pkg/core.py f lines 1-9\ncat -n pkg/core.py | sed -n '1,9p'"
    assert root_cause_step([tool(4, commented)], TASK) == 4


def test_bootstrap_means_per_task_then_over_tasks():
    # three tasks, two seeds each: task means 1.0, 0.5, 0.0
    estimate = bootstrap_mean([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    assert estimate.mean == pytest.approx(0.5) and estimate.n == 3
    assert 0.0 <= estimate.low < 0.5 < estimate.high <= 1.0
    same = bootstrap_mean([[0.25], [0.25], [0.25, 0.25]])
    assert (same.low, same.mean, same.high) == pytest.approx((0.25, 0.25, 0.25))
    empty = bootstrap_mean([[], []])
    assert empty.n == 0 and math.isnan(empty.mean)


def test_a_compaction_breaks_even_when_the_saved_reads_cover_its_extra_cost():
    m = episode_metrics(episode(), TASK, PRICING, context_window=10_000)
    first, forced = m.paybacks
    # step 1: the summary call (1000 uncached, 1000 cached, 300 out); tokens 2000 -> 100
    assert first.writing_usd == pytest.approx((1000 + 1000 * 0.2 + 300 * 2) / 1e6)
    assert first.cache_miss_usd == pytest.approx(100 * (1.0 - 0.2) / 1e6)
    assert first.saving_per_step_usd == pytest.approx(1900 * 0.2 / 1e6)
    assert first.break_even_steps == pytest.approx((1800 + 80) / 380)
    assert first.later_steps == 4 and not first.paid_off
    # step 4: the skipped summary (3) and the requested one (4) are both its writing cost
    writing = (2600 + 400 * 0.2 + 200 * 2) + (5000 * 0.2 + 200 * 2)
    assert forced.writing_usd == pytest.approx(writing / 1e6)
    assert forced.saving_per_step_usd == pytest.approx(4900 * 0.2 / 1e6)
    assert forced.later_steps == 1 and forced.break_even_steps > 1 and not forced.paid_off
    cheap = forced.model_copy(update={"writing_usd": 0.0, "cache_miss_usd": 0.0})
    assert cheap.break_even_steps == 0 and cheap.paid_off


def test_a_compaction_cut_by_the_end_of_the_episode_is_not_counted_as_skipped():
    t = episode()
    last = call(5, "compact", 600, 100, 500, 200, segment=2)  # the budget ran out on this call
    t.events[-2] = last
    t.events[-1] = t.events[-1].model_copy(update={"reward": 0.0, "exit_reason": "budget"})
    m = episode_metrics(t, TASK, PRICING, context_window=10_000)
    assert [(c.step, c.kind) for c in m.compactions] == [
        (1, "proactive"),
        (3, "skipped"),
        (4, "forced"),
    ]
    submitted = t.events[-1].model_copy(update={"exit_reason": "submitted"})
    t.events[-1] = submitted  # not cut: an unapplied summary on the last call was skipped
    assert episode_metrics(t, TASK, PRICING, context_window=10_000).count("skipped") == 2
