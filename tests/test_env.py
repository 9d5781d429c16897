"""The environment's contracts (docs/architecture.md) on a tiny real task in the real local
sandbox."""

from __future__ import annotations

import math
import shutil

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import ac_env  # noqa: F401  (registers the ids)
from ac_env import Bash, PolicyOutput
from ac_env.agents.oracle import GoldPatchPolicy
from ac_env.compaction import parse_sections
from ac_env.compaction.texts import COMPACTION_REQUEST
from ac_env.config import ConfigError

SUMMARY = (
    "# Auto Context Summary\n## Known\nadd() subtracts in calc/ops.py\n"
    "## Workspace\nno changes yet\n## Next\nfix add"
)
INFO_KEYS = {
    "step",
    "exit_reason",
    "prefix_rewritten",
    "rewrite_from",
    "segment",
    "context_tokens",
    "cost",
    "timings",
    "compaction_requested",
}


def make(tiny_task_file, **kwargs):
    return gym.make("AutoCompact-SWE-v0", task_source=str(tiny_task_file), split=None, **kwargs)


def bash(command):
    return f"THOUGHT: x\n```bash\n{command}\n```"


def test_step_compact_and_info_contract(tiny_task_file):
    env = make(tiny_task_file)
    obs, info = env.reset(seed=0)
    assert [m["role"] for m in obs] == ["system", "user"]
    assert "add(2, 3) returns -1" in obs[1]["content"]
    assert info["segment"] == 0 and info["step"] == 0
    obs, reward, terminated, truncated, info = env.step(bash("grep -rn 'def ' calc | head"))
    assert info.keys() >= INFO_KEYS
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert "calc/ops.py:4:def add(a, b):" in obs[-1]["content"]
    assert obs[-1]["content"].startswith("[exit code 0]")
    assert info["cost"]["step"]["input_cached"] == 0 and info["cost"]["step"]["usd"] > 0
    assert set(info["timings"]) == {"sandbox_s", "grading_s", "env_overhead_s"}
    tokens_before = info["context_tokens"]
    obs, reward, terminated, truncated, info = env.step(SUMMARY)
    assert info["prefix_rewritten"] and info["segment"] == 1 and info["rewrite_from"] == 2
    assert info["compaction"]["kind"] == "proactive"
    assert info["compaction"]["summarizer"] == "policy"
    assert info["compaction"]["tokens_before"] == tokens_before
    assert info["compaction"]["tokens_after"] == info["context_tokens"] < tokens_before
    assert [m["content"] for m in obs[2:]] == [SUMMARY]
    # the rewrite invalidated the prompt cache after message 1: visible in the next call
    obs, *_, info = env.step(bash("ls"))
    fixed_prefix = (
        env.unwrapped.context.messages[0].tokens + env.unwrapped.context.messages[1].tokens
    )
    assert info["cost"]["step"]["input_cached"] == fixed_prefix
    assert "compaction" not in info and info["rewrite_from"] is None
    env.close()


def test_reset_seed_is_deterministic(tiny_task_file):
    env = make(tiny_task_file)
    picks = set()
    for seed in range(6):
        obs_a, info_a = env.reset(seed=seed)
        obs_b, info_b = env.reset(seed=seed)
        assert obs_a == obs_b and info_a["instance_id"] == info_b["instance_id"]
        picks.add(info_a["instance_id"])
    assert picks == {"tiny-calc-1", "tiny-calc-2"}
    _, info = env.reset(options={"task_id": "tiny-calc-2"})
    assert info["instance_id"] == "tiny-calc-2" == env.unwrapped.task.instance_id
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        env.reset(options={"task_id": "nope"})
    env.close()


@pytest.mark.parametrize(
    ("action", "fragment"),
    [
        ("I would look at the code", "No action found"),
        (bash("ls") + "\n" + bash("pwd"), "Found 2 bash blocks"),
        (12345, "must be text, got int"),
        ("# Auto Context Summary\n## Known\nx", "Summary not applied: missing section"),
        ("# Auto Context Summary", "missing section '## Known'"),
    ],
)
def test_malformed_actions_are_counted_format_errors(tiny_task_file, action, fragment):
    env = make(tiny_task_file)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs[-1]["content"].startswith("[format error]") and fragment in obs[-1]["content"]
    assert info["step"] == 1 and not info["prefix_rewritten"] and info["segment"] == 0
    assert not terminated and not truncated
    call = env.unwrapped.trajectory.model_calls()[-1]
    assert call.action["kind"] == "format_error" and fragment in call.action["message"]
    env.close()


def test_bad_configuration_fails_at_make_naming_the_field(tiny_task_file):
    with pytest.raises(ConfigError, match="budget_usdd: Extra inputs are not permitted"):
        make(tiny_task_file, budget_usdd=1.0)
    with pytest.raises(ConfigError, match="keep_recent: Input should be greater than or equal"):
        make(tiny_task_file, keep_recent=-1)
    with pytest.raises(ConfigError, match="forced_compaction_threshold .* must be below"):
        make(tiny_task_file, context_window=1000, forced_compaction_threshold=2000)
    with pytest.raises(ConfigError, match="pricing"):
        make(tiny_task_file, pricing=3)
    caching = r"command_cache needs a sandbox that caches commands \(local, unisolated\)"
    with pytest.raises(ConfigError, match=caching):
        make(tiny_task_file, sandbox="docker", command_cache="cache")  # before any daemon


def test_the_benchmark_refuses_a_command_cache_for_docker_before_it_starts(
    tiny_task_file, tmp_path, capsys
):
    from ac_env.bench.cli import main

    out = tmp_path / "bench"
    argv = ["--out", str(out), "--source", str(tiny_task_file), "--sandbox", "docker"]
    assert main([*argv, "--command-cache", str(tmp_path / "cache")]) == 2
    assert "command_cache needs a sandbox that caches commands" in capsys.readouterr().err
    assert not out.exists()


def test_submit_grades_gold_patch_and_records_trajectory(tiny_task_file, tmp_path):
    env = make(tiny_task_file)
    obs, info = env.reset(options={"task_id": "tiny-calc-1"})
    policy = GoldPatchPolicy(env.unwrapped.task)
    terminated = truncated = False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(policy.act(obs))
    assert terminated and not truncated and reward == 1.0
    assert info["exit_reason"] == "submitted" and info["submitted"] is True
    assert info["reward_detail"] == {
        "tests/test_ops.py::test_add": "PASSED",
        "tests/test_ops.py::test_mul": "PASSED",
    }
    assert info["infra_error"] is None and info["timings"]["grading_s"] > 0
    trajectory = env.unwrapped.trajectory
    kinds = [e.kind for e in trajectory.events]
    assert kinds == [
        "model_call",
        "tool_result",
        "model_call",
        "tool_result",
        "model_call",
        "episode_end",
    ]
    first = trajectory.model_calls()[0]
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert trajectory.end.patch.startswith("diff --git a/calc/ops.py")
    path = tmp_path / "t.jsonl"
    trajectory.write(path)
    assert type(trajectory).read(path).events == trajectory.events
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(bash("ls"))
    env.close()


def test_truncated_episode_is_graded_on_the_workspace(tiny_task_file):
    env = make(tiny_task_file, max_steps=1)
    env.reset(options={"task_id": "tiny-calc-1"})
    _, reward, terminated, truncated, info = env.step(bash("sed -i 's/a - b/a + b/' calc/ops.py"))
    assert truncated and not terminated and info["exit_reason"] == "max_steps"
    assert reward == 1.0 and info["submitted"] is False
    env.close()


def test_editing_tests_does_not_pass(tiny_task_file):
    env = make(tiny_task_file)
    env.reset(options={"task_id": "tiny-calc-1"})
    env.step(bash("sed -i 's/== 5/== -1/' tests/test_ops.py && python3 -m pytest -q tests"))
    _, reward, terminated, *_ = env.step(bash("submit"))
    assert terminated and reward == 0.0
    env.close()


def test_forced_compaction_with_policy_summary(tiny_task_file):
    env = make(tiny_task_file, forced_compaction_threshold=1200, keep_recent=1)
    obs, _ = env.reset(seed=0)
    info = {"compaction_requested": False}
    while not info["compaction_requested"]:
        obs, _, _, _, info = env.step(bash("cat calc/ops.py tests/test_ops.py"))
    assert obs[-1]["content"] == COMPACTION_REQUEST
    obs, _, _, _, info = env.step(SUMMARY)
    assert info["compaction"]["kind"] == "forced"
    assert info["compaction"]["summarizer"] == "policy"
    # the summary, then the last interaction (without the request)
    assert obs[2]["content"] == SUMMARY
    assert [m["role"] for m in obs[3:]] == ["assistant", "user"]
    assert COMPACTION_REQUEST not in [m["content"] for m in obs]
    env.close()


def test_forced_compaction_falls_back_to_extractive_summary(tiny_task_file):
    env = make(tiny_task_file, forced_compaction_threshold=1000)
    env.reset(options={"task_id": "tiny-calc-1"})
    env.step(bash("sed -i 's/a - b/a + b/' calc/ops.py"))
    info = {"compaction_requested": False}
    while not info["compaction_requested"]:
        obs, _, _, _, info = env.step(bash("python3 -m pytest -q -p no:cacheprovider tests"))
    obs, _, _, _, info = env.step(bash("ls"))  # not a summary: the fallback writes one
    assert info["compaction"] == {**info["compaction"], "kind": "forced", "summarizer": "fallback"}
    sections = parse_sections(obs[2]["content"])
    assert "calc/ops.py" in sections["workspace"]  # from the real git diff
    assert "2 passed" in sections["tests"]
    events = env.unwrapped.trajectory.compactions()
    assert len(events) == 1 and events[0].summarizer == "fallback"
    env.close()


def test_context_overflow_truncates(tiny_task_file):
    env = make(tiny_task_file, context_window=3000, forced_compaction_threshold=None)
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step(bash("seq 1 5000"))
    assert truncated and not terminated and info["exit_reason"] == "context_overflow"
    env.close()


def test_budget_truncates_without_executing(tiny_task_file):
    env = make(tiny_task_file, budget_usd=0.0004)
    env.reset(seed=0)
    exit_reason, steps = None, 0
    while exit_reason is None:
        *_, info = env.step(bash("touch marker_$RANDOM; seq 1 300"))
        exit_reason, steps = info["exit_reason"], steps + 1
    assert exit_reason == "budget"
    assert info["cost"]["total"]["usd"] > 0.0004
    executed = len(env.unwrapped.trajectory.tool_results())
    assert executed == steps - 1  # the call that crossed the budget did not run
    env.close()


def test_policy_output_details_are_recorded(tiny_task_file):
    env = make(tiny_task_file)
    env.reset(seed=0)
    out = PolicyOutput(
        text=bash("ls"), output_token_ids=[5, 6], output_logprobs=[-0.5, -1.0], policy_version=3
    )
    env.step(out)
    env.step(Bash(command="pwd"))
    calls = env.unwrapped.trajectory.model_calls()
    assert calls[0].output_token_ids == [5, 6] and calls[0].policy_version == 3
    assert calls[1].output == "```bash\npwd\n```"
    env.close()


def test_infra_error_is_not_a_silent_zero(task_factory, tmp_path):
    task = task_factory(tmp_path)
    path = tmp_path / "one.jsonl"
    path.write_text(task.model_dump_json() + "\n")
    env = gym.make("AutoCompact-SWE-v0", task_source=str(path), split=None)
    env.reset(seed=0)
    shutil.rmtree(task.snapshot_dir)  # the snapshot vanishes: grading cannot start
    _, reward, terminated, _, info = env.step(bash("submit"))
    assert terminated and math.isnan(reward)
    assert info["infra_error"]
    assert env.unwrapped.trajectory.end.reward is None
    env.close()


def test_check_env(tiny_task_file):
    env = make(tiny_task_file)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_close_removes_the_workspace(tiny_task_file):
    env = make(tiny_task_file)
    env.reset(seed=0)
    env.step(bash("(sleep 300 &) ; echo started"))
    workspace = env.unwrapped.sandbox.workspace
    env.close()
    assert not workspace.exists()


def test_abort_grades_and_records_the_end(tiny_task_file):
    env = make(tiny_task_file)
    env.reset(options={"task_id": "tiny-calc-1"})
    env.step(bash("sed -i 's/a - b/a + b/' calc/ops.py"))
    reward, info = env.unwrapped.abort("policy_error")
    assert reward == 1.0 and info["exit_reason"] == "policy_error" and not info["submitted"]
    assert env.unwrapped.trajectory.end.exit_reason == "policy_error"
    with pytest.raises(RuntimeError):
        env.unwrapped.abort("policy_error")
    env.close()


def test_readme_snippet_on_the_builtin_suite():
    env = gym.make("AutoCompact-SWE-v0")  # built-in task suite, local sandbox
    obs, info = env.reset(seed=0)
    assert env.unwrapped.task.split == "easy" and len(obs) == 2
    obs, r, terminated, truncated, info = env.step(
        "THOUGHT: find it\n```bash\ngrep -rn 'def ' src | head\n```"
    )
    assert obs[-1]["content"].startswith("[exit code")
    obs, r, terminated, truncated, info = env.step(
        "# Auto Context Summary\n## Known\n...\n## Workspace\n...\n## Next\n..."
    )
    assert info["prefix_rewritten"] and info["segment"] == 1
    env.close()


def test_example_script_runs(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parent.parent / "examples" / "run_builtin.py"
    done = subprocess.run(
        [sys.executable, str(script), "--policy", "gold", "--tasks", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "submitted: reward 1.0" in done.stdout


def test_a_fallback_authored_summary_is_recorded_as_fallback(tiny_task_file):
    env = make(tiny_task_file)
    env.reset(seed=0)
    env.step(bash("ls"))
    *_, info = env.step(PolicyOutput(text=SUMMARY, produced_by="fallback"))
    assert info["compaction"]["summarizer"] == "fallback"
    call = env.unwrapped.trajectory.model_calls()[-1]
    assert call.produced_by == "fallback"
    assert env.unwrapped.trajectory.compactions()[-1].summarizer == "fallback"
    env.close()
