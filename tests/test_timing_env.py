"""AutoCompact-Timing-v0: checkers, what compaction does, features, reward, vector envs."""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from stable_baselines3.common.vec_env import SubprocVecEnv

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.reference import ReferenceAgent
from ac_env.config import ConfigError
from ac_env.grading import GradeResult
from ac_env.policy import PolicyOutput
from ac_env.timing.env import COMPACT, COMPACT_EXTRACTIVE, CONTINUE, TimingEnv
from ac_env.timing.features import FEATURE_INDEX, FEATURE_NAMES, command_kind


def make(task_file: Path, **kwargs: object) -> TimingEnv:
    env_kwargs = {"task_source": str(task_file), "split": None}
    return TimingEnv(env_kwargs=env_kwargs, **kwargs)


class ReadsForever:
    """A worker that never writes a summary: compaction falls back to the extractive one."""

    def act(self, observation: object) -> PolicyOutput:
        return PolicyOutput(text="```bash\ncat calc/ops.py\n```")


class Crashes:
    def act(self, observation: object) -> PolicyOutput:
        raise RuntimeError("backend down")


def feature(obs: np.ndarray, name: str) -> float:
    return float(obs[FEATURE_INDEX[name]])


def test_gymnasium_checker_passes(tiny_task_file: Path) -> None:
    env = gym.make("AutoCompact-Timing-v0", env_kwargs={"task_source": str(tiny_task_file)})
    gym_check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_sb3_checker_passes(tiny_task_file: Path) -> None:
    env = make(tiny_task_file)
    sb3_check_env(env, warn=True)
    env.close()


def test_unknown_or_bad_keyword_is_a_clear_error(tiny_task_file: Path) -> None:
    with pytest.raises(ConfigError, match="cost_penality"):
        gym.make("AutoCompact-Timing-v0", cost_penality=1.0)
    with pytest.raises(ConfigError, match="worker"):
        make(tiny_task_file, worker=42)
    with pytest.raises(ConfigError, match="max_steps"):
        TimingEnv(env_kwargs={"task_source": str(tiny_task_file), "max_steps": 0})


def test_compact_rewrites_the_inner_context(tiny_task_file: Path) -> None:
    env = make(tiny_task_file)
    obs, _ = env.reset(seed=0)
    assert env.action_masks().tolist() == [True, False]  # nothing to compact at step 0
    for _ in range(2):
        obs, *_, info = env.step(CONTINUE)
    assert feature(obs, "compacted") == 0.0 and env.action_masks()[COMPACT]
    tokens_before, segment_before = info["context_tokens"], info["segment"]
    obs, reward, terminated, truncated, info = env.step(COMPACT)
    assert info["compacted_now"] and not (terminated or truncated) and reward == 0.0
    assert info["segment"] == segment_before + 1
    assert info["context_tokens"] < tokens_before
    assert env.inner.context.messages[2].kind == "summary"
    event = env.inner.trajectory.compactions()[-1]
    assert info["summarizer"] == "worker"  # the reference agent wrote its own summary
    assert event.summary.startswith("# Auto Context Summary")
    assert feature(obs, "compacted") == 1.0 and feature(obs, "steps_since_compaction") == 0.0
    assert env.action_masks().tolist() == [True, False]  # no compaction right after one
    obs, *_, info = env.step(COMPACT)  # masked: the worker acts instead
    assert info["compaction_masked"] and not info["compacted_now"]
    assert info["segment"] == segment_before + 1
    env.close()


def test_extractive_summary_when_the_worker_cannot_summarize(tiny_task_file: Path) -> None:
    env = make(tiny_task_file, worker=ReadsForever)
    env.reset(seed=0)
    env.step(CONTINUE)
    _, *_, info = env.step(COMPACT)
    event = env.inner.trajectory.compactions()[-1]
    assert info["compacted_now"] and info["summarizer"] == "extractive"
    assert "files read: calc/ops.py" in event.summary  # built from the real tool results
    env.close()


def test_the_agent_can_choose_the_extractive_summarizer(tiny_task_file: Path) -> None:
    env = make(tiny_task_file, choose_summarizer=True)
    assert env.action_space == gym.spaces.Discrete(3)
    sb3_check_env(env, warn=True)
    env.reset(seed=0)
    assert env.action_masks().tolist() == [True, False, False]
    env.step(CONTINUE)
    calls_before = len(env.inner.trajectory.model_calls())
    _, *_, info = env.step(COMPACT_EXTRACTIVE)
    assert info["compacted_now"] and info["summarizer"] == "extractive"
    calls = env.inner.trajectory.model_calls()
    assert len(calls) == calls_before + 1 and calls[-1].produced_by == "fallback"
    assert env.action_masks().tolist() == [True, False, False]
    env.reset(seed=0)
    env.step(CONTINUE)
    _, *_, info = env.step(COMPACT)  # the reference worker writes its own
    assert info["summarizer"] == "worker"
    with pytest.raises(ValueError, match="2 \\(compact, extractive"):
        env.step(3)
    env.close()
    two_actions = make(tiny_task_file)
    two_actions.reset(seed=0)
    with pytest.raises(ValueError, match=r"0 \(continue\), 1 \(compact\)$"):
        two_actions.step(COMPACT_EXTRACTIVE)
    two_actions.close()


def test_features_follow_the_worker(tiny_task_file: Path) -> None:
    env = make(tiny_task_file)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (len(FEATURE_NAMES),) and feature(obs, "tests_seen") == 0.0
    assert feature(obs, "cost_spent") == 0.0
    obs, *_ = env.step(CONTINUE)  # the reference agent runs the suite first: 1 of 2 fails
    assert feature(obs, "tests_seen") == 1.0
    assert feature(obs, "tests_failing_fraction") == pytest.approx(0.5)
    assert feature(obs, "tests_passing_fraction") == pytest.approx(0.5)
    assert feature(obs, "last_kind_test") == 1.0 and feature(obs, "last_exit_nonzero") == 0.0
    assert feature(obs, "cost_spent") > 0.0 and feature(obs, "steps_since_compaction") > 0.0
    assert feature(obs, "cache_warm_fraction") > 0.0  # the prompt grew by appending
    done = False
    while not done:
        obs, _, terminated, truncated, _ = env.step(CONTINUE)
        done = terminated or truncated
    assert feature(obs, "files_changed") == pytest.approx(0.1)  # the fix touches one file
    assert feature(obs, "tests_failing_fraction") == 0.0
    env.close()


def test_reward_is_success_minus_cost_penalty(tiny_task_file: Path) -> None:
    env = make(tiny_task_file, cost_penalty=5.0)
    env.reset(seed=0)
    rewards, done = [], False
    while not done:
        _, reward, terminated, truncated, info = env.step(CONTINUE)
        rewards.append(reward)
        done = terminated or truncated
    assert rewards[:-1] == [0.0] * (len(rewards) - 1)
    assert info["inner_reward"] == 1.0 and not info["infra_failure"]
    usd = env.inner.meter.total.usd
    assert usd > 0 and info["cost_usd"] == usd
    assert rewards[-1] == pytest.approx(1.0 - 5.0 * usd)
    env.close()


def test_infra_failure_gives_zero_and_a_flag(
    tiny_task_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ac_env.env.grade", lambda *args, **kwargs: GradeResult.infra("no sandbox"))
    env = make(tiny_task_file)
    env.reset(seed=0)
    done = False
    while not done:
        _, reward, terminated, truncated, info = env.step(CONTINUE)
        done = terminated or truncated
    assert math.isnan(info["inner_reward"]) and info["infra_failure"] and reward == 0.0
    env.close()


def test_a_worker_failure_ends_the_episode(tiny_task_file: Path) -> None:
    env = make(tiny_task_file, worker=Crashes())
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(CONTINUE)
    assert truncated and not terminated and info["exit_reason"] == "policy_error"
    assert info["inner_reward"] == 0.0 and reward == pytest.approx(-10.0 * info["cost_usd"])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(CONTINUE)
    env.close()


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("# test: the whole suite\ntimeout 55 python3 -m pytest -q 2>&1 | tail -n 60", "test"),
        ("cat -n calc/ops.py | sed -n '1,9p'", "read"),
        ("grep -rn add calc/ 2>/dev/null", "search"),
        ("sed -i 's/-/+/' calc/ops.py", "edit"),
        ("git checkout -- calc/ops.py\npython3 -m pytest -q tests", "edit"),
        ("python3 - <<'END'\nif a > b:\n    print(1)\nEND", "other"),
        ("echo hi > notes.txt", "edit"),
    ],
)
def test_command_kind(command: str, kind: str) -> None:
    assert command_kind(command) == kind


def test_text_env_under_gymnasium_async_vector_env(tiny_task_file: Path) -> None:
    kwargs = {"task_source": str(tiny_task_file), "split": None}
    envs = gym.vector.AsyncVectorEnv(
        [lambda: gym.make("AutoCompact-SWE-v0", **kwargs)] * 2, shared_memory=False
    )
    agent = ReferenceAgent()
    observations, _ = envs.reset(seed=[0, 1])
    finished = np.zeros(2, dtype=bool)
    for _ in range(30):
        actions = tuple(agent.act(obs).text for obs in observations)
        observations, rewards, terminated, truncated, _ = envs.step(actions)
        ended = terminated | truncated
        assert all(r == 1.0 for r in rewards[ended])
        finished |= ended
        if finished.all():
            break
    assert finished.all()
    envs.close()


@pytest.mark.slow
def test_timing_env_under_sb3_subproc_vec_env(tiny_task_file: Path) -> None:
    envs = SubprocVecEnv([lambda: make(tiny_task_file, cost_penalty=0.0)] * 2)
    envs.seed(0)
    observations = envs.reset()
    finished, final_rewards = np.zeros(2, dtype=bool), []
    for _ in range(30):
        masks = np.stack(envs.env_method("action_masks"))
        first = observations[:, FEATURE_INDEX["compacted"]] == 0
        actions = np.where(masks[:, COMPACT] & first, COMPACT, CONTINUE)  # compact once
        observations, rewards, dones, infos = envs.step(actions)
        assert observations.shape == (2, len(FEATURE_NAMES))
        final_rewards += [r for r, d in zip(rewards, dones, strict=True) if d]
        finished |= dones
        if finished.all():
            break
    assert finished.all() and all(r in (0.0, 1.0) for r in final_rewards)
    envs.close()


class MaskRecorder(gym.Wrapper):
    """Keeps whether each step asked for a compaction the mask forbade."""

    def __init__(self, env: TimingEnv) -> None:
        super().__init__(env)
        self.masked: list[bool] = []

    def step(self, action):
        result = self.env.step(action)
        self.masked.append(result[-1]["compaction_masked"])
        return result

    def action_masks(self) -> np.ndarray:
        return self.env.unwrapped.action_masks()


@pytest.mark.slow
def test_maskable_ppo_never_picks_a_masked_compaction(tiny_task_file: Path) -> None:
    from sb3_contrib import MaskablePPO

    env = MaskRecorder(make(tiny_task_file, choose_summarizer=True))
    model = MaskablePPO("MlpPolicy", env, n_steps=24, batch_size=8, n_epochs=1, seed=0)
    model.learn(total_timesteps=24)
    assert len(env.masked) >= 24 and not any(env.masked)
    env.close()
