"""``ac_env.integrations.skyrl``: full episodes through ``skyrl_gym``'s own API (``make`` from
its registry, ``init``, ``step``, ``close``, ``get_metrics``), the chat kept the way SkyRL's
generator keeps it, compared turn by turn with ``gym.make("AutoCompact-SWE-v0")`` on the same
seed and actions, a compaction included."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import gymnasium as gym
import pytest
import skyrl_gym
from omegaconf import DictConfig

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.oracle import GoldPatchPolicy
from ac_env.integrations.skyrl import ENV_CLASS, dataset_rows, register

SUMMARY = "# Auto Context Summary\n## Known\nthe bug is in src\n## Workspace\nclean\n## Next\nfix"
GOLD = "the gold patch"  # stands for the task's gold patch, applied by a bash block
# a context past the threshold after the second turn: the third is taken as the summary
FORCED = {"forced_compaction_threshold": 1020}  # seed 1: 989 tokens after turn 1, 1044 after 2
CASES = {
    "proactive": ({}, ["grep", "no action here", SUMMARY, GOLD, "submit"], "policy", 1.0),
    "forced": (FORCED, ["grep", "no action here", "not a summary", "submit"], "fallback", 0.0),
}


def bash(command: str) -> str:
    return f"THOUGHT: x\n```bash\n{command}\n```"


def in_process(seed: int, env_config: dict, script: list[str]) -> tuple[list[str], list[tuple]]:
    """The script's actions (a command, a format error, a compaction, the gold patch,
    submit) and what the in-process env answers to them on ``seed``."""
    env = gym.make("AutoCompact-SWE-v0", **env_config)
    observation, info = env.reset(seed=seed)
    gold = GoldPatchPolicy(env.unwrapped.task).act(()).text
    named = {"grep": bash("grep -rn 'def ' . | head -5"), "submit": bash("submit"), GOLD: gold}
    actions = [named.get(action, action) for action in script]
    answers: list[tuple] = [(observation, 0.0, False, False, info)]
    answers += [env.step(action) for action in actions]
    env.close()
    return actions, answers


def skyrl_episode(seed: int, env_config: dict, actions: list[str], *, honour_rewrites: bool):
    """One episode as SkyRL's generator runs it: ``make`` from the registry with the row's
    extras, ``init``, then per turn append the model's text and the step's observations
    (with ``honour_rewrites``, first cut the chat to ``metadata["keep"]``)."""
    register()
    row = dataset_rows(["unused"])[0] | {"task_id": None, "seed": seed, "max_turns": 50}
    env = skyrl_gym.make(ENV_CLASS, env_config=DictConfig(env_config), extras=row)
    chats, outputs = [], []
    chat, _ = env.init(row["prompt"])
    chats.append(list(chat))
    for action in actions:
        chat.append({"role": "assistant", "content": action})
        output = env.step(action)
        if honour_rewrites:
            chat = chat[: output["metadata"]["keep"]]
        chat += output["observations"]
        chats.append(list(chat))
        outputs.append(output)
        if output["done"]:
            break
    metrics = env.get_metrics()
    env.close()
    return chats, outputs, metrics


def without_timings(info: dict) -> dict:
    return {key: value for key, value in info.items() if key != "timings"}


@pytest.mark.parametrize("case", CASES)
def test_episodes_match_the_in_process_env_turn_by_turn(case):
    env_config, script, summarizer, grade = CASES[case]
    seed = 1
    actions, answers = in_process(seed, env_config, script)
    chats, outputs, metrics = skyrl_episode(seed, env_config, actions, honour_rewrites=True)

    assert len(chats) == len(answers)
    for chat, (observation, *_rest) in zip(chats, answers, strict=True):
        assert chat == [dict(message) for message in observation]
    for output, (_, reward, terminated, truncated, info) in zip(outputs, answers[1:], strict=True):
        assert output["reward"] == reward
        assert output["done"] == (terminated or truncated)
        assert without_timings(output["metadata"]["info"]) == without_timings(info)
        assert output["metadata"]["prefix_rewritten"] == info["prefix_rewritten"]
    compactions = [
        o["metadata"]["info"]["compaction"] for o in outputs if o["metadata"]["prefix_rewritten"]
    ]
    assert [c["summarizer"] for c in compactions] == [summarizer]
    assert outputs[-1]["reward"] == grade and outputs[-1]["metadata"]["terminated"]
    assert metrics["reward"] == grade and metrics["rewrites"] == 1
    assert metrics["steps"] == len(actions) and metrics["cost_usd"] > 0


def test_a_generator_that_only_appends_diverges_at_the_rewrite():
    seed = 1
    actions, answers = in_process(seed, *CASES["proactive"][:2])
    chats, outputs, _ = skyrl_episode(seed, {}, actions, honour_rewrites=False)
    first = next(i for i, output in enumerate(outputs) if output["metadata"]["prefix_rewritten"])
    assert chats[: first + 1] == [[dict(m) for m in answer[0]] for answer in answers[: first + 1]]
    assert chats[first + 1] != [dict(m) for m in answers[first + 1][0]]
    assert outputs[first]["metadata"]["context"] == [dict(m) for m in answers[first + 1][0]]


def test_extras_are_checked_naming_the_field():
    register()
    with pytest.raises(ValueError, match="seed"):
        skyrl_gym.make(ENV_CLASS, env_config={}, extras={"seed": "zero"})
    env = skyrl_gym.make(ENV_CLASS, env_config={}, extras={"task_id": "nope"})
    with pytest.raises(ValueError, match="task_id"):
        env.init([])
    env.close()


def test_the_example_runs_an_episode():
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, str(root / "examples" / "skyrl_episode.py"), "--seeds", "1"],
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "--> submitted: reward 1.0" in run.stdout
    assert "compaction (proactive, summary by policy): context" in run.stdout
    assert "(context rewritten)" in run.stdout


def test_each_episode_has_its_own_sandbox_and_close_removes_it(monkeypatch):
    # commands run as nobody, who cannot enter pytest's tmp_path (mode 700): a fresh 755 dir
    sandboxes = Path(tempfile.mkdtemp(prefix="autocompact-skyrl-test-"))
    sandboxes.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(sandboxes))
    register()
    try:
        envs = [skyrl_gym.make(ENV_CLASS, env_config={}, extras={"seed": s}) for s in (0, 1)]
        for env in envs:
            env.init([])
        assert len(list(sandboxes.glob("autocompact-sandbox-*"))) == 2
        output = envs[0].step(bash("submit"))
        assert output["done"] and output["reward"] == 0.0
        for env in envs:
            env.close()
        assert list(sandboxes.glob("autocompact-sandbox-*")) == []
    finally:
        shutil.rmtree(sandboxes, ignore_errors=True)
