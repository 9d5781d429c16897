"""TRL's own ``GRPOTrainer`` on AutoCompact episodes, through its ``rollout_func``.

``AutoCompactRollout`` is the ``rollout_func``: for each prompt group TRL hands it (the prompt
is a task's ``instance_id``), it runs ``episodes_per_group`` whole episodes of
``AutoCompact-SWE-v0`` with ``trainer.model``, so the env's compaction, forced fallback, cost
meter, limits and grader all apply, cuts each trajectory with our own segmenter
(``ac_train.segments.segment_trajectory``) and gives TRL one row per segment: exactly the
token ids the model conditioned on and sampled, the env's tokens masked out of the loss
(``env_mask``), and every segment of an episode carrying that episode's advantage.

Why this extension point. TRL 1.16 offers three:

- ``environment_factory`` runs TRL's own tool-call loop: the conversation only grows (tool
  results are appended), so a compaction, which rewrites the prefix, cannot be expressed, and
  TRL's chat template and tool schema replace the env's action format.
- ``trl.experimental.async_grpo`` forks a training row when a turn rewrites the conversation,
  but generates only through a vLLM server (no CPU path) and owns the turn loop itself.
- ``rollout_func`` hands the whole rollout to us. Its one constraint: it returns exactly one
  row per prompt it received (TRL scores, groups and slices advantages by that count, with
  ``num_generations`` consecutive rows per group), while an episode has a varying number of
  segments. So each episode gets a fixed number of row slots, ``segments_per_episode``:
  its segments in order, then empty slots (one context token, one completion token, nothing
  trained). ``num_generations = episodes_per_group * segments_per_episode``; an episode with
  more segments than slots raises ``SegmentSlotsExceeded`` (never a silent drop).

Advantages. TRL computes ``reward - mean(group)`` (``scale_rewards="none"``, which this adapter
requires). Every slot of an episode is scored with the episode's advantage computed as our
learner does (``ac_train.advantages.segment_group``: the episode's grade against its
group's, scaled by the group's std unless ``scale_advantages_by_std`` is off); each episode
fills the same number of slots, so the group mean TRL subtracts is zero (up to float rounding)
and every row trains with its episode's advantage. An infrastructure failure (no grade) scores
``None``: TRL leaves the row out of the baseline and gives it advantage 0, as our learner does.
The env's grade itself is logged as ``autocompact/reward`` (and per row as
``autocompact_grade`` in TRL's completion logs).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
from datasets import Dataset
from pydantic import BaseModel, ConfigDict, Field, field_validator
from transformers import PreTrainedTokenizerBase
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.grpo_trainer import RewardFunc

import ac_env  # noqa: F401  (registers AutoCompact-SWE-v0)
from ac_env.agents.rollout import RolloutJob, rollout_many
from ac_env.tokens import HFTokenCounter
from ac_env.trajectory import Trajectory
from ac_train.advantages import segment_group
from ac_train.models.policy import TransformersPolicy
from ac_train.segments import PrefixMismatch, Segment

ENV_ID = "AutoCompact-SWE-v0"
ADVANTAGE = "autocompact_advantage"
GRADE = "autocompact_grade"
TRAJECTORY = "autocompact_trajectory"
SEGMENT = "autocompact_segment"
EMPTY_SLOT = -1
"""``autocompact_segment`` of a slot no segment filled."""


class TRLRolloutConfig(BaseModel):
    """The episodes TRL trains on. TRL's own ``GRPOConfig`` gives the sampling: ``temperature``
    and ``top_p`` of every model call and ``max_completion_length`` (output tokens per call)."""

    model_config = ConfigDict(extra="forbid")

    env: dict[str, Any] = Field(
        default_factory=dict,
        description="gym.make options of AutoCompact-SWE-v0 (task_source, split, max_steps, "
        "context_window, forced_compaction_threshold, budget_usd, ...); every context count "
        "uses the trained model's tokenizer",
    )
    episodes_per_group: int = Field(default=4, ge=2, description="the group size G")
    segments_per_episode: int = Field(
        default=4,
        ge=1,
        description="row slots per episode: at least 1 + the compactions an episode can make",
    )
    scale_advantages_by_std: bool = Field(
        default=True, description="divide by the group's std + eps; False: Dr. GRPO"
    )
    advantage_eps: float = Field(default=1e-6, gt=0)
    prefix_mismatch: PrefixMismatch = Field(
        default="split", description="a prompt that is not a token prefix starts a new part"
    )
    rollout_workers: int = Field(default=1, ge=1, description="episodes run at once")
    trajectory_dir: Path | None = Field(
        default=None, description="write every trajectory there as <id>.jsonl; None: keep none"
    )
    seed: int = 0

    @field_validator("env")
    @classmethod
    def _counter_is_the_models(cls, env: dict[str, Any]) -> dict[str, Any]:
        if "token_counter" in env:
            raise ValueError("env.token_counter: set by the adapter (the model's tokenizer)")
        return env

    @property
    def num_generations(self) -> int:
        """TRL's ``num_generations``: the rows of one group."""
        return self.episodes_per_group * self.segments_per_episode


class SegmentSlotsExceeded(ValueError):
    """An episode cut into more segments than ``segments_per_episode`` row slots."""


@dataclass(frozen=True)
class Row:
    """One TRL row: ``prompt_ids + completion_ids`` is the sequence the model saw."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float | None]
    segment: int


@dataclass(frozen=True)
class Episode:
    """One episode of the latest rollout call, and the rows it gave TRL."""

    trajectory_id: str
    trajectory: Trajectory
    segments: list[Segment]
    advantage: float | None


class AutoCompactRollout:
    """The ``rollout_func`` (and the reward function) that puts AutoCompact under TRL's
    ``GRPOTrainer``. See the module docstring for what each row holds."""

    def __init__(self, config: TRLRolloutConfig, tokenizer: PreTrainedTokenizerBase) -> None:
        self.config = config
        self.tokenizer = tokenizer
        self.episodes: list[Episode] = []
        """The episodes of the latest call, in row order."""
        self._calls = 0

    # ---- what the trainer is built with ------------------------------------------------------

    def make_env(self) -> gym.Env[Any, Any]:
        return gym.make(ENV_ID, token_counter=HFTokenCounter(self.tokenizer), **self.config.env)

    def task_ids(self) -> list[str]:
        env = self.make_env()
        try:
            return [task.instance_id for task in env.unwrapped.tasks]  # type: ignore[attr-defined]
        finally:
            env.close()

    def dataset(self, task_ids: Sequence[str] | None = None) -> Dataset:
        """TRL's train dataset: one prompt per task, the task's ``instance_id``."""
        return Dataset.from_dict({"prompt": list(task_ids or self.task_ids())})

    def trainer_settings(self) -> dict[str, Any]:
        """The ``trl.GRPOConfig`` settings the adapter needs (pass them with your own)."""
        return {
            "num_generations": self.config.num_generations,
            "scale_rewards": "none",
            "mask_truncated_completions": False,
            "top_k": 0,
            "min_p": None,
            "repetition_penalty": 1.0,
        }

    @property
    def reward_funcs(self) -> list[RewardFunc]:
        return [self.advantage]

    # ---- TRL's calls -------------------------------------------------------------------------

    def __call__(self, prompts: list[Any], trainer: GRPOTrainer) -> dict[str, Any]:
        """TRL's ``rollout_func``: ``episodes_per_group`` episodes per group of prompts."""
        self.check(trainer)
        size = self.config.num_generations
        if len(prompts) % size:
            raise ValueError(
                f"rollout_func got {len(prompts)} prompts, not a multiple of num_generations "
                f"({size}): a group must not span processes"
            )
        task_ids = []
        for start in range(0, len(prompts), size):
            group = prompts[start : start + size]
            if not isinstance(group[0], str) or any(p != group[0] for p in group):
                raise ValueError(
                    "prompt: each of a group's rows must be the same task instance_id (a str); "
                    f"got {group[0]!r} (use AutoCompactRollout.dataset)"
                )
            task_ids += [group[0]] * self.config.episodes_per_group
        trajectories = self._rollouts(task_ids, trainer)
        self._calls += 1
        self.episodes = self._episodes(trajectories, trainer)
        return self._output(self.episodes)

    def advantage(
        self, completions: list[Any], autocompact_advantage: list[float | None], **kwargs: Any
    ) -> list[float | None]:
        """The reward function: each row's episode advantage (see the module docstring); it
        logs the env's grade and the episode figures TRL has no column for."""
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            for episode in self.episodes:
                end = episode.trajectory.end
                log_metric("autocompact/compactions", len(episode.trajectory.compactions()))
                log_metric("autocompact/segments", len(episode.segments))
                if end is not None:
                    log_metric("autocompact/cost_usd", end.cost.usd)
                    log_metric("autocompact/submitted", float(end.submitted))
                if episode.trajectory.reward is not None:
                    log_metric("autocompact/reward", episode.trajectory.reward)
        return list(autocompact_advantage)

    def check(self, trainer: GRPOTrainer) -> None:
        """The trainer settings under which TRL trains what the method trains."""
        args = cast(GRPOConfig, trainer.args)
        if args.max_completion_length is None:
            raise ValueError(
                "GRPOConfig.max_completion_length: must be set (tokens per model call)"
            )
        wanted = {**self.trainer_settings(), "use_vllm": False}
        for name, value in wanted.items():
            if getattr(args, name) != value:
                raise ValueError(
                    f"GRPOConfig.{name}: must be {value!r} for AutoCompactRollout, got "
                    f"{getattr(args, name)!r} (pass **rollout.trainer_settings())"
                )
        if len(trainer.reward_funcs) != 1 or trainer.reward_funcs[0] != self.advantage:
            raise ValueError("reward_funcs: must be rollout.reward_funcs (the episode advantage)")

    # ---- the work ----------------------------------------------------------------------------

    def _rollouts(self, task_ids: list[str], trainer: GRPOTrainer) -> list[Trajectory]:
        args = cast(GRPOConfig, trainer.args)
        model = trainer.accelerator.unwrap_model(trainer.model)
        version = trainer.state.global_step
        rank = trainer.accelerator.process_index
        seeds = iter(range(self.config.rollout_workers))

        def policy() -> TransformersPolicy:
            seed = _seed(self.config.seed, rank, version, self._calls, next(seeds))
            return TransformersPolicy(
                model,
                self.tokenizer,
                max_new_tokens=cast(int, args.max_completion_length),
                temperature=args.temperature,
                top_p=args.top_p,
                seed=seed,
                policy_version=version,
            )

        jobs = [
            RolloutJob(
                seed=_seed(self.config.seed, rank, version, self._calls, index),
                options={"task_id": task_id},
            )
            for index, task_id in enumerate(task_ids)
        ]
        was_training = model.training
        model.eval()
        try:  # the policy decodes under inference_mode, in the rollout threads
            return rollout_many(
                self.make_env, policy, jobs, workers=self.config.rollout_workers, progress=False
            )
        finally:
            model.train(was_training)

    def _episodes(self, trajectories: list[Trajectory], trainer: GRPOTrainer) -> list[Episode]:
        config = self.config
        rank = trainer.accelerator.process_index
        episodes = []
        for start in range(0, len(trajectories), config.episodes_per_group):
            group = trajectories[start : start + config.episodes_per_group]
            rollouts = segment_group(
                group,
                [t.reward for t in group],
                self.tokenizer,
                run_ids=[f"call{self._calls}-rank{rank}-{start + i}" for i in range(len(group))],
                prefix_mismatch=config.prefix_mismatch,
                scale_by_std=config.scale_advantages_by_std,
                eps=config.advantage_eps,
            )
            for trajectory, rollout in zip(group, rollouts, strict=True):
                segments, advantage, run_id = rollout.segments, rollout.advantage, rollout.run_id
                trajectory_id = segments[0].trajectory_id if segments else run_id
                if len(segments) > config.segments_per_episode:
                    raise SegmentSlotsExceeded(
                        f"episode {trajectory_id}: {len(segments)} segments, more than "
                        f"segments_per_episode ({config.segments_per_episode}); raise it, or "
                        "bound the compactions (env max_steps, forced_compaction_threshold)"
                    )
                if config.trajectory_dir is not None:
                    config.trajectory_dir.mkdir(parents=True, exist_ok=True)
                    trajectory.write(config.trajectory_dir / f"{_file_name(trajectory_id)}.jsonl")
                episodes.append(Episode(trajectory_id, trajectory, segments, advantage))
        return episodes

    def _output(self, episodes: list[Episode]) -> dict[str, Any]:
        columns: dict[str, list[Any]] = {
            name: []
            for name in (
                "prompt_ids",
                "completion_ids",
                "logprobs",
                "env_mask",
                ADVANTAGE,
                GRADE,
                TRAJECTORY,
                SEGMENT,
            )
        }
        for episode in episodes:
            rows = [segment_row(s, i) for i, s in enumerate(episode.segments)]
            rows += [self._empty_row()] * (self.config.segments_per_episode - len(rows))
            for row in rows:
                columns["prompt_ids"].append(row.prompt_ids)
                columns["completion_ids"].append(row.completion_ids)
                columns["logprobs"].append(row.logprobs)
                columns["env_mask"].append(row.env_mask)
                columns[ADVANTAGE].append(episode.advantage)
                columns[GRADE].append(episode.trajectory.reward)
                columns[TRAJECTORY].append(episode.trajectory_id)
                columns[SEGMENT].append(row.segment)
        return columns

    def _empty_row(self) -> Row:
        pad = self.tokenizer.pad_token_id
        eos = self.tokenizer.eos_token_id
        if pad is None or eos is None:
            raise ValueError("tokenizer: needs a pad and an eos token (TRL needs both)")
        return Row([int(pad)], [int(eos)], [0], [None], EMPTY_SLOT)


def segment_row(segment: Segment, index: int) -> Row:
    """A segment as one TRL row: the context before its first output is the prompt, the rest
    the completion, trained where GRPO trains (the policy's own outputs) and nowhere else."""
    last = len(segment.input_ids) - 1  # TRL needs a completion of at least one token
    split = min(segment.outputs[0].start, last) if segment.outputs else last
    trained = segment.grpo_mask()
    return Row(
        prompt_ids=segment.input_ids[:split],
        completion_ids=segment.input_ids[split:],
        env_mask=[int(t) for t in trained[split:]],
        logprobs=segment.behaviour_logprobs[split:],
        segment=index,
    )


def _seed(*parts: int) -> int:
    digest = hashlib.sha256(",".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") % 2**63


def _file_name(trajectory_id: str) -> str:
    return trajectory_id.replace("/", "_").replace(":", "_")


__all__ = [
    "AutoCompactRollout",
    "Episode",
    "Row",
    "SegmentSlotsExceeded",
    "TRLRolloutConfig",
    "segment_row",
]
