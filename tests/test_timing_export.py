"""The exported timing policy file decides exactly like the SB3 model it came from
(examples/ppo_timing_long.py's ``export``), and that example's ``imitate`` clones a rule."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO

from ac_env.timing import TimingEnv
from ac_env.timing.features import FEATURE_NAMES
from ac_env.timing.policy_file import load_timing_policy

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "ppo_timing_long.py"


def example_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("ppo_timing_long", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class FeatureSpace(gym.Env):  # type: ignore[type-arg]
    observation_space = gym.spaces.Box(0.0, 1.0, (len(FEATURE_NAMES),), np.float32)
    action_space = gym.spaces.Discrete(2)

    def action_masks(self) -> np.ndarray:
        return np.array([True, True])


def observed_features() -> np.ndarray:
    """Feature vectors of a real (built-in) episode, compacting every third turn."""
    env = TimingEnv(env_kwargs={"max_steps": 12})
    obs, _ = env.reset(seed=0, options={"task_id": env.inner.tasks[0].instance_id})
    rows, done, turn = [obs], False, 0
    while not done:
        turn += 1
        obs, _, terminated, truncated, _ = env.step(int(turn % 3 == 0))
        rows.append(obs)
        done = terminated or truncated
    env.close()
    return np.array(rows)


def test_the_exported_policy_decides_like_the_sb3_model(tmp_path: Path) -> None:
    model = MaskablePPO("MlpPolicy", FeatureSpace(), policy_kwargs={"net_arch": [64, 64]}, seed=3)
    observed = observed_features()
    random_rows = np.random.default_rng(0).random((200, len(FEATURE_NAMES)), dtype=np.float32)
    batch = np.concatenate([observed, random_rows])
    with torch.no_grad():  # a bias that splits the batch between the two actions
        logits = model.policy.action_net(
            model.policy.mlp_extractor.policy_net(torch.as_tensor(batch))
        )
        gaps = (logits[:, 1] - logits[:, 0]).sort().values
        middle = len(gaps) // 2  # halfway between two rows' gaps: no row sits on a tie
        model.policy.action_net.bias[1] -= float(gaps[middle - 1] + gaps[middle]) / 2
    expected, _ = model.predict(batch, deterministic=True)
    assert 0 < expected.sum() < len(batch)

    path = tmp_path / "policy.json"
    example_module().export(model, path, {"run": "test"}, {"run": "test"})
    loaded = load_timing_policy(path)
    decided = np.array([int(loaded.wants_compaction(row)) for row in batch])
    assert decided.tolist() == expected.tolist()


def test_imitate_clones_an_every_n_rule_into_the_policy() -> None:
    module = example_module()
    rows = np.random.default_rng(1).random((400, len(FEATURE_NAMES)), dtype=np.float32)
    actions = (rows[:, 2] >= 0.3).astype(int)  # "compact once 30% of max_steps have passed"
    masks = np.ones((len(rows), 2), dtype=bool)
    masks[::7, 1] = False  # compaction not allowed: the rule continues there
    actions[::7] = 0
    demos = module.Demonstrations(rows, actions, masks, np.zeros(len(rows), np.float32), 1)
    model = MaskablePPO("MlpPolicy", FeatureSpace(), policy_kwargs={"net_arch": [64, 64]}, seed=0)
    fit = module.imitate(model, demos, epochs=300)
    assert fit["free_decisions"] == int(masks[:, 1].sum())
    assert fit["agreement"] >= 0.95 and fit["agreement_on_compactions"] >= 0.9
