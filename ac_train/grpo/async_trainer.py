"""Asynchronous GRPO: rollout workers and the learner run at once, with a staleness bound.

Each rollout worker generates whole groups (the ``rollouts_per_task`` episodes of one task) with
its own copy of the policy's weights and puts them on a bounded queue; the learner takes
``tasks_per_step`` groups a step and runs ``GRPOTrainer.update``, the same update as the
synchronous trainer. After each optimizer step the learner publishes its weights with version
``steps done`` through the weight hook ``push_weights(state_dict, version)``; a worker adopts the
newest weights it was given when it starts its next group, so every episode of a group, and every
model call in it (``ModelCall.policy_version``), carries the one version that sampled it.

Staleness of a group = the learner's version when it uses the group minus the group's version.
No group with staleness above ``max_staleness`` is ever trained on: the learner discards it
(``dropped_groups`` in the metrics). ``on_stale`` chooses what the workers do about it:

- ``drop``: workers never wait (except for room on the queue); stale groups are discarded.
- ``pause``: a worker starts a group only while fewer than
  ``(version + max_staleness + 1) * tasks_per_step`` groups have been started and not
  discarded, so nothing is generated that a learner consuming in order would find stale;
  groups that finish out of order can still be stale and are discarded like in ``drop``.

Backends: ``threads`` (this process; each worker a thread with its own model copy; torch
releases the GIL in its kernels and the env waits on subprocesses, so threads overlap) and
``ray`` (each worker a Ray actor, on any machine of the cluster; ``pip install
'autocompact[ray]'``). Both implement ``Rollouts``: ``generate(worker, task_id, seed)``,
``push_weights(state_dict, version)``, ``cancel()`` and ``close()``.

Generation on a vLLM server instead: a ``Rollouts`` whose ``generate`` runs the episodes with
``ac_env.agents.OpenAIChatPolicy`` against the server (log-probs requested) and whose
``push_weights`` is where the new weights go to the server: call its weight-update endpoint
(for vLLM, a collective or file-based ``update_weights`` on the engine, with the version kept
beside it), then record that version in the groups generated afterwards. None is provided here.

Checkpoints (``checkpoint-<step>``) hold the model, optimizer, step, torch RNG and the queue
policy (``AsyncConfig``). Groups queued or in flight are not saved: a resumed run starts its
workers from the checkpoint's weights at version ``step`` and discards what the interrupted run
had generated. Group ``n`` of a run is task ``n mod tasks_per_step`` of the tasks the
synchronous trainer would draw for step ``n // tasks_per_step``.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ac_env.agents.rollout import rollout
from ac_env.policy import Policy, PolicyOutput
from ac_train.grpo.config import GRPOConfig
from ac_train.grpo.metrics import StepMetrics
from ac_train.grpo.trainer import TRAINER_STATE, GRPOTrainer, RolloutGroup
from ac_train.models.policy import TransformersPolicy

logger = logging.getLogger(__name__)

PushWeights = Callable[[Mapping[str, torch.Tensor], int], None]
"""The weight hook: ``push_weights(state_dict, version)`` after each optimizer step."""


class AsyncConfig(BaseModel):
    """How rollout workers and the learner share work. The number of workers is
    ``GRPOConfig.rollout_workers``."""

    model_config = ConfigDict(extra="forbid")

    max_staleness: int = Field(
        default=1, ge=0, description="most policy versions between a group's generation and use"
    )
    on_stale: Literal["drop", "pause"] = Field(
        default="pause", description="discard stale groups, or hold rollouts back as well"
    )
    queue_groups: int | None = Field(
        default=None, ge=1, description="queue capacity; None: tasks_per_step*(max_staleness+1)"
    )
    backend: Literal["threads", "ray"] = "threads"
    ray_address: str | None = Field(
        default=None, description="cluster to join ('auto', 'ray://host:port'); None: local"
    )
    ray_num_cpus: float = Field(default=1.0, gt=0, description="CPUs reserved per Ray worker")

    @model_validator(mode="after")
    def _ray_options_need_ray(self) -> AsyncConfig:
        if self.backend != "ray" and self.ray_address is not None:
            raise ValueError("ray_address: only with backend 'ray'")
        return self


class RolloutCancelled(Exception):
    """Training stopped while this group was being generated."""


class _Cancellable:
    """The policy, until ``cancelled`` is set; then every call raises, which ends the episode
    at once (``rollout`` aborts it) instead of running it to its end."""

    def __init__(self, policy: Policy, cancelled: threading.Event) -> None:
        self.policy = policy
        self.cancelled = cancelled

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        if self.cancelled.is_set():
            raise RolloutCancelled("training stopped")
        return self.policy.act(observation)


class GroupRunner:
    """Generates groups with its own model (the weights of one policy version) and env.

    ``push_weights`` only records the newest weights (under a lock, a pointer swap: the
    learner never waits for a worker); ``generate`` copies them into the model before its
    group starts, so a group never mixes versions. A Ray actor wraps this class as it is."""

    def __init__(
        self,
        config: GRPOConfig,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        version: int,
    ) -> None:
        self.config = config
        self.model = model
        self.model.eval()
        self.tokenizer = tokenizer
        self.version = version
        self._pending: tuple[Mapping[str, torch.Tensor], int] | None = None
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._env: Any = None

    def push_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        with self._lock:
            newest = self._pending[1] if self._pending is not None else self.version
            if version > newest:  # a Ray actor may run two pushes out of order
                self._pending = (state_dict, version)

    def generate(self, task_id: str, seed: int) -> RolloutGroup:
        started = time.perf_counter()
        with self._lock:
            pending, self._pending = self._pending, None
            if pending is not None:
                self.version = pending[1]
        if pending is not None:
            self.model.load_state_dict(pending[0])
        if self._env is None:
            self._env = self.config.env_maker(self.tokenizer)()
        policy = _Cancellable(
            TransformersPolicy(
                self.model,
                self.tokenizer,
                max_new_tokens=self.config.max_new_tokens,
                temperature=self.config.temperature,
                stop_after_action=self.config.stop_after_action,
                seed=seed,
                policy_version=self.version,
            ),
            self._cancelled,
        )
        trajectories = []
        for _ in range(self.config.rollouts_per_task):
            if self._cancelled.is_set():
                raise RolloutCancelled("training stopped")
            trajectories.append(rollout(self._env, policy, options={"task_id": task_id}))
        return RolloutGroup(task_id, self.version, trajectories, time.perf_counter() - started)

    def cancel(self) -> None:
        self._cancelled.set()

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


class Rollouts(Protocol):
    """A set of rollout workers, each generating one group at a time."""

    workers: int

    def generate(self, worker: int, task_id: str, seed: int) -> RolloutGroup: ...

    def push_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None: ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...


class ThreadRollouts:
    """Workers in this process: one ``GroupRunner`` per worker thread, with its own copy of the
    model and of the tokenizer (a fast tokenizer is not safe to call from two threads at
    once). ``push_weights`` shares one state dict; each runner copies it into its model."""

    def __init__(
        self,
        config: GRPOConfig,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        version: int,
        workers: int,
    ) -> None:
        self.workers = workers
        self.runners = [
            GroupRunner(config, copy.deepcopy(model), copy.deepcopy(tokenizer), version)
            for _ in range(workers)
        ]

    def generate(self, worker: int, task_id: str, seed: int) -> RolloutGroup:
        return self.runners[worker].generate(task_id, seed)

    def push_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        for runner in self.runners:
            runner.push_weights(state_dict, version)

    def cancel(self) -> None:
        for runner in self.runners:
            runner.cancel()

    def close(self) -> None:
        for runner in self.runners:
            runner.close()


class RayRollouts:
    """Workers as Ray actors (``GroupRunner`` on any node with ``ray_num_cpus`` free). Joins
    the running Ray session, or starts one (``ray.init(address=...)``) and shuts it down at
    ``close``. ``push_weights`` puts the state dict in the object store once for all actors."""

    def __init__(
        self,
        config: GRPOConfig,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        version: int,
        workers: int,
        async_config: AsyncConfig,
    ) -> None:
        try:
            import ray
        except ImportError as error:
            raise RuntimeError("backend 'ray' needs Ray: pip install 'autocompact[ray]'") from error
        self._ray: Any = ray  # typed loosely: the same code checks with and without Ray
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init(address=async_config.ray_address)
        actor = self._ray.remote(num_cpus=async_config.ray_num_cpus, max_concurrency=2)(GroupRunner)
        model_ref = self._ray.put(model)
        self.workers = workers
        self.actors = [actor.remote(config, model_ref, tokenizer, version) for _ in range(workers)]

    def generate(self, worker: int, task_id: str, seed: int) -> RolloutGroup:
        group: RolloutGroup = self._ray.get(self.actors[worker].generate.remote(task_id, seed))
        return group

    def push_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        ref = self._ray.put(dict(state_dict))
        for actor in self.actors:
            actor.push_weights.remote(ref, version)

    def cancel(self) -> None:
        for actor in self.actors:
            actor.cancel.remote()

    def close(self) -> None:
        try:
            self._ray.get([actor.close.remote() for actor in self.actors])
        finally:
            for actor in self.actors:
                self._ray.kill(actor)
            if self._owns_ray:
                self._ray.shutdown()


class RolloutWorkerError(RuntimeError):
    """A rollout worker failed; the cause is chained."""


class GroupQueue:
    """The bounded queue between workers and the learner, and the staleness policy.

    ``version`` is the learner's (optimizer steps done). Workers ``claim`` a group number
    (``pause`` may hold them here), generate it and ``put`` it (waiting for room); the learner
    ``take``s groups, discarding those staler than ``max_staleness``, and ``advance``s the
    version after each step. ``close`` releases everyone."""

    def __init__(
        self,
        *,
        groups_per_step: int,
        max_staleness: int,
        on_stale: Literal["drop", "pause"],
        capacity: int,
        version: int,
    ) -> None:
        self.groups_per_step = groups_per_step
        self.max_staleness = max_staleness
        self.on_stale = on_stale
        self.capacity = capacity
        self.version = version
        self.dropped = 0
        self._started = version * groups_per_step
        self._groups: deque[RolloutGroup] = deque()
        self._error: BaseException | None = None
        self._closed = False
        self._changed = threading.Condition()

    def claim(self) -> int | None:
        """The number of the next group to generate; ``None`` once closed."""
        with self._changed:
            while not self._closed and self._held_back():
                self._changed.wait()
            if self._closed:
                return None
            number = self._started
            self._started += 1
            return number

    def _held_back(self) -> bool:
        if self.on_stale != "pause":
            return False
        allowed = (self.version + self.max_staleness + 1) * self.groups_per_step
        return self._started - self.dropped >= allowed

    def put(self, group: RolloutGroup) -> bool:
        """Queue ``group``, waiting for room; ``False`` (not queued) once closed."""
        with self._changed:
            while not self._closed and len(self._groups) >= self.capacity:
                self._changed.wait()
            if self._closed:
                return False
            self._groups.append(group)
            self._changed.notify_all()
            return True

    def take(self) -> RolloutGroup:
        """The next group within the staleness bound, waiting for one."""
        with self._changed:
            while True:
                while not self._groups and self._error is None:
                    self._changed.wait()
                if self._error is not None:
                    raise RolloutWorkerError("a rollout worker failed") from self._error
                group = self._groups.popleft()
                self._changed.notify_all()
                if self.version - group.policy_version <= self.max_staleness:
                    return group
                self.dropped += 1
                logger.debug(
                    "dropped a group of version %d at %d", group.policy_version, self.version
                )

    def advance(self, version: int) -> None:
        with self._changed:
            self.version = version
            self._changed.notify_all()

    def fail(self, error: BaseException) -> None:
        with self._changed:
            self._error = self._error or error
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    @property
    def closed(self) -> bool:
        with self._changed:
            return self._closed


class AsyncGRPOTrainer(GRPOTrainer):
    """``AsyncGRPOTrainer(config, AsyncConfig(...)).train()``: the synchronous trainer's loop,
    checkpoints and metrics, with each step's groups taken from rollout workers running
    alongside. ``weight_hooks`` are called like the workers' ``push_weights`` after each step
    (``push_weights(state_dict, version)``; the state dict is a detached copy). The learner
    runs in one process: not under a multi-process ``accelerate launch``."""

    data_parallel = False
    samples_may_be_stale = True

    def __init__(
        self,
        config: GRPOConfig,
        async_config: AsyncConfig | None = None,
        model: PreTrainedModel | None = None,
        tokenizer: PreTrainedTokenizerBase | None = None,
        weight_hooks: Sequence[PushWeights] = (),
    ) -> None:
        if config.demonstration is not None:
            raise ValueError(
                "demonstration: start states are not supported by the asynchronous trainer; "
                "run it synchronously"
            )
        for name in ("skip_uniform_for", "favour_mixed"):
            if getattr(config, name):
                raise ValueError(
                    f"{name}: the asynchronous trainer's workers draw tasks ahead of the "
                    "groups that would settle them; run it synchronously"
                )
        if config.batch_groups:
            raise ValueError(
                "batch_groups: the asynchronous trainer's workers sample apart, each with its "
                "own policy; run it synchronously"
            )
        super().__init__(config, model, tokenizer)
        self.async_config = async_config or AsyncConfig()
        self.weight_hooks = list(weight_hooks)
        self._queue: GroupQueue | None = None
        self._rollouts: Rollouts | None = None

    @contextlib.contextmanager
    def rollout_session(self) -> Iterator[None]:
        """Start the workers at the current weights and version; stop them at the end (an
        episode in progress is cut short, its group discarded)."""
        config, settings = self.config, self.async_config
        version = self.start_step
        groups = config.tasks_per_step
        queue = GroupQueue(
            groups_per_step=groups,
            max_staleness=settings.max_staleness,
            on_stale=settings.on_stale,
            capacity=settings.queue_groups or groups * (settings.max_staleness + 1),
            version=version,
        )
        rollouts: Rollouts
        if settings.backend == "ray":
            rollouts = RayRollouts(
                config, self.model, self.tokenizer, version, config.rollout_workers, settings
            )
        else:
            rollouts = ThreadRollouts(
                config, self.model, self.tokenizer, version, config.rollout_workers
            )
        threads = [
            threading.Thread(
                target=self._work, args=(rollouts, queue, worker), name=f"rollout-{worker}"
            )
            for worker in range(rollouts.workers)
        ]
        self._queue, self._rollouts = queue, rollouts
        try:
            for thread in threads:
                thread.start()
            yield
        finally:
            queue.close()
            rollouts.cancel()
            for thread in threads:
                thread.join()
            rollouts.close()
            self._queue = self._rollouts = None

    def _work(self, rollouts: Rollouts, queue: GroupQueue, worker: int) -> None:
        try:
            while (number := queue.claim()) is not None:
                task_id, seed = self.group_task(number)
                if not queue.put(rollouts.generate(worker, task_id, seed)):
                    return
        except Exception as error:
            if not queue.closed:
                queue.fail(error)

    def group_task(self, number: int) -> tuple[str, int]:
        """Group ``number``'s task and sampling seed."""
        size = self.config.tasks_per_step
        step, index = divmod(number, size)
        tasks = self.draw.draw(step, size)  # uniform: skip_uniform_for is refused here
        return tasks[index], random.Random(f"{self.config.seed}:group:{number}").getrandbits(63)

    def step(self, step: int) -> StepMetrics:
        """Take ``tasks_per_step`` groups within the staleness bound, update, publish."""
        queue, rollouts = self._queue, self._rollouts
        if queue is None or rollouts is None:
            raise RuntimeError("AsyncGRPOTrainer.step runs inside train()")
        started = time.perf_counter()
        dropped = queue.dropped
        groups = [queue.take() for _ in range(self.config.tasks_per_step)]
        wait_s = time.perf_counter() - started
        metrics = self.update(
            step,
            groups,
            rollout_s=sum(group.generate_s for group in groups),
            wait_s=wait_s,
            dropped_groups=queue.dropped - dropped,
        )
        version = step + 1
        weights = {name: value.detach().clone() for name, value in self.model.state_dict().items()}
        for push in [rollouts.push_weights, *self.weight_hooks]:
            push(weights, version)
        queue.advance(version)
        return metrics

    def extra_state(self) -> dict[str, Any]:
        return {"async": self.async_config.model_dump(mode="json")}

    def load_checkpoint(self, checkpoint: Path) -> int:
        step = super().load_checkpoint(checkpoint)
        saved = torch.load(checkpoint / TRAINER_STATE, weights_only=False, mmap=True).get("async")
        if saved is not None and saved != self.async_config.model_dump(mode="json"):
            logger.info("queue policy changed on resume: was %s, now %s", saved, self.async_config)
        return step


__all__ = [
    "AsyncConfig",
    "AsyncGRPOTrainer",
    "GroupQueue",
    "GroupRunner",
    "PushWeights",
    "RayRollouts",
    "RolloutCancelled",
    "RolloutWorkerError",
    "Rollouts",
    "ThreadRollouts",
]
