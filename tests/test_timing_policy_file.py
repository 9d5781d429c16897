"""The timing policy file: writing, reading, checking and deciding with it (numpy only)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ac_env.timing.features import FEATURE_INDEX, FEATURE_NAMES
from ac_env.timing.policy_file import (
    TimingPolicyError,
    load_timing_policy,
    save_timing_policy,
)

N = len(FEATURE_NAMES)


def threshold_layers(threshold: float = 0.5) -> list[tuple[np.ndarray, np.ndarray]]:
    """One linear layer: compact iff context_fraction > threshold."""
    weight = np.zeros((2, N))
    weight[1, FEATURE_INDEX["context_fraction"]] = 1.0
    return [(weight, np.array([threshold, 0.0]))]


def save(path: Path, layers: list[tuple[np.ndarray, np.ndarray]]) -> Path:
    return save_timing_policy(
        path,
        layers,
        activation="tanh",
        description="test policy",
        trained_on={"split": "builtin", "timesteps": 0},
        evaluation={"reward": 0.5},
    )


def with_context(fraction: float) -> np.ndarray:
    values = np.zeros(N, dtype=np.float32)
    values[FEATURE_INDEX["context_fraction"]] = fraction
    return values


def test_decision_depends_on_the_features(tmp_path: Path) -> None:
    policy = load_timing_policy(save(tmp_path / "half.json", threshold_layers()))
    assert policy.name == "half"
    assert not policy.wants_compaction(with_context(0.3))
    assert policy.wants_compaction(with_context(0.7))


def test_round_trip_keeps_weights_and_provenance(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    layers = [
        (rng.normal(size=(8, N)), rng.normal(size=8)),
        (rng.normal(size=(2, 8)), rng.normal(size=2)),
    ]
    path = save_timing_policy(
        tmp_path / "mlp.json",
        layers,
        activation="relu",
        description="two layers",
        trained_on={"algorithm": "PPO", "seed": 3},
        evaluation={"eval_reward": [0.1, 0.2]},
    )
    policy = load_timing_policy(path)
    assert policy.source.trained_on == {"algorithm": "PPO", "seed": 3}
    assert policy.source.evaluation == {"eval_reward": [0.1, 0.2]}
    assert policy.source.actions == ["continue", "compact"]
    x = rng.uniform(size=N)
    hidden = np.maximum(layers[0][0] @ x + layers[0][1], 0.0)
    expected = layers[1][0] @ hidden + layers[1][1]
    np.testing.assert_allclose(policy.logits(x), expected, rtol=1e-4)
    # one weight row a line: the file stays small and a JSON error's line is meaningful
    rows = [line for line in path.read_text().splitlines() if line.count(",") >= N - 1]
    assert len(rows) == 8


def test_activation_is_applied_between_layers_not_after_the_last(tmp_path: Path) -> None:
    first = (np.eye(2, N) * 10.0, np.zeros(2))
    last = (np.eye(2) * 3.0, np.zeros(2))
    x = np.zeros(N)
    x[0] = 1.0
    policy = load_timing_policy(save(tmp_path / "p.json", [first, last]))
    np.testing.assert_allclose(policy.logits(x), [3.0 * np.tanh(10.0), 0.0], rtol=1e-5)


def test_shape_errors_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"layers\[0\]\.weight: has 3 columns, len\(feature"):
        save(tmp_path / "p.json", [(np.zeros((2, 3)), np.zeros(2))])
    with pytest.raises(ValueError, match=r"layers\[1\]\.weight: has 4 columns, layers\[0\]'s"):
        hidden = (np.zeros((5, N)), np.zeros(5))
        save(tmp_path / "p.json", [hidden, (np.zeros((2, 4)), np.zeros(2))])
    with pytest.raises(ValueError, match=r"has 3 rows \(outputs\), len\(actions\) is 2"):
        save(tmp_path / "p.json", [(np.zeros((3, N)), np.zeros(3))])
    path = save(tmp_path / "ok.json", threshold_layers())
    document = json.loads(path.read_text())
    document["layers"][0]["bias"] = [0.0]
    path.write_text(json.dumps(document))
    with pytest.raises(TimingPolicyError, match=r"ok\.json: .*bias: has 1 values, weight has 2"):
        load_timing_policy(path)


def test_feature_name_mismatch_names_the_file_and_index(tmp_path: Path) -> None:
    path = save(tmp_path / "old.json", threshold_layers())
    document = json.loads(path.read_text())
    document["feature_names"][4] = "usd_spent"
    path.write_text(json.dumps(document))
    with pytest.raises(TimingPolicyError, match=r"old\.json: feature_names\[4\] is 'usd_spent'"):
        load_timing_policy(path)


def test_corrupt_or_missing_file_names_the_file_and_line(tmp_path: Path) -> None:
    path = save(tmp_path / "bad.json", threshold_layers())
    lines = path.read_text().splitlines()
    lines[3] = lines[3] + " oops"
    path.write_text("\n".join(lines))
    with pytest.raises(TimingPolicyError, match=r"bad\.json:4: invalid JSON"):
        load_timing_policy(path)
    with pytest.raises(TimingPolicyError, match=r"absent\.json: cannot read"):
        load_timing_policy(tmp_path / "absent.json")
    (tmp_path / "other.json").write_text('{"format": "something-else/2"}')
    with pytest.raises(TimingPolicyError, match=r"other\.json: invalid timing policy: format"):
        load_timing_policy(tmp_path / "other.json")
