"""``self`` and ``learned`` for the reference worker in ``ac-bench``: the rubric's rule against
a timing policy file, named in the report; a bad policy file stops the run before it starts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ac_env.bench.cli import main
from ac_env.bench.config import BenchConfig
from ac_env.bench.episode_policy import compaction_rules, run_timing_policy, timing_policy_path
from ac_env.bench.fork import run_fork
from ac_env.bench.runner import run_benchmark
from ac_env.timing.features import FEATURE_INDEX, FEATURE_NAMES
from ac_env.timing.policy_file import DEFAULT_TIMING_POLICY, load_timing_policy, save_timing_policy
from ac_env.trajectory import Trajectory

MAX_STEPS = 50  # BenchConfig's default: the feature steps_since_compaction is turns / 50


def every_five_turns(path: Path) -> Path:
    """A policy that compacts once 5 worker turns have passed since the last compaction."""
    weight = np.zeros((2, len(FEATURE_NAMES)))
    weight[1, FEATURE_INDEX["steps_since_compaction"]] = MAX_STEPS
    return save_timing_policy(
        path,
        [(weight, np.array([0.0, -4.5]))],
        activation="tanh",
        description="compacts every 5 turns (a test policy)",
        trained_on={"algorithm": "none", "split": "test"},
        evaluation={},
    )


def bench_args(out: Path, task_file: Path, *extra: str) -> list[str]:
    return [
        "--out",
        str(out),
        "--source",
        str(task_file),
        "--split",
        "all",
        "--ids",
        "tiny-calc-1",
        "--budgets",
        "1",
        "--workers",
        "1",
        "--no-progress",
        *extra,
    ]


def compaction_steps(out: Path, strategy: str) -> list[int]:
    trajectory = Trajectory.read(out / f"trajectories/{strategy}/tiny-calc-1__seed0.jsonl")
    return [event.step for event in trajectory.compactions()]


@pytest.mark.slow
def test_self_follows_the_rubric_and_learned_the_timing_policy(tiny_task_file, tmp_path):
    policy = every_five_turns(tmp_path / "every5.json")
    out = tmp_path / "run"
    args = ["--strategies", "self", "learned", "--timing-policy", str(policy)]
    assert main(bench_args(out, tiny_task_file, *args)) == 0
    # self: the rubric's phase end, the bug located (turn 3); learned: the policy, turn 6
    assert compaction_steps(out, "self") == [2]
    assert compaction_steps(out, "learned") == [5]
    learned = Trajectory.read(out / "trajectories/learned/tiny-calc-1__seed0.jsonl")
    assert learned.compactions()[0].summarizer == "policy"  # the worker's own summary
    report = (out / "report.md").read_text()
    assert "- `self`: the reference agent follows the rubric as a rule" in report
    assert f"`every5` ({policy}): compacts every 5 turns (a test policy)" in report
    summary = json.loads((out / "summary.json").read_text())
    rules = {rule["strategy"]: rule for rule in summary["compaction_rules"]}
    assert rules["learned"]["timing_policy"]["trained_on"] == {
        "algorithm": "none",
        "split": "test",
    }
    assert rules["self"]["timing_policy"] is None
    assert json.loads((out / "config.json").read_text())["timing_policy"] == str(policy)


@pytest.mark.slow
def test_fork_continues_the_timing_policys_compaction_with_the_policy(tiny_task_file, tmp_path):
    config = BenchConfig(
        task_source=str(tiny_task_file),
        split=None,
        task_ids=["tiny-calc-1"],
        strategies=["learned"],
        timing_policy=str(every_five_turns(tmp_path / "every5.json")),
        budgets=[1.0],
        workers=1,
    )
    [fork] = run_fork(config, tmp_path / "run", progress=False)
    assert (fork.step, fork.kind) == (5, "proactive")
    # with it: the policy goes on deciding (no second compaction before the submission)
    assert fork.with_compaction.exit_reason == "submitted"
    assert fork.with_compaction.compactions == 1
    assert fork.without_compaction.compactions == 0


def spends_a_tenth(path: Path, budget_usd: float | None) -> Path:
    """A policy that compacts once a tenth of its budget is spent (``budget_left`` < 0.9)."""
    weight = np.zeros((2, len(FEATURE_NAMES)))
    weight[1, FEATURE_INDEX["budget_left"]] = -20.0
    return save_timing_policy(
        path,
        [(weight, np.array([0.0, 18.0]))],
        activation="tanh",
        description="compacts past a tenth of the budget (a test policy)",
        trained_on={"algorithm": "none", "split": "test"},
        evaluation={},
        budget_usd=budget_usd,
    )


@pytest.mark.slow
@pytest.mark.parametrize(("trained_budget", "compacts"), [(None, False), (0.01, True)])
def test_the_policy_sees_the_budget_it_was_trained_under(
    tiny_task_file, tmp_path, trained_budget, compacts
):
    """ac-bench runs each episode at its largest budget; a policy trained without a budget
    must not see that budget run down (it never saw budget_left below 1), one trained under
    a budget sees spending against that budget."""
    policy = spends_a_tenth(tmp_path / "tenth.json", trained_budget)
    out = tmp_path / "run"
    args = bench_args(
        out, tiny_task_file, "--strategies", "learned", "--timing-policy", str(policy)
    )
    args[args.index("--budgets") + 1] = "0.01"
    assert main(args) == 0
    assert bool(compaction_steps(out, "learned")) == compacts
    summary = json.loads((out / "summary.json").read_text())
    rules = {rule["strategy"]: rule for rule in summary["compaction_rules"]}
    assert rules["learned"]["timing_policy"]["budget_usd"] == trained_budget


@pytest.mark.parametrize("problem", ["missing", "corrupt", "other features"])
def test_a_bad_timing_policy_exits_2_before_the_run(tiny_task_file, tmp_path, capsys, problem):
    path = every_five_turns(tmp_path / "policy.json")
    if problem == "missing":
        path.unlink()
    elif problem == "corrupt":
        path.write_text(path.read_text()[:200])
    else:
        document = json.loads(path.read_text())
        document["feature_names"][0] = "tokens"
        path.write_text(json.dumps(document))
    out = tmp_path / "run"
    args = bench_args(out, tiny_task_file, "--strategies", "learned", "--timing-policy", str(path))
    assert main(args) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"ac-bench: timing_policy: {path}")
    assert len(error.splitlines()) == 1
    assert not out.exists()  # nothing written


def test_a_timing_policy_no_strategy_uses_is_refused(tiny_task_file, tmp_path, capsys):
    path = every_five_turns(tmp_path / "policy.json")
    args = bench_args(tmp_path / "run", tiny_task_file, "--strategies", "self", "none")
    assert main([*args, "--timing-policy", str(path)]) == 2
    assert "would go unused" in capsys.readouterr().err


def test_model_workers_keep_their_own_judgement(tmp_path):
    config = BenchConfig(worker="openai:m@http://127.0.0.1:9", strategies=["self", "learned"])
    assert run_timing_policy(config) is None
    rules = {rule.strategy: rule for rule in compaction_rules(config)}
    assert rules["learned"].rule.startswith("the model's own judgement")
    assert rules["learned"].timing_policy is None
    assert rules["self"].rule == "the model, with the rubric in its prompt"


def test_a_shipped_policy_is_named_a_file_by_its_path(tmp_path):
    assert timing_policy_path(BenchConfig().timing_policy) == DEFAULT_TIMING_POLICY
    assert timing_policy_path(str(tmp_path / "p.json")) == tmp_path / "p.json"


def test_the_shipped_timing_policy_loads():
    policy = load_timing_policy(DEFAULT_TIMING_POLICY)
    assert policy.name == "long_ppo"
    assert policy.source.description and policy.source.trained_on
    assert run_timing_policy(BenchConfig(strategies=["learned"])) == policy
    assert isinstance(policy.wants_compaction(np.zeros(len(FEATURE_NAMES))), bool)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_shipped_policy_compacts_where_full_history_overflows(tmp_path):
    """The shipped policy on a held-out long task at the RL cap of 32K, real commands: full
    history overflows; the trained policy compacts before the window fills and fixes it."""
    config = BenchConfig(
        task_source="real",
        split="long",
        task_ids=["toolz-1.2.0__long-d7913ae228"],
        strategies=["none", "learned"],
        context_window=32_768,
        max_steps=100,
        budgets=[1.0],
        workers=1,
    )
    records = {r.strategy: r for r in run_benchmark(config, tmp_path, progress=False)}
    full, learned = records["none"].metrics, records["learned"].metrics
    assert full is not None and learned is not None
    assert full.exit_reason == "context_overflow" and not full.success
    assert learned.count("proactive") >= 2
    assert learned.peak_context_tokens < 32_768
    assert learned.exit_reason == "submitted" and learned.success
