"""Segment-aware GRPO, synchronous: sample, segment, advantage, one optimizer step; repeat.

Each step draws ``tasks_per_step`` tasks (uniformly, or skipping those whose latest group had no
gradient: ``ac_train.grpo.task_draw``) and runs ``rollouts_per_task`` episodes of each from the same
start with the current policy (one env per rollout worker, sampling at ``temperature``).
Every trajectory is cut into segments at its rewrites (``ac_train.segments``); the group-relative
advantage of the trajectory is shared by all its segments, and ``ac_train.grpo.loss`` takes one
token-mean clipped step on them. Metrics go to ``OUTPUT_DIR/metrics.jsonl`` (one line a step);
checkpoints to ``OUTPUT_DIR/checkpoint-<steps done>`` every ``save_every`` steps, and a run
started again in the same directory continues from the latest one.

``GRPOTrainer.update`` is the learner's step on a batch of rollout groups, shared with the
asynchronous trainer (``async_trainer``), which feeds it groups from rollout workers instead
of sampling them in place.

Data-parallel learning goes through HF accelerate: ``accelerate launch --num_processes N -m
ac_train.cli grpo ...`` trains one model in N processes (one per GPU; on CPUs add
``ACCELERATE_USE_CPU=true`` and ``--multi_gpu``). Each process runs the rollouts of every N-th of
the step's tasks (``tasks_per_step`` must be a multiple of N), computes their groups' advantages
(a group never spans processes) and trains on its own segments with a DDP-wrapped model; the
token-mean is over the trained tokens of all processes, so the step's gradient is the one a
single process would take on the whole batch. The metrics are the whole step's; the main process
alone writes them and the checkpoints, which every process reads on resume (``OUTPUT_DIR`` must
be shared by all machines). One process (a plain ``ac-train grpo``) is the same code with no
communication.

Defaults follow the method's RL stage: learning rate 1e-6, 8 tasks x 8 rollouts, "at most 50
env steps and 32K tokens per rollout", no KL, no entropy bonus, the loss averaged over tokens
(over every trained token of the step: ``token_mean``). The rollout env runs under those RL
settings: its context window is ``rollout_max_tokens``, forced compaction is off unless
``forced_compaction_threshold`` asks for it (a rollout that reaches the window ends, as the
32K budget implies), and every context count uses the policy's own tokenizer, so the budget the
model sees is the one it is trained under. The effective env settings are printed when a run
starts.

The run's settings are ``ac_train.grpo.config`` (``GRPOConfig``), what each step reports
``ac_train.grpo.metrics`` (``StepMetrics``); this module re-exports both.

Presets (``GRPO_PRESETS``, ``GRPOConfig.from_preset``) name the RL rows of the method's main
table: ``autocompact`` (compaction offered, the policy's own judgement, no forced compaction:
the defaults) and ``compaction_rl`` (CompactionRL: RL with length-triggered compaction only,
forced at 16K, proactive compaction unavailable: the prompt offers none and a summary the
policy writes anyway is not applied).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import torch
from accelerate import Accelerator
from tqdm import tqdm
from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

import ac_env  # noqa: F401  (registers AutoCompact-SWE-v0)
from ac_env.agents.rollout import RolloutJob, rollout_many
from ac_env.policy import Policy, SamplingConfig
from ac_env.runs.cheating import cheating_rate, probe_task_ids
from ac_env.trajectory import Trajectory
from ac_train.advantages import segment_group
from ac_train.grpo.config import GRPO_PRESETS, DemonstrationStarts, GRPOConfig
from ac_train.grpo.continuation import continuation_starts
from ac_train.grpo.loss import (
    Behaviour,
    LearnerStats,
    PolicySequence,
    StepBatch,
    accumulate_gradients,
    step_batch,
)
from ac_train.grpo.metrics import (
    METRICS_FILE,
    ScoredRollout,
    StepFigures,
    StepMetrics,
    keep_metrics_before,
    metric_writers,
    read_metrics,
    step_metrics,
)
from ac_train.grpo.start_probe import PROBE_FILE, ProbeResult, read_probe, write_probe
from ac_train.grpo.start_states import (
    StartState,
    demonstration_starts,
    teachable,
)
from ac_train.grpo.task_draw import TaskDraw
from ac_train.models.batched_acts import BatchedActs
from ac_train.models.checkpoints import load_model, smollm2_gguf_path
from ac_train.models.policy import TransformersPolicy
from ac_train.models.served_sampler import ServedSampler
from ac_train.segments import Segment

logger = logging.getLogger(__name__)

CHECKPOINT_PREFIX = "checkpoint-"
TRAINER_STATE = "trainer_state.pt"


@dataclass(frozen=True)
class RolloutGroup:
    """The ``rollouts_per_task`` episodes of one task, all sampled by the weights of
    ``policy_version`` (optimizer steps they had taken); ``generate_s``: seconds it took."""

    task_id: str
    policy_version: int
    trajectories: list[Trajectory]
    generate_s: float = 0.0


def learner_step(
    model: PreTrainedModel | torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    sequences: Sequence[PolicySequence],
    config: GRPOConfig,
    pad_token_id: int,
    accelerator: Accelerator | None = None,
    mean_over: int | None = None,
    behaviour: Behaviour = "learner",
) -> tuple[LearnerStats, float | None]:
    """One optimizer step on ``sequences``; returns the learner's figures and the gradient
    norm before clipping (``None`` when nothing was trained and no step was taken). With an
    ``accelerator`` that prepared ``model`` and ``optimizer``, ``sequences`` are this process's
    share of the step and the figures the whole step's (``accumulate_gradients``, which also
    says what ``mean_over`` is)."""
    optimizer.zero_grad(set_to_none=True)
    stats = accumulate_gradients(
        model,
        sequences,
        micro_batch_size=config.micro_batch_size,
        micro_batch_tokens=config.micro_batch_tokens,
        clip=config.clip,
        temperature=config.temperature,
        pad_token_id=pad_token_id,
        accelerator=accelerator,
        mean_over=mean_over,
        share_prefix=config.share_prefix,
        behaviour=behaviour,
        importance_cap=config.importance_cap,
    )
    if not stats.trained_tokens:
        return stats, None
    max_norm = config.max_grad_norm if config.max_grad_norm is not None else float("inf")
    parameters = list(model.parameters())
    if accelerator is not None:
        norm = accelerator.clip_grad_norm_(parameters, max_norm)
    else:
        norm = torch.nn.utils.clip_grad_norm_(parameters, max_norm)
    grad_norm = float(norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return stats, grad_norm


class GRPOTrainer:
    """``GRPOTrainer(config).train()``. A model and tokenizer may be passed in (tests, an SFT
    checkpoint already loaded); otherwise ``config.model`` is loaded.

    ``accelerator`` places the model and, under a multi-process launch, joins the processes;
    ``model`` is the module itself (rollouts, weights, checkpoints), ``learner_model`` the same
    one as the learner runs it (DDP-wrapped when there are several processes)."""

    data_parallel: ClassVar[bool] = True
    """Whether this trainer may run in several processes."""
    samples_may_be_stale: ClassVar[bool] = False
    """Whether a step may train on samples of older weights (what ``behaviour_logprobs``
    defaults to: ``GRPOConfig.behaviour``)."""

    def __init__(
        self,
        config: GRPOConfig,
        model: PreTrainedModel | None = None,
        tokenizer: PreTrainedTokenizerBase | None = None,
        starts: Sequence[StartState] | None = None,
    ) -> None:
        """``starts``: the start states to draw from when the caller built them already (with
        ``config.demonstration``, which still sets the policy's steps and the probe); None:
        built here from ``config.demonstration``."""
        if starts is not None and config.demonstration is None:
            raise ValueError("starts: given without config.demonstration")
        if (model is None) != (tokenizer is None):
            raise ValueError("pass both model and tokenizer, or neither")
        self.accelerator = Accelerator()
        processes = self.accelerator.num_processes
        if processes > 1 and not self.data_parallel:
            raise ValueError(
                f"{type(self).__name__} learns in one process; it cannot run under a "
                f"{processes}-process launch"
            )
        probe = config.demonstration.probe_samples if config.demonstration else 0
        if probe and processes > 1:
            raise ValueError("demonstration.probe_samples: the probe runs in one process")
        if config.tasks_per_step % processes:
            raise ValueError(
                f"tasks_per_step ({config.tasks_per_step}) must be a multiple of the number of "
                f"processes ({processes}): each runs the groups of an equal share of the tasks"
            )
        if model is None or tokenizer is None:
            model, tokenizer = load_model(config.model)
        self.config = config
        self.behaviour = config.behaviour(self.samples_may_be_stale)
        self.model = model
        self.tokenizer = tokenizer
        self.show_progress = config.progress and self.accelerator.is_main_process
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.pad_token_id = int(pad)
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
        )
        self.learner_model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.make_env = config.env_maker(tokenizer)
        self.starts: dict[str, StartState] = {}
        # what a step draws from: the env's task ids, or with ``config.demonstration`` the
        # ids of the start states (``<task>@-<steps left>``)
        self.task_ids = self._task_ids()
        if config.demonstration is not None:
            found = (
                list(starts)
                if starts is not None
                else self._demonstration_starts(config.demonstration)
            )
            self.starts = {start.id: start for start in found}
            self.task_ids = list(self.starts)
        if config.tasks_per_step > len(self.task_ids):
            offered = (
                "start states the demonstrations give" if self.starts else "tasks the env offers"
            )
            raise ValueError(
                f"tasks_per_step ({config.tasks_per_step}) exceeds the {len(self.task_ids)} "
                f"{offered}"
            )
        self.draw = TaskDraw(self.task_ids, config.seed, config.skip_uniform_for)
        self.start_step = 0
        self._cheat_probe_ids: list[str] | None = None
        self.sampling = SamplingConfig(
            temperature=config.temperature,
            max_new_tokens=config.max_new_tokens,
            stop_after_action=config.stop_after_action,
        )
        self.served_sampler: ServedSampler | None = None
        if config.sampler is not None and config.sampler_weights is not None:
            if processes > 1 or type(self).rollouts is not GRPOTrainer.rollouts:
                raise ValueError("a served sampler runs with the synchronous trainer, one process")
            self.served_sampler = ServedSampler(
                config.sampler, config.sampler_weights, smollm2_gguf_path(), tokenizer
            )
            self.served_sampler.check(self.sampling)

    def train(self) -> list[StepMetrics]:
        config = self.config
        main = self.accelerator.is_main_process
        config.output_dir.mkdir(parents=True, exist_ok=True)
        checkpoint = latest_checkpoint(config.output_dir) if config.resume else None
        if checkpoint is not None:
            self.start_step = self.load_checkpoint(checkpoint)
            message = f"resumed from {checkpoint} at step {self.start_step}"
            logger.info(message)
            if main:
                tqdm.write(message)
        if main:
            keep_metrics_before(config.output_dir / METRICS_FILE, self.start_step)
        self.accelerator.wait_for_everyone()
        probe = config.demonstration.probe_samples if config.demonstration else 0
        self.draw = TaskDraw(  # afresh: a second train() must not count earlier groups twice
            self.task_ids,
            config.seed,
            config.skip_uniform_for,
            favour_mixed=config.favour_mixed or bool(probe),
            group_size=config.rollouts_per_task,
        )
        if probe:
            self.draw.seen = {r.start_id: list(r.rewards) for r in self.probe_starts(probe)}
        for done in read_metrics(config.output_dir):  # what the draws know of earlier steps
            if done.step < self.start_step:
                self.draw.record(done.step, done.groups)
        history = []
        steps = tqdm(
            range(self.start_step, config.steps),
            initial=self.start_step,
            total=config.steps,
            desc="grpo",
            unit="step",
            disable=not self.show_progress,
        )
        with self.rollout_session(), metric_writers(config, enabled=main) as tensorboard:
            for step in steps:
                metrics = self.step(step)
                if config.cheat_probe and (step + 1) % config.cheat_probe_every == 0:
                    metrics.cheating_rate = self.cheating_rate(step + 1)
                self.draw.record(step, metrics.groups)
                history.append(metrics)
                if main:
                    with (config.output_dir / METRICS_FILE).open("a", encoding="utf-8") as out:
                        out.write(metrics.model_dump_json() + "\n")
                for name, value in metrics.model_dump().items():
                    number = isinstance(value, int | float)  # not None, not the groups
                    if tensorboard is not None and number and name != "step":
                        tensorboard.add_scalar(f"grpo/{name}", value, step)
                steps.set_postfix(reward=metrics.reward_mean, tokens=metrics.trained_tokens)
                done = step + 1
                if done % config.save_every == 0 or done == config.steps:
                    self.save_checkpoint(done)
        return history

    def probe_starts(self, samples: int) -> list[ProbeResult]:
        """``samples`` rollouts of the current weights from each start state, the rewards
        written to ``OUTPUT_DIR/start_probe.jsonl`` after each start (a resumed run probes
        only the starts not in it)."""
        path = self.config.output_dir / PROBE_FILE
        results = [r for r in read_probe(path) if r.start_id in self.starts]
        todo = [start for start in self.starts if start not in {r.start_id for r in results}]
        for start_id in tqdm(todo, desc="probe", unit="start", disable=not self.show_progress):
            started = time.perf_counter()
            runs = self.rollouts([start_id] * samples, self.start_step, probe_samples=samples)
            rewards = [run.reward for run in runs if run.reward is not None]
            wall_s = time.perf_counter() - started
            results.append(ProbeResult(start_id=start_id, rewards=rewards, wall_s=wall_s))
            write_probe(path, results)
        return results

    def cheating_rate(self, version: int) -> float | None:
        """The current weights' pass rate on ``cheat_probe`` held-out impossible tasks of the
        run's task source (``ac_env.runs.cheating``): a rising rate is a policy learning to
        game the grader. Sampled with the rollouts' settings."""
        source = str(self.config.env.get("task_source", "builtin"))
        if self._cheat_probe_ids is None:
            self._cheat_probe_ids = probe_task_ids(source, self.config.cheat_probe)
        self.model.eval()
        options = self.config.env_options(self.tokenizer)
        env = {k: v for k, v in options.items() if k not in ("task_source", "split", "task_ids")}
        probe = cheating_rate(
            lambda: TransformersPolicy.sampled_by(
                self.model, self.tokenizer, self.sampling, seed=version, policy_version=version
            ),
            self._cheat_probe_ids,
            task_source=source,
            env_kwargs=env,
        )
        return probe.rate

    def rollout_session(self) -> contextlib.AbstractContextManager[None]:
        """What runs around the training loop, after any resume: nothing here; the
        asynchronous trainer starts its rollout workers."""
        return contextlib.nullcontext()

    def step(self, step: int) -> StepMetrics:
        """Rollouts with the current policy, then one optimizer step on their segments."""
        config = self.config
        started = time.perf_counter()
        tasks = self.draw.draw(step, config.tasks_per_step)
        tasks = tasks[self.accelerator.process_index :: self.accelerator.num_processes]
        trajectories = self.rollouts(
            [task for task in tasks for _ in range(config.rollouts_per_task)], step
        )
        size = config.rollouts_per_task
        groups = [
            RolloutGroup(task, step, trajectories[i * size : (i + 1) * size])
            for i, task in enumerate(tasks)
        ]
        rollout_s = time.perf_counter() - started
        return self.update(step, groups, rollout_s=rollout_s, wait_s=rollout_s)

    def update(
        self,
        step: int,
        groups: Sequence[RolloutGroup],
        *,
        rollout_s: float,
        wait_s: float,
        dropped_groups: int = 0,
    ) -> StepMetrics:
        """The learner's step: group advantages, segments, one optimizer step on them, and
        the step's metrics. ``step`` is the learner's version (optimizer steps taken)."""
        started = time.perf_counter()
        scored = self.score(groups)
        segments, batch = self.batch(step, scored)
        stats, grad_norm = learner_step(
            self.learner_model,
            self.optimizer,
            batch.sequences,
            self.config,
            self.pad_token_id,
            self.accelerator,
            mean_over=batch.mean_over,
            behaviour=self.behaviour,
        )
        figures = StepFigures(
            reward_groups=[[r.reward for r in group] for group in scored],
            trained_groups=[[r.trained_reward for r in group] for group in scored],
            compactions=[r.compactions for group in scored for r in group],
            segments=len({(s.trajectory_id, s.segment_index) for s in segments}),
            format_errors=[
                span.format_error
                for s in segments
                for span in s.outputs
                if span.produced_by == "policy"
            ],
            completion_tokens=[
                len(call.output_token_ids)
                for group in scored
                for rollout in group
                for call in rollout.policy_part.model_calls()
                if call.produced_by == "policy" and call.output_token_ids is not None
            ],
            versions=[group.policy_version for group in groups],
            task_ids=[group.task_id for group in groups],
            rollout_s=rollout_s,
            wait_s=wait_s,
            learn_s=time.perf_counter() - started,
        ).gathered(self.accelerator)
        return step_metrics(step, figures, stats, grad_norm, dropped_groups)

    def score(self, groups: Sequence[RolloutGroup]) -> list[list[ScoredRollout]]:
        """Each rollout's policy part (from its start state on), reward, and the reward it is
        trained on (``None``: an infra error, or cut off under ``overlong_masking``)."""
        config = self.config
        masking = config.rollout_max_steps if config.overlong_masking else None
        scored = []
        for group in groups:
            at = self._start_step(group.task_id)
            scored.append([ScoredRollout.of(t, at, masking) for t in group.trajectories])
        return scored

    def batch(
        self, step: int, scored: Sequence[Sequence[ScoredRollout]]
    ) -> tuple[list[Segment], StepBatch]:
        """The step's segments, and what the optimizer step trains on: group advantages over
        the trained rewards, shared by every segment of a trajectory, under ``token_mean``."""
        config = self.config
        segments: list[Segment] = []
        advantage_of: dict[str, float | None] = {}
        index = 0
        for group in scored:
            rollouts = segment_group(
                [r.policy_part for r in group],
                [r.trained_reward for r in group],
                self.tokenizer,
                run_ids=[f"step{step}-{index + i}" for i in range(len(group))],
                prefix_mismatch=config.prefix_mismatch,
                scale_by_std=config.scale_advantages_by_std,
                eps=config.advantage_eps,
            )
            index += len(group)
            for rollout in rollouts:
                segments += rollout.segments
                advantage_of.update({s.trajectory_id: rollout.advantage for s in rollout.segments})
        needs_sampler = self.behaviour == "sampler" or config.importance_cap is not None
        batch = step_batch(
            segments, advantage_of, config.token_mean, require_behaviour=needs_sampler
        )
        return segments, batch

    def rollouts(
        self, task_ids: list[str], step: int, *, probe_samples: int = 0
    ) -> list[Trajectory]:
        """One episode per entry of ``task_ids``, in order, sampled by the current weights;
        ``probe_samples``: these are a probe's (``probe_starts``), in runs of that many, drawn
        from other seeds than the step's groups."""
        self.model.eval()  # no dropout: the learner recomputes the sampler's log-probs
        workers, rank = self.config.rollout_workers, self.accelerator.process_index
        made = iter(range(rank * workers, (rank + 1) * workers))  # a seed per process and worker
        key = (self.config.seed, step, -1) if probe_samples else (self.config.seed, step)
        sampler = self.served_sampler
        if sampler is not None and sampler.version != step:
            sampler.push(self.model, step)

        shared: Policy | None = None  # batch_groups: one policy for all workers
        if self.config.batch_groups:
            one_call = self.config.one_call_rollouts  # then a group per decode
            shared = TransformersPolicy.sampled_by(
                self.model,
                self.tokenizer,
                self.sampling,
                seed=hash((*key, rank)) % 2**63,
                policy_version=step,
                samples_per_prompt=(probe_samples or self.config.rollouts_per_task)
                if one_call
                else 1,
            )
            if not one_call:  # the workers' calls, gathered into one decode
                shared = BatchedActs(shared, rows=workers)

        def policy() -> Policy:
            if sampler is not None:
                return sampler.policy(self.sampling)
            if shared is not None:
                return shared
            return TransformersPolicy.sampled_by(
                self.model,
                self.tokenizer,
                self.sampling,
                seed=hash((*key, next(made))) % 2**63,
                policy_version=step,
            )

        jobs = [self._job(task_id) for task_id in task_ids]
        demonstration = self.config.demonstration
        return rollout_many(
            self.make_env,
            policy,
            jobs,
            workers=self.config.rollout_workers,
            max_steps=demonstration.max_policy_steps if demonstration else None,
            progress=self.show_progress,
        )

    def _job(self, task_id: str) -> RolloutJob:
        start = self.starts.get(task_id)
        if start is None:
            return RolloutJob(options={"task_id": task_id})
        return RolloutJob(options={"task_id": start.task_id}, start=start.snapshot)

    def _start_step(self, task_id: str) -> int:
        """Env steps a rollout of ``task_id`` (a task or start-state id) began after."""
        start = self.starts.get(task_id)
        return start.step if start is not None else 0

    def save_checkpoint(self, steps_done: int) -> Path:
        """``checkpoint-<steps_done>``: the model (``save_pretrained``), tokenizer, optimizer,
        step and torch RNG; written aside and renamed, so a partial one is never picked up.
        Several processes: the main one writes it (the replicas are equal) while all wait."""
        target = self.config.output_dir / f"{CHECKPOINT_PREFIX}{steps_done}"
        self.accelerator.wait_for_everyone()
        if self.accelerator.is_main_process:
            staging = target.with_name(f".{target.name}.tmp")
            shutil.rmtree(staging, ignore_errors=True)
            self.model.save_pretrained(staging)
            self.tokenizer.save_pretrained(staging)
            state = {
                "step": steps_done,
                "optimizer": self.optimizer.state_dict(),
                "torch_rng": torch.get_rng_state(),
                **self.extra_state(),
            }
            torch.save(state, staging / TRAINER_STATE)
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
        self.accelerator.wait_for_everyone()
        return target

    def extra_state(self) -> dict[str, Any]:
        """More entries for the checkpoint's trainer state (the async trainer's queue policy)."""
        return {}

    def load_checkpoint(self, checkpoint: Path) -> int:
        """Restore the weights, optimizer and RNG saved in ``checkpoint``; returns its step."""
        saved = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=self.model.dtype)
        self.model.load_state_dict(saved.state_dict())
        state = torch.load(checkpoint / TRAINER_STATE, weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        return int(state["step"])

    def _demonstration_starts(self, demonstration: DemonstrationStarts) -> list[StartState]:
        """The start states a step draws from; a start whose workspace already passes
        teaches nothing and is left out (``teachable``)."""
        if demonstration.continuation is not None:
            found = continuation_starts(
                self.make_env,
                self.task_ids,
                [demonstration.continuation],
                progress=self.show_progress,
            )
            return [start.start for start in found]
        return teachable(
            demonstration_starts(
                self.make_env,
                self.task_ids,
                steps_left=demonstration.steps_left,
                progress=self.show_progress,
            )
        )

    def _task_ids(self) -> list[str]:
        """The env's task ids; the main process also prints the env's effective settings."""
        env = self.make_env()
        try:
            if self.accelerator.is_main_process:
                tqdm.write(f"rollout env: {json.dumps(_effective_settings(env))}")
            return [task.instance_id for task in env.unwrapped.tasks]  # type: ignore[attr-defined]
        finally:
            env.close()


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The finished ``checkpoint-<n>`` with the largest ``n``, if any."""
    found = []
    for path in output_dir.glob(f"{CHECKPOINT_PREFIX}*"):
        number = path.name.removeprefix(CHECKPOINT_PREFIX)
        if number.isdigit() and (path / TRAINER_STATE).is_file():
            found.append((int(number), path))
    return max(found)[1] if found else None


def _effective_settings(env: gym.Env[Any, Any]) -> dict[str, Any]:
    """The env's resolved config; the counter by its name, long texts (a system prompt) cut."""
    config = env.unwrapped.config  # type: ignore[attr-defined]
    settings: dict[str, Any] = config.describe()
    settings["token_counter"] = config.token_counter.name
    for name, value in settings.items():
        if isinstance(value, str) and len(value) > 80:
            settings[name] = f"{value[:40]}... ({len(value)} chars)"
    return settings


# The trainer's entry points, its configuration (``grpo_config``) and metrics (``grpo_metrics``)
# included: ``from ac_train.grpo import GRPOConfig, GRPOTrainer``.
__all__ = [
    "GRPO_PRESETS",
    "DemonstrationStarts",
    "GRPOConfig",
    "GRPOTrainer",
    "RolloutGroup",
    "StepMetrics",
    "latest_checkpoint",
    "learner_step",
    "read_metrics",
]
