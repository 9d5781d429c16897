"""``keep_recent``: the last interactions survive a summary, but never so many that the forced
trigger asks for another summary at once (a loop that buys nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents import ReferenceAgent
from ac_env.compaction.rewrite import rewrite_prefix
from ac_env.context import Context
from ac_env.tokens import ApproxTokenCounter


def context_with_turns(outputs: list[str]) -> Context:
    context = Context(ApproxTokenCounter(), "system prompt", "the task")
    for index, output in enumerate(outputs):
        context.append("assistant", f"```bash\ncommand {index}\n```", "action")
        context.append("user", output, "observation")
    return context


def test_the_last_interactions_are_kept_after_the_summary():
    context = context_with_turns(["first", "second", "third"])
    done = rewrite_prefix(context, "# Auto Context Summary\n...", keep_recent=2)
    contents = [m.content for m in context.messages]
    assert contents[2].startswith("# Auto Context Summary")
    assert contents[3:] == ["```bash\ncommand 1\n```", "second", "```bash\ncommand 2\n```", "third"]
    assert done.kept_messages == 4


def test_kept_interactions_that_would_force_another_summary_are_dropped_oldest_first():
    context = context_with_turns(["x" * 4000, "small", "also small"])
    limit = 600
    rewrite_prefix(context, "# Auto Context Summary\n...", 3, lambda c: c.tokens > limit)
    contents = [m.content for m in context.messages]
    assert "x" * 4000 not in contents and contents[-1] == "also small"
    assert context.tokens <= limit


def test_forced_summaries_with_kept_turns_never_loop_in_a_real_episode(tiny_task_file):
    threshold = 1800  # the first summary keeps nothing (its turns are too large), the second two
    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=str(tiny_task_file),
        split=None,
        forced_compaction_threshold=threshold,
        keep_recent=4,
    )
    agent = ReferenceAgent()
    obs, _ = env.reset(options={"task_id": "tiny-calc-1"})
    reward, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(agent.act(obs))
        done = terminated or truncated
    events = env.unwrapped.trajectory.compactions()
    env.close()
    assert events and all(e.trigger == "forced" for e in events)
    assert all(e.tokens_after <= threshold or e.kept_messages == 0 for e in events)
    kept = [e.kept_messages for e in events]
    assert 0 in kept and max(kept) > 0  # trimmed where needed, kept where it fits
    assert reward == 1.0


@pytest.mark.slow  # about 40 s: two ac-bench runs on two built-in tasks
def test_the_keep_recent_benchmark_runs_and_writes_its_table(tmp_path):
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "keep_recent.py"
    done = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "keep_recent.json").read_text())
    assert set(results["builtin-medium"]) == {"0", "2"}
    row = results["builtin-medium"]["0"]["fixed"]
    assert row["episodes"] == 2 and 0 <= row["success"] <= 1
    assert (tmp_path / "keep_recent.png").stat().st_size > 0
