"""The pieces every run of episodes shares: the one infrastructure-retry policy, and run
configurations that take the env's settings from ``EnvConfig``."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ac_env.bench.config import BenchConfig
from ac_env.config import EnvConfig, TaskSelection
from ac_env.runs.retry import ATTEMPTS, recorded_infra_error, run_episode_with_retries
from ac_train.collect import CollectConfig


@dataclass(frozen=True)
class Outcome:
    status: str
    error: str | None = None
    policy: int = 0


class Script:
    """Attempts that go as scripted: ``"ok"``, ``"infra"`` (a result reporting an
    infrastructure error) or ``"raise"``; records the policy each attempt got."""

    def __init__(self, *steps: str) -> None:
        self.steps = list(steps)
        self.policies: list[int] = []
        self.made = 0

    def make_policy(self) -> int:
        self.made += 1
        return self.made

    def __call__(self, policy: int, attempt: int) -> Outcome:
        self.policies.append(policy)
        step = self.steps[attempt - 1]
        if step == "raise":
            raise OSError(f"sandbox died on attempt {attempt}")
        if step == "infra":
            return Outcome("infra_error", f"server down on attempt {attempt}", policy)
        return Outcome("ok", policy=policy)


def retry(script: Script, crashed: bool = True):
    return run_episode_with_retries(
        script,
        make_policy=script.make_policy,
        infra_error=recorded_infra_error,
        crashed=(lambda error: Outcome("infra_error", f"crashed: {error}")) if crashed else None,
        label="task seed 0",
    )


def test_the_first_clean_attempt_stands_with_a_fresh_policy_each_time():
    script = Script("infra", "ok")
    retried = retry(script)
    assert retried.result == Outcome("ok", policy=2)
    assert retried.attempts == 2 == ATTEMPTS
    assert script.policies == [1, 2]
    assert retry(Script("ok")).attempts == 1


def test_when_every_attempt_fails_the_last_returned_record_stands():
    retried = retry(Script("infra", "raise"))
    assert retried.result.error == "server down on attempt 1"
    assert retried.attempts == ATTEMPTS
    retried = retry(Script("raise", "infra"))
    assert retried.result.error == "server down on attempt 2"


def test_an_episode_that_always_crashes_gets_the_callers_record():
    retried = retry(Script("raise", "raise"))
    assert retried.result == Outcome("infra_error", "crashed: OSError: sandbox died on attempt 2")
    assert retried.attempts == ATTEMPTS


def test_without_crashed_an_exception_propagates():
    with pytest.raises(OSError, match="attempt 1"):
        retry(Script("raise", "ok"), crashed=False)
    assert retry(Script("infra", "ok"), crashed=False).result.status == "ok"


def test_a_policy_that_cannot_be_made_is_configuration_and_raises():
    def bad_worker() -> int:
        raise ValueError("worker: no such model")

    script = Script("ok")
    with pytest.raises(ValueError, match="no such model"):
        run_episode_with_retries(
            script,
            make_policy=bad_worker,
            infra_error=recorded_infra_error,
            crashed=lambda error: Outcome("infra_error", error),
            label="task",
        )
    assert script.policies == []


def test_an_infra_record_without_its_reason_still_counts():
    assert recorded_infra_error(Outcome("infra_error")) == "unknown infrastructure error"
    assert recorded_infra_error(Outcome("ok", "ignored")) is None


@pytest.mark.parametrize("config", [BenchConfig, CollectConfig])
def test_run_configs_take_the_env_settings_from_env_config(config):
    assert issubclass(config, TaskSelection)
    shared = set(config.model_fields) & set(EnvConfig.model_fields)
    assert {"task_source", "split", "subset", "task_ids", "sandbox"} <= shared
    own = {"max_steps"} if config is CollectConfig else set()  # collect's caps its rollouts
    for name in shared - own:
        ours, env = config.model_fields[name], EnvConfig.model_fields[name]
        assert ours.default == env.default, name
        assert ours.metadata == env.metadata, name


def test_a_derived_setting_is_checked_as_the_env_checks_it():
    with pytest.raises(ValueError, match="context_window"):
        BenchConfig(context_window=0)
    assert BenchConfig(task_source="real").split is None  # the env's rule, not a copy
    assert CollectConfig(task_source="real").split is None
