"""Asynchronous GRPO: the staleness policy, versions per sample, training, resume, Ray."""

from __future__ import annotations

import importlib.util
import itertools
import json
import threading
import time

import pytest
import torch

from ac_env.trajectory import Trajectory
from ac_train.cli import main
from ac_train.grpo.async_trainer import (
    AsyncConfig,
    AsyncGRPOTrainer,
    GroupQueue,
    RolloutWorkerError,
)
from ac_train.grpo.config import GRPOConfig
from ac_train.grpo.metrics import read_metrics
from ac_train.grpo.trainer import TRAINER_STATE, RolloutGroup
from ac_train.models.checkpoints import tiny_model_and_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def group(version: int, task: str = "t") -> RolloutGroup:
    return RolloutGroup(task_id=task, policy_version=version, trajectories=[])


def queue(on_stale: str, max_staleness: int = 0, groups: int = 2, version: int = 0) -> GroupQueue:
    return GroupQueue(
        groups_per_step=groups,
        max_staleness=max_staleness,
        on_stale=on_stale,
        capacity=8,
        version=version,
    )


def claim_in_thread(q: GroupQueue) -> tuple[threading.Thread, list[int | None]]:
    claimed: list[int | None] = []
    thread = threading.Thread(target=lambda: claimed.append(q.claim()))
    thread.start()
    return thread, claimed


# ---- the queue's staleness policy ----------------------------------------------------------


def test_drop_discards_groups_staler_than_the_bound_and_never_holds_workers_back():
    q = queue("drop", max_staleness=1)
    assert [q.claim() for _ in range(10)] == list(range(10))  # no gate in drop mode
    for version in (0, 0, 1, 2, 2):
        q.put(group(version))
    q.advance(2)
    assert [q.take().policy_version for _ in range(3)] == [1, 2, 2]
    assert q.dropped == 2


def test_pause_holds_workers_until_the_learner_catches_up():
    q = queue("pause", max_staleness=1, groups=2)
    assert [q.claim() for _ in range(4)] == [0, 1, 2, 3]  # (0 + 1 + 1) * 2 groups ahead
    thread, claimed = claim_in_thread(q)
    thread.join(0.3)
    assert thread.is_alive() and claimed == []
    q.advance(1)
    thread.join(5)
    assert claimed == [4]


def test_a_dropped_group_frees_its_place_so_paused_workers_go_on():
    """Group 0 is slow; groups 1 and 2 finish first and are trained on. When group 0 arrives
    it is too stale and dropped, and its place goes to a new group."""
    q = queue("pause", max_staleness=1, groups=1)
    assert [q.claim(), q.claim()] == [0, 1]
    q.advance(1)  # step 0 trained on group 1
    assert q.claim() == 2
    q.advance(2)  # step 1 trained on group 2
    assert q.claim() == 3
    thread, claimed = claim_in_thread(q)
    thread.join(0.3)
    assert thread.is_alive()  # (2 + 1 + 1) * 1 groups are out
    q.put(group(0))
    q.put(group(2))
    assert q.take().policy_version == 2 and q.dropped == 1
    thread.join(5)
    assert claimed == [4]


def test_a_full_queue_makes_workers_wait_and_close_releases_them():
    q = GroupQueue(groups_per_step=1, max_staleness=5, on_stale="drop", capacity=1, version=0)
    assert q.put(group(0))
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(q.put(group(0))))
    thread.start()
    thread.join(0.3)
    assert thread.is_alive()
    q.close()
    thread.join(5)
    assert results == [False] and q.claim() is None


def test_a_worker_failure_reaches_the_learner():
    q = queue("drop")
    q.fail(ValueError("sandbox broke"))
    with pytest.raises(RolloutWorkerError) as caught:
        q.take()
    assert isinstance(caught.value.__cause__, ValueError)


def test_async_config_validates_its_fields():
    with pytest.raises(ValueError, match="max_staleness"):
        AsyncConfig(max_staleness=-1)
    with pytest.raises(ValueError, match="on_stale"):
        AsyncConfig(on_stale="wait")
    with pytest.raises(ValueError, match="ray_address: only with backend 'ray'"):
        AsyncConfig(ray_address="auto")


# ---- training with the tiny model ----------------------------------------------------------


@pytest.fixture
def alternating_rewards(monkeypatch):
    """A random tiny model never fixes the bug: each group gets one success and one failure,
    so the learner's steps on the workers' real rollouts carry a gradient."""
    rewards = itertools.cycle([1.0, 0.0])
    monkeypatch.setattr(Trajectory, "reward", property(lambda trajectory: next(rewards)))


def grpo_config(tmp_path, tiny_task_file, steps: int, workers: int = 2) -> GRPOConfig:
    return GRPOConfig(
        output_dir=tmp_path / "run",
        env={"task_source": str(tiny_task_file), "split": None},
        forced_compaction_threshold=200,
        steps=steps,
        tasks_per_step=2,
        rollouts_per_task=2,
        rollout_max_steps=2,
        rollout_max_tokens=4096,
        max_new_tokens=8,
        rollout_workers=workers,
        learning_rate=1e-3,
        save_every=1,
        progress=False,
    )


class Recorded(AsyncGRPOTrainer):
    """Records the groups each step used; ``learner_delay`` makes the learner slow."""

    def __init__(self, *args, learner_delay: float = 0.0, fail_at: int | None = None, **kw):
        super().__init__(*args, **kw)
        self.used: dict[int, list[RolloutGroup]] = {}
        self.learner_delay = learner_delay
        self.fail_at = fail_at

    def update(self, step, groups, **kwargs):
        if step == self.fail_at:
            raise KeyboardInterrupt("interrupted")
        self.used[step] = list(groups)
        time.sleep(self.learner_delay)
        return super().update(step, groups, **kwargs)


def trainer(tmp_path, tiny_task_file, steps, settings: AsyncConfig, **kw) -> Recorded:
    model, tokenizer = tiny_model_and_tokenizer()
    config = grpo_config(tmp_path, tiny_task_file, steps)
    return Recorded(config, settings, model, tokenizer, **kw)


def assert_within_bound(run: Recorded, history, bound: int) -> None:
    for metrics in history:
        used = run.used[metrics.step]
        lags = [metrics.step - g.policy_version for g in used]
        assert len(used) == 2 and all(0 <= lag <= bound for lag in lags)
        assert metrics.staleness_max == max(lags) <= bound
        for g in used:  # every sample carries the version that generated it
            calls = [c for t in g.trajectories for c in t.model_calls()]
            assert calls, [t.end for t in g.trajectories]
            assert {c.policy_version for c in calls} == {g.policy_version}


def rollout_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("rollout-")]


@pytest.mark.slow
def test_slow_learner_with_drop_trains_only_on_fresh_groups(
    tmp_path, tiny_task_file, alternating_rewards
):
    run = trainer(
        tmp_path, tiny_task_file, 2, AsyncConfig(max_staleness=0, on_stale="drop"),
        learner_delay=1.5,
    )  # fmt: skip
    initial = {k: v.clone() for k, v in run.model.state_dict().items()}
    history = run.train()
    assert [m.step for m in history] == [0, 1]
    assert_within_bound(run, history, bound=0)
    assert sum(m.dropped_groups for m in history) > 0  # workers ran on while it learned
    assert all(m.trained_tokens > 0 and m.grad_norm for m in history)
    assert all(m.clip_fraction < 0.01 for m in history)  # workers' log-probs match the learner's
    trained = run.model.state_dict()
    assert any(not torch.equal(trained[k], initial[k]) for k in initial)
    assert rollout_threads() == []


@pytest.mark.slow
def test_slow_learner_with_pause_generates_nothing_stale(
    tmp_path, tiny_task_file, alternating_rewards
):
    run = trainer(
        tmp_path, tiny_task_file, 2, AsyncConfig(max_staleness=0, on_stale="pause"),
        learner_delay=1.0,
    )  # fmt: skip
    history = run.train()
    assert_within_bound(run, history, bound=0)
    assert [m.dropped_groups for m in history] == [0, 0]
    assert history[1].wait_s > 0.05  # paused workers start step 1's groups only after step 0


@pytest.mark.slow
def test_an_interrupted_async_run_resumes_at_its_last_checkpoint(
    tmp_path, tiny_task_file, alternating_rewards
):
    settings = AsyncConfig(max_staleness=1, on_stale="pause")
    first = trainer(tmp_path, tiny_task_file, 3, settings, fail_at=2)
    with pytest.raises(KeyboardInterrupt):
        first.train()
    assert rollout_threads() == []  # the workers stopped with the learner
    assert [m.step for m in read_metrics(tmp_path / "run")] == [0, 1]
    checkpoint = tmp_path / "run" / "checkpoint-2"
    state = torch.load(checkpoint / TRAINER_STATE, weights_only=False)
    assert state["step"] == 2 and state["async"] == settings.model_dump(mode="json")
    assert state["optimizer"]["state"] and "torch_rng" in state
    saved = {k: v.clone() for k, v in first.model.state_dict().items()}

    second = trainer(tmp_path, tiny_task_file, 3, settings)
    history = second.train()
    assert second.start_step == 2 and [m.step for m in history] == [2]
    # the workers started from the checkpoint: nothing generated before the interruption
    assert {g.policy_version for g in second.used[2]} == {2}
    assert_within_bound(second, history, bound=1)
    assert [m.step for m in read_metrics(tmp_path / "run")] == [0, 1, 2]
    assert (tmp_path / "run" / "checkpoint-3" / TRAINER_STATE).is_file()
    assert any(not torch.equal(second.model.state_dict()[k], saved[k]) for k in saved)


@pytest.fixture(scope="module")
def ray_cluster():
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed: pip install 'autocompact[ray]' (scripts/setup.sh does)")
    import ray

    ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_actor_workers_feed_the_learner(
    tmp_path, tiny_task_file, alternating_rewards, ray_cluster
):
    run = trainer(tmp_path, tiny_task_file, 2, AsyncConfig(max_staleness=1, backend="ray"))
    initial = {k: v.clone() for k, v in run.model.state_dict().items()}
    history = run.train()
    assert [m.step for m in history] == [0, 1]
    assert_within_bound(run, history, bound=1)
    assert all(m.trained_tokens > 0 for m in history)
    trained = run.model.state_dict()
    assert any(not torch.equal(trained[k], initial[k]) for k in initial)
    assert ray_cluster.is_initialized()  # a session the caller started is left running


@pytest.mark.slow
def test_ac_train_grpo_async_from_the_command_line(tmp_path, tiny_task_file, capsys):
    model, tokenizer = tiny_model_and_tokenizer()
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    args = [
        "grpo",
        "--output-dir", str(tmp_path / "run"),
        "--model", str(tmp_path / "model"),
        "--task-source", str(tiny_task_file),
        "--split", "all",
        "--steps", "2",
        "--tasks-per-step", "1",
        "--rollouts-per-task", "2",
        "--rollout-max-steps", "1",
        "--max-new-tokens", "4",
    ]  # fmt: skip
    with pytest.raises(SystemExit, match="--max-staleness needs --async"):
        main([*args, "--max-staleness", "0"])
    tensorboard = importlib.util.find_spec("tensorboard") is not None
    extra = ["--report-to", "tensorboard"] if tensorboard else []
    code = main([*args, "--async", "--max-staleness", "0", "--rollout-workers", "2", *extra])
    assert code == 0
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert last["step"] == 1 and last["rollouts"] == 2 and last["staleness_max"] == 0
    assert [m.step for m in read_metrics(tmp_path / "run")] == [0, 1]
    if tensorboard:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
        events.Reload()
        assert [e.step for e in events.Scalars("grpo/wait_s")] == [0, 1]
