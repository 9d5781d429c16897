"""The verifiers environment's configuration, without a model: the hub package loads it by its
id, one task per seed carrying the env's settings, and a bad env setting is refused when the
taskset is configured, naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

v1 = pytest.importorskip("verifiers.v1", reason="verifiers is not installed: the verifiers extra")

HUB_PACKAGE = Path(__file__).resolve().parents[1] / "environments" / "autocompact_swe"


@pytest.fixture
def hub(monkeypatch):
    monkeypatch.syspath_prepend(str(HUB_PACKAGE))
    import autocompact_swe

    return autocompact_swe


def test_the_hub_package_loads_one_task_per_seed_with_the_envs_settings(hub):
    env = hub.load_environment(env={"split": "medium", "max_steps": 7}, seeds=[3, 5])
    tasks = list(env.taskset)
    assert [t.data.seed for t in tasks] == [3, 5]
    assert all(t.data.env == {"split": "medium", "max_steps": 7} for t in tasks)
    harness = env.config.agent.harness
    assert isinstance(v1.load_harness(harness), hub.AutoCompactHarness)
    assert isinstance(env.config.agent.runtime, v1.SubprocessConfig)


def test_verifiers_resolves_the_taskset_and_harness_by_the_hub_id(hub):
    assert v1.environment_class("autocompact-swe") is v1.SingleAgentEnv
    assert v1.default_harness_id("autocompact-swe") == "autocompact-swe"


def test_a_bad_env_setting_is_refused_naming_the_field(hub):
    with pytest.raises(ValueError, match="max_steps"):
        hub.load_environment(env={"max_steps": -1})
