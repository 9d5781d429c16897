"""ac-bench: resume, configuration checks, infra retries, all budgets from one run, the report."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest
from pydantic import ValidationError

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.reference import ReferenceAgent
from ac_env.agents.rollout import rollout
from ac_env.bench import BenchConfig, ConfigMismatchError, run_benchmark, write_report
from ac_env.bench import runner as runner_module
from ac_env.bench.cli import main
from ac_env.bench.episodes import select_tasks
from ac_env.bench.runner import RECORDS_FILE, read_records
from ac_env.compaction.texts import COMPACTION_SKIPPED
from ac_env.policy import PolicyOutput
from ac_env.runs.run_dir import claim_directory
from ac_env.runs.workers import SkipAwareReference
from ac_env.strategies import get_strategy


class SubmitAtOnce:
    def act(self, observation):
        return PolicyOutput(text="```bash\nsubmit\n```")


def quick_config(tiny_task_file: Path, **kwargs) -> BenchConfig:
    defaults = {
        "task_source": str(tiny_task_file),
        "split": None,
        "strategies": ["none"],
        "seeds": [0, 1],
        "budgets": [1.0],
        "sandbox": "local",
    }
    return BenchConfig(**{**defaults, **kwargs})


@pytest.fixture
def instant_policy(monkeypatch):
    """Episodes of one step (submit), so runner tests do not wait for an agent."""
    monkeypatch.setattr(
        runner_module,
        "episode_policies",
        lambda *args: lambda seed: lambda env: SubmitAtOnce(),
    )


def counting(monkeypatch) -> list[tuple[str, str, int]]:
    ran: list[tuple[str, str, int]] = []
    real = runner_module.run_episode

    def run_episode(config, job, out, timing):
        ran.append(job.key)
        return real(config, job, out, timing)

    monkeypatch.setattr(runner_module, "run_episode", run_episode)
    return ran


@pytest.mark.slow
def test_resume_runs_only_the_missing_episodes(
    tiny_task_file, tmp_path, monkeypatch, instant_policy
):
    config = quick_config(tiny_task_file)
    ran = counting(monkeypatch)
    first = run_benchmark(config, tmp_path, progress=False)
    assert len(first) == len(ran) == 4 and all(r.status == "ok" for r in first)
    # interrupted: the last record lost, the one before it torn mid-write
    path = tmp_path / RECORDS_FILE
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2]) + "\n" + lines[2][:30])
    ran.clear()
    second = run_benchmark(config, tmp_path, progress=False)
    assert sorted(ran) == sorted(
        r.key
        for r in first[:4]
        if r.key
        not in {runner_module.EpisodeRecord.model_validate_json(line).key for line in lines[:2]}
    )
    assert len(ran) == 2 and [r.key for r in second] == [r.key for r in first]
    assert len(read_records(tmp_path)) == 4
    ran.clear()
    run_benchmark(config, tmp_path, progress=False)
    assert ran == []


def test_another_configuration_is_refused_with_the_difference(tiny_task_file, tmp_path):
    claim_directory(quick_config(tiny_task_file), tmp_path)
    claim_directory(quick_config(tiny_task_file, workers=1), tmp_path)  # speed only: fine
    with pytest.raises(ConfigMismatchError) as error:
        claim_directory(quick_config(tiny_task_file, strategies=["fixed"], seeds=[0]), tmp_path)
    assert "strategies: stored ['none'], now ['fixed']" in str(error.value)
    assert "seeds: stored [0, 1], now [0]" in str(error.value)


def test_unknown_names_list_the_valid_ones(tiny_task_file, tmp_path, capsys):
    with pytest.raises(ValidationError, match="valid strategies: none, fixed"):
        quick_config(tiny_task_file, strategies=["none", "often"])
    with pytest.raises(ValueError, match="valid splits: easy"):
        select_tasks(quick_config(tiny_task_file, split="nope"))
    with pytest.raises(ValueError, match="valid splits"):
        run_benchmark(quick_config(tiny_task_file, split="nope"), tmp_path / "y")
    assert not (tmp_path / "y" / "config.json").exists()  # a corrected rerun is not refused
    with pytest.raises(ValidationError, match="valid: reference, openai:"):
        quick_config(tiny_task_file, worker="gpt")
    code = main(
        [
            "--out",
            str(tmp_path / "x"),
            "--source",
            str(tiny_task_file),
            "--split",
            "all",
            "--strategies",
            "often",
        ]
    )
    assert code == 2 and "valid strategies" in capsys.readouterr().err


@pytest.mark.slow
def test_an_infra_failure_is_retried_once_and_never_a_policy_failure(
    tiny_task_file, tmp_path, monkeypatch, instant_policy
):
    real = runner_module._attempt
    calls: dict[tuple[str, str, int], int] = {}

    def flaky(config, job, out, attempt, policy):
        calls[job.key] = calls.get(job.key, 0) + 1
        if job.seed == 1 or calls[job.key] == 1:  # seed 1 always fails, seed 0 once
            raise RuntimeError("sandbox vanished")
        return real(config, job, out, attempt, policy)

    monkeypatch.setattr(runner_module, "_attempt", flaky)
    records = run_benchmark(quick_config(tiny_task_file), tmp_path, progress=False)
    by_seed = {(r.instance_id, r.seed): r for r in records}
    assert all(
        by_seed[(i, 0)].status == "ok" and by_seed[(i, 0)].attempts == 2
        for i in ("tiny-calc-1", "tiny-calc-2")
    )
    failed = by_seed[("tiny-calc-1", 1)]
    assert failed.status == "infra_error" and failed.attempts == 2
    assert "sandbox vanished" in (failed.error or "") and failed.metrics is None
    assert set(calls.values()) == {2}
    report = write_report(quick_config(tiny_task_file), records, tmp_path)
    assert "| none | 4 | 2 |" in report.text  # 4 episodes, 2 infra errors, left out of rates
    sampling = "Sampling (every model worker): temperature 0.7, top_p 1, max_new_tokens 256"
    assert sampling in report.text


@pytest.mark.slow
def test_skip_aware_reference_does_not_repeat_a_skipped_summary(tiny_task_file):
    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=str(tiny_task_file),
        split=None,
        **get_strategy("summary_ignored").env_kwargs(),
    )
    policy = SkipAwareReference("after_locate")
    trajectory = rollout(env, policy, seed=0, options={"task_id": "tiny-calc-1"})
    env.close()
    kinds = [c.action["kind"] for c in trajectory.model_calls()]
    assert kinds.count("compact") == 1 and kinds[-1] == "submit"
    assert any(m["content"] == COMPACTION_SKIPPED for m in trajectory.model_calls()[-1].messages)
    assert trajectory.end is not None and trajectory.end.reward == 1.0


# ---- all budgets from one run ----------------------------------------------------------------


def separate_run(tiny_task_file, strategy: str, budget: float, task_id: str):
    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=str(tiny_task_file),
        split=None,
        budget_usd=budget,
        **get_strategy(strategy).env_kwargs(),
    )
    trajectory = rollout(env, ReferenceAgent("rubric"), seed=0, options={"task_id": task_id})
    env.close()
    return trajectory


@pytest.fixture(scope="module")
def one_run(tiny_task_file, tmp_path_factory):
    """The benchmark at budgets that cut the reference agent's episode at different steps,
    chosen from a pilot episode's spending."""
    pilot = separate_run(tiny_task_file, "self", 10.0, "tiny-calc-1")
    totals, spent = [], 0.0
    for call in pilot.model_calls():
        spent += call.cost.usd
        totals.append(spent)
    budgets = [(totals[0] + totals[1]) / 2, (totals[3] + totals[4]) / 2, 10.0]
    config = BenchConfig(
        task_source=str(tiny_task_file),
        split=None,
        strategies=["self", "masking"],
        budgets=budgets,
    )
    out = tmp_path_factory.mktemp("bench")
    return config, run_benchmark(config, out, progress=False), out


@pytest.mark.slow
def test_every_budget_from_one_run_equals_separate_runs(tiny_task_file, one_run):
    config, records, _ = one_run
    rubric = [r for r in records if r.strategy == "self"]
    assert len(rubric) == 2
    for record in rubric:
        outcomes = {o.budget: o for o in record.budgets}
        assert outcomes[10.0].reward == 1.0 and outcomes[10.0].exit_reason == "submitted"
        for budget in config.budgets[:2]:
            separate = separate_run(tiny_task_file, "self", budget, record.instance_id)
            end = separate.end
            assert end is not None and end.exit_reason == "budget"
            derived = outcomes[budget]
            assert derived.exit_reason == end.exit_reason
            assert derived.reward == end.reward
            assert derived.steps == len(separate.model_calls())
            assert derived.cost == end.cost
        # the lower budgets really cut the episode short, at different steps
        assert outcomes[config.budgets[0]].steps < outcomes[config.budgets[1]].steps < 7


@pytest.mark.slow
def test_report_tables_and_plots(one_run):
    config, records, out = one_run
    report = write_report(config, records, out)
    header = report.text.splitlines()
    assert any(line.startswith("| self | 0% [0-0]") for line in header)
    assert any(line.startswith("| masking |") for line in header)
    assert "100% [100-100]" in report.text  # at the highest budget both tasks are solved
    audit_rows = report.text.split("## Summary audit")[1].splitlines()
    # self: one summary per episode (after locating), two episodes; masking writes none
    assert any(row.startswith("| self | 2 |") for row in audit_rows)
    assert any(row.startswith("| masking | 0 |") for row in audit_rows)
    payback_rows = report.text.split("## Break-even")[1].split("## Summary audit")[0].splitlines()
    assert any(row.startswith("| self | 2 | 0.0") for row in payback_rows)  # one per episode
    for plot in report.plots:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000
    stored = json.loads((out / "config.json").read_text())
    assert stored["budgets"] == config.budgets


@pytest.mark.slow
def test_the_command_prints_the_table_and_the_plot_paths(
    tiny_task_file, tmp_path, capsys, instant_policy
):
    args = ["--out", str(tmp_path), "--source", str(tiny_task_file), "--split", "all"]
    args += ["--strategies", "none", "masking", "--budgets", "0.5", "1", "--no-progress"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "| strategy | $0.5 | $1 |" in printed
    assert "| none | 0% [0-0]" in printed and "| masking | 0% [0-0]" in printed  # no fix made
    assert f"report: {tmp_path / 'report.md'}" in printed
    assert str(tmp_path / "success_vs_budget.png") in printed


def test_a_task_file_or_the_real_suite_defaults_to_every_split():
    assert BenchConfig().split == "easy"
    assert BenchConfig(task_source="tasks.jsonl").split is None
    assert BenchConfig(task_source="real").split is None
    assert BenchConfig(task_source="real", split="long").split == "long"


@pytest.mark.slow
def test_a_command_cache_replays_a_strategys_commands_for_the_next(tiny_task_file, tmp_path):
    cache = tmp_path / "cache"
    config = quick_config(tiny_task_file, strategies=["none"], seeds=[0], command_cache=str(cache))
    first = run_benchmark(config, tmp_path / "none", progress=False)
    commands = sorted(cache.glob("*.json"))  # one record per command (diffs/, grades/ beside)
    assert commands and list(cache.glob("grades/*.json")), "the first run records what it ran"
    # another strategy runs the same agent's commands on the same workspaces: all replayed
    again = config.model_copy(update={"strategies": ["self"]})  # compacts after locating
    second = run_benchmark(again, tmp_path / "self", progress=False)
    assert sorted(cache.glob("*.json")) == commands
    assert all(r.budgets[-1].reward == 1.0 for r in first + second)
    assert all(r.metrics and r.metrics.count("proactive") == 1 for r in second)
    report = write_report(again, second, tmp_path / "self")
    assert f"replayed from `{cache}`" in report.text
    # the cache changes how fast a run goes, not what it measures: a resume may drop it
    uncached = again.model_copy(update={"command_cache": None})
    assert run_benchmark(uncached, tmp_path / "self", progress=False) == second
