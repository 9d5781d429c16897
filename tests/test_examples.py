"""The examples run as scripts (in their reduced mode where they have one), so they cannot rot."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.slow
def test_ppo_timing_quick_prints_the_comparison() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "ppo_timing.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.strip()}
    for policy in ("ppo", "never", "every", "threshold"):
        assert policy in rows, done.stdout
    success, mean_cost = float(rows["never"][1]), float(rows["never"][2])
    assert 0.0 <= success <= 1.0 and mean_cost > 0.0


def run_example(name: str, *args: str, cwd: Path, timeout: int = 240) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def save_tiny_model(path: Path) -> None:
    from ac_train.models.checkpoints import tiny_model_and_tokenizer

    model, tokenizer = tiny_model_and_tokenizer()
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


def test_quickstart_prints_each_step_and_the_reward(tmp_path: Path) -> None:
    out = run_example("run_builtin.py", "--tasks", "1", cwd=tmp_path)
    assert "=== synthetic__" in out and "step  1" in out
    assert re.search(r"--> \w+: reward [01]\.0", out), out


def test_custom_policy_compacts_on_its_own_rule(tmp_path: Path) -> None:
    out = run_example("custom_policy.py", "--tasks", "1", "--max-tokens", "2000", cwd=tmp_path)
    found = re.search(r"reward ([01]\.0), (\d+) steps, (\d+) compactions", out)
    assert found, out
    assert int(found.group(3)) >= 1  # the rule fired: easy tasks pass 2000 tokens


def test_compare_strategies_writes_a_report_and_plots(tmp_path: Path) -> None:
    out = run_example("compare_strategies.py", "--out", "bench", "--tasks", "1", cwd=tmp_path)
    assert "| none |" in out and "| fixed |" in out
    assert (tmp_path / "bench" / "success_vs_budget.png").stat().st_size > 0


@pytest.mark.slow
def test_collect_sft_quick_runs_every_stage(tmp_path: Path) -> None:
    save_tiny_model(tmp_path / "tiny")
    out = run_example(
        "collect_sft.py",
        "--quick",
        "--model",
        str(tmp_path / "tiny"),
        "--out",
        "run",
        "--swe-compressor",
        cwd=tmp_path,
        timeout=500,
    )
    for row in ("valid_action", "missed_next_step", "rereads_per_compaction", "success"):
        assert row in out
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert set(results["eval"]) == {"base", "bc", "judge-sft", "swe-compressor"}
    assert set(results["paired"]) == {
        "bc - base",
        "judge-sft - bc",
        "swe-compressor - judge-sft",
        "swe-compressor - base",
    }
    assert "collect-uncorrected" in results["wall_time_s"]
    assert results["eval"]["bc"]["tasks"] == 1
    assert {"bc-data", "bc", "eval-base"} <= set(results["wall_time_s"])
    assert (tmp_path / "run" / "bc" / "final").is_dir()
    assert (tmp_path / "run" / "results.png").stat().st_size > 0


@pytest.mark.slow
def test_grpo_real_run_quick_runs_every_stage(tmp_path: Path) -> None:
    save_tiny_model(tmp_path / "tiny")
    out = run_example(
        "grpo_real_run.py", "--quick", "--model", str(tmp_path / "tiny"), "--out", "run",
        "--steps-left", "1", "2", "3", "--train-steps-left", "1", "2", "3", "--probe-samples", "2",
        cwd=tmp_path, timeout=400,
    )  # fmt: skip
    assert "held-out success" in out and "  all: before: " in out
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert set(results["success"]) == {"all", "steps_left=1", "steps_left=2", "steps_left=3"}
    for row in results["success"].values():
        for cell in (row["before"], row["after"]):
            assert 0 <= cell["low"] <= cell["mean"] <= cell["high"] <= 1
        assert -1 <= row["after - before"]["mean"] <= 1
    assert set(results["before"]) == set(results["after"])  # the same start states
    assert [row["step"] for row in results["curve"]] == [0]
    assert results["curve"][0]["informative_groups"] in (0, 1)
    assert set(results["cost"]["wall_s"]) == {"bc", "before", "probe", "grpo", "after"}
    assert results["probe"]["starts"] == 1  # the one teachable train start (depth 3), 2 each
    assert all(len(rewards) == 2 for rewards in results["probe"]["rewards"].values())
    metrics = json.loads((tmp_path / "run" / "grpo" / "metrics.jsonl").read_text())
    assert metrics["rollouts"] == 2 and metrics["compactions_per_trajectory"] == 0
    assert (tmp_path / "run" / "results.png").stat().st_size > 0

    # an evaluation cut short resumes with the start states it had not finished
    first, *rest = results["after"]
    del results["after"][first]
    (tmp_path / "run" / "results.json").write_text(json.dumps(results))
    run_example(
        "grpo_real_run.py", "--quick", "--model", str(tmp_path / "tiny"), "--out", "run",
        "--steps-left", "1", "2", "3", "--train-steps-left", "1", "2", "3", "--probe-samples", "2",
        cwd=tmp_path, timeout=400,
    )  # fmt: skip
    resumed = json.loads((tmp_path / "run" / "results.json").read_text())
    assert list(resumed["after"]) == [*rest, first]  # only the missing one ran again
    assert resumed["before"] == results["before"]
    wall = resumed["cost"]["wall_s"]
    assert wall["before"] == results["cost"]["wall_s"]["before"]
    assert wall["after"] > results["cost"]["wall_s"]["after"]


@pytest.mark.slow  # 10 s; tests/test_grpo.py covers the trainer in the default run
def test_grpo_steps_quick_prints_a_metrics_row(tmp_path: Path) -> None:
    save_tiny_model(tmp_path / "tiny")
    out = run_example(
        "grpo_steps.py", "--quick", "--model", str(tmp_path / "tiny"), "--out", "g", cwd=tmp_path
    )
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert len(rows) == 1 and rows[0][0] == "0", out
    metrics = json.loads((tmp_path / "g" / "metrics.jsonl").read_text().splitlines()[0])
    assert metrics["rollouts"] == 2


@pytest.mark.slow
def test_ppo_timing_long_quick_writes_results_plot_and_policy(tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    args = ["--quick", "--out", str(tmp_path / "out"), "--export", str(policy)]
    run_example("ppo_timing_long.py", *args, "--imitate", "every 10", cwd=tmp_path, timeout=900)
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["training"]["imitation"]["decisions"] > 0
    assert {"ppo", results["best_tuned_rule"]} <= set(results["eval"])
    assert results["ppo_minus_rule"][results["best_tuned_rule"]]["reward"]["n"] == 1
    assert (tmp_path / "out" / "results.png").stat().st_size > 0
    from ac_env.timing.policy_file import load_timing_policy

    loaded = load_timing_policy(policy)
    assert loaded.source.trained_on["decisions"] == results["training"]["decisions"]


@pytest.mark.slow
@pytest.mark.timeout(1200)  # about 4 minutes a run on 2 busy cores, run twice
def test_autocompact_pipeline_quick_runs_every_stage_and_resumes(
    tmp_path: Path, tiny_task_file: Path
) -> None:
    """Base -> judge-corrected collection -> SFT -> GRPO on the tiny tasks (the first trains,
    the second is held out), each evaluated on the same held-out starts."""
    save_tiny_model(tmp_path / "tiny")
    args = ["--quick", "--model", str(tmp_path / "tiny"), "--task-source", str(tiny_task_file)]
    out = run_example("autocompact_pipeline.py", *args, "--out", "p", cwd=tmp_path, timeout=900)
    assert "exact/success" in out and "grpo-base" in out
    results = json.loads((tmp_path / "p" / "pipeline.json").read_text())
    assert results["stages"] == ["base", "collect", "sft", "grpo"]
    assert set(results["wall_s"]) == {"starts", "base", "collect", "sft", "grpo"}
    assert results["collect"]["corrections"] >= 1 and results["collect"]["kept"] >= 1
    for kind in ("exact", "prose", "wrong_line"):
        for metric in ("success", "follows_plan", "valid_action_rate", "format_error_rate"):
            row = results["held_out"][f"{kind}/{metric}"]
            assert set(row) == {"base", "sft", "grpo"}
            for cell in row.values():
                assert cell["ci"][0] <= cell["mean"] <= cell["ci"][1] and cell["n"] == 1
    assert set(results["paired"]) == {"sft_vs_base", "grpo_vs_base"}
    assert set(results["paired"]["grpo_vs_base"]["exact/success"]) == {"diff", "ci", "n"}
    assert (tmp_path / "p" / "pipeline.png").stat().st_size > 0

    again = run_example("autocompact_pipeline.py", *args, "--out", "p", cwd=tmp_path, timeout=900)
    assert "== grpo: done before" in again  # every stage resumed, none ran again
    resumed = json.loads((tmp_path / "p" / "pipeline.json").read_text())
    assert {k: v for k, v in resumed["wall_s"].items() if k != "starts"} == {
        k: v for k, v in results["wall_s"].items() if k != "starts"
    }
