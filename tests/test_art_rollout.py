"""``ac_train.integrations.art_rollout`` with ART 0.5.18's own classes: whole episodes through
``play`` (what ``rollout(model, scenario)`` runs with ``model.openai_client()``) with a client
that answers scripted actions the way ART's vLLM server does (each sampled token named
``token_id:N`` in the log-probs: ``PolicyClient``), then every history of the returned
``art.Trajectory`` tokenized by ART's own training path
(``art.preprocessing.tokenize.tokenize_trajectory_groups``) on SmolLM2's tokenizer, and
compared, token for token and mask for mask, with our segmenter's segments of the env's
trajectory.

ART and what it imports (litellm, polars, openai<3) live in their own environment:
``bash scripts/extra_env.sh art``. Skipped where ART is absent.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("art") is None:
    pytest.skip("ART is not installed: bash scripts/extra_env.sh art", allow_module_level=True)

import art
from art.preprocessing.tokenize import tokenize_trajectory_groups
from scripted_policy import ScriptedPolicy
from test_skyrl_adapter import CASES, in_process

from ac_train.integrations.art_rollout import AutoCompactScenario, PolicyClient, play
from ac_train.models.checkpoints import load_tokenizer
from ac_train.segments import segment_trajectory


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


def play_scripted(actions: list[str], tokenizer: Any, env: dict[str, Any], seed: int = 1):
    policy = ScriptedPolicy(actions)
    scenario = AutoCompactScenario(env=env, seed=seed)
    episode = asyncio.run(play(PolicyClient(policy, tokenizer), "policy", scenario))
    return episode, policy


@pytest.mark.parametrize("case", CASES)
def test_each_history_tokenizes_in_art_as_our_segmenter_cuts_it(case, tokenizer):
    env_config, script, _summarizer, grade = CASES[case]
    actions, answers = in_process(1, env_config, script)
    episode, policy = play_scripted(actions, tokenizer, env_config)
    trajectory = episode.art_trajectory()

    # every turn was asked in the env's own context
    assert policy.observations == [
        [dict(m) for m in answer[0]] for answer in answers[: len(actions)]
    ]
    assert trajectory.reward == grade
    assert len(trajectory.additional_histories) == 1 == trajectory.metrics["compactions"]

    segments = segment_trajectory(episode.trajectory, tokenizer)
    rival = art.Trajectory(messages_and_choices=[], reward=1 - grade)  # a group of two
    results = list(
        tokenize_trajectory_groups(
            tokenizer,
            [art.TrajectoryGroup([trajectory, rival])],
            allow_training_without_logprobs=False,
            scale_rewards=True,
            shuffle_group_trajectories=False,
        )
    )
    assert len(results) == len(segments) == 2
    # ART yields the main history (our last segment), then the additional ones (the earlier)
    for result, segment in zip(results, segments[::-1], strict=True):
        assert result.token_ids == segment.input_ids
        assert result.assistant_mask == [int(m) for m in segment.grpo_mask()]
        assert result.logprobs == [
            0.0 if m else pytest.approx(float("nan"), nan_ok=True) for m in segment.grpo_mask()
        ]
        assert result.advantage == pytest.approx(1.0 if grade else -1.0, abs=1e-4)


def test_a_bad_env_setting_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="max_steps"):
        AutoCompactScenario(env={"max_steps": -1})


def test_the_example_prints_the_compaction_and_arts_training_sequences():
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, str(root / "examples" / "art_rollout.py")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "1 compaction(s), 1 additional histories" in run.stdout
    assert "a history that opens with the summary" in run.stdout
    sequences = re.findall(
        r"trajectory (\d): \d+ tokens, \d+ trained, advantage ([+-][\d.]+)", run.stdout
    )
    assert sorted(sequences) == [("0", "+1.000")] * 2 + [("1", "-1.000")] * 2
