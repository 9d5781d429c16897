"""The timing rules of ``ac_env.compaction.when``: each rule on moments, the spec names, and
the rules at work in the real env (forced fallback, reference agent, timing env)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.reference import ReferenceAgent, Rubric
from ac_env.compaction import when
from ac_env.compaction.when import (
    RULES,
    AfterPassingTests,
    Every,
    Moment,
    Never,
    TimingRule,
    TokenThreshold,
    timing_rule,
)
from ac_env.pytest_log import summarize_pytest_output
from ac_env.timing import COMPACT, CONTINUE, TimingEnv
from ac_env.timing.rules import decide_by


def moment(*messages: tuple[str, str], tokens: int = 100, turns: int = 1) -> Moment:
    return Moment(tuple({"role": r, "content": c} for r, c in messages), tokens, turns)


def pytest_output(tmp_path: Path, body: str) -> str:
    """What a real pytest run prints for a test file holding ``body``."""
    (tmp_path / "test_it.py").write_text(body)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_it.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    return f"[exit code {done.returncode}]\n{done.stdout}"


def test_every_rule_module_is_found_by_its_name():
    modules = {p.stem for p in Path(when.__file__).parent.glob("*.py")} - {"__init__", "moment"}
    assert set(RULES) == modules
    for name, rule in RULES.items():
        made = rule() if name in ("never", "after_passing_tests") else rule(3)
        assert isinstance(made, TimingRule) and made.name.split(":")[0] == name
        assert made.description


def test_specs_name_a_rule_and_its_argument():
    assert timing_rule("every:5") == Every(5)
    assert timing_rule("threshold:16384") == TokenThreshold(16384)
    assert (
        timing_rule("never") == Never()
        and timing_rule("after_passing_tests") == AfterPassingTests()
    )
    for bad, says in [
        ("sometimes", "unknown rule 'sometimes'"),
        ("every", "missing"),
        ("every:x", "invalid literal"),
        ("threshold:0", "must be positive"),
    ]:
        with pytest.raises(ValueError, match=says):
            timing_rule(bad)


def test_never_every_and_threshold_on_moments():
    assert not Never()(moment(turns=99, tokens=10**6))
    assert [Every(3)(moment(turns=t)) for t in (0, 2, 3, 4)] == [False, False, True, True]
    # strictly more than the threshold, as the env's forced fallback has always counted
    assert [TokenThreshold(500)(moment(tokens=t)) for t in (499, 500, 501)] == [False, False, True]


def test_after_passing_tests_reads_a_real_pytest_run(tmp_path):
    passing = pytest_output(tmp_path, "def test_a():\n    assert True\n")
    failing = pytest_output(tmp_path, "def test_a():\n    assert False\n")
    assert summarize_pytest_output(passing).all_passed
    run = ("assistant", "```bash\npython -m pytest -q\n```")
    rule = AfterPassingTests()
    assert rule(moment(run, ("user", passing)))
    assert not rule(moment(run, ("user", failing)))
    assert not rule(moment(run, ("user", passing), turns=0))  # just compacted
    assert not rule(moment(("assistant", "```bash\ncat log\n```"), ("user", passing)))
    assert not rule(moment(run, ("user", passing), ("assistant", "ls")))  # not answered yet


def test_moment_of_messages_counts_turns_since_the_summary():
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "o"},
    ]
    assert Moment.of_messages(messages).turns_since_compaction == 1
    summary = {"role": "user", "content": "# Auto Context Summary\n..."}
    after = [*messages[:2], summary, {"role": "assistant", "content": "b"}]
    assert Moment.of_messages(after).turns_since_compaction == 1
    assert Moment.of_messages([*messages[:2], summary]).turns_since_compaction == 0
    assert Moment.of_messages(after).tokens > Moment.of_messages(after[:2]).tokens


def test_the_reference_agent_takes_any_rule_or_its_own_phase_rules():
    assert ReferenceAgent("every:4").rule == Every(4)
    assert ReferenceAgent(AfterPassingTests()).rule == AfterPassingTests()
    assert ReferenceAgent("rubric").rule == Rubric()
    with pytest.raises(ValueError, match="compact_when: .*known: .*after_locate"):
        ReferenceAgent("sometimes")


def make_env(task_file: Path, **kwargs: object) -> gym.Env:
    return gym.make("AutoCompact-SWE-v0", task_source=str(task_file), split=None, **kwargs)


def test_the_reference_agent_compacts_after_each_passing_test_run(tiny_task_file):
    env = make_env(tiny_task_file, forced_compaction_threshold=None)
    agent = ReferenceAgent("after_passing_tests")
    obs, _ = env.reset(options={"task_id": "tiny-calc-1"})
    done, reward = False, 0.0
    while not done:
        obs, reward, terminated, truncated, _ = env.step(agent.act(obs))
        done = terminated or truncated
    trajectory = env.unwrapped.trajectory
    env.close()
    events = trajectory.compactions()
    assert events and all(e.trigger == "proactive" for e in events)
    results = trajectory.tool_results()
    for event in events:
        before = [r for r in results if r.step < event.step][-1]
        assert "pytest" in before.command and summarize_pytest_output(before.output).all_passed
    passing_runs = [
        r for r in results if "pytest" in r.command and summarize_pytest_output(r.output).all_passed
    ]
    assert len(events) == len(passing_runs)
    assert reward == 1.0


def test_the_forced_fallback_asks_exactly_when_its_rule_holds_at_the_env_moment(tiny_task_file):
    env = make_env(tiny_task_file, forced_compaction_threshold=1400)
    agent, rule = ReferenceAgent(), TokenThreshold(1400)
    obs, _ = env.reset(options={"task_id": "tiny-calc-1"})
    asked = []
    while True:
        obs, _, terminated, truncated, info = env.step(agent.act(obs))
        if terminated or truncated:
            break
        asked.append(info["compaction_requested"])
        assert info["compaction_requested"] == rule(env.unwrapped.moment())
    env.close()
    assert True in asked and False in asked


def test_the_timing_env_decides_by_any_rule(tiny_task_file):
    inner = {"task_source": str(tiny_task_file), "split": None, "forced_compaction_threshold": None}
    env = TimingEnv(env_kwargs=inner)
    decide = decide_by(Every(2))
    obs, _ = env.reset(options={"task_id": "tiny-calc-1"})
    actions = []
    while True:
        action = decide(env, obs)
        actions.append(action)
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    compactions = env.inner.trajectory.compactions()
    env.close()
    assert COMPACT in actions and CONTINUE in actions
    assert len(compactions) == actions.count(COMPACT)
