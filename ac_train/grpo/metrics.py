"""What a GRPO step reports: ``StepMetrics`` (one line of ``OUTPUT_DIR/metrics.jsonl``),
the per-rollout figures it is computed from (``ScoredRollout``, ``StepFigures``, gathered over
processes), reading and trimming the metrics file on resume, and the optional TensorBoard
writer."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelerate import Accelerator
from accelerate.utils import gather_object
from pydantic import BaseModel, ConfigDict, Field

import ac_env  # noqa: F401  (registers AutoCompact-SWE-v0)
from ac_env.trajectory import Trajectory
from ac_train.grpo.config import GRPOConfig
from ac_train.grpo.loss import (
    LearnerStats,
)
from ac_train.grpo.start_states import (
    policy_compactions,
    policy_events,
)
from ac_train.grpo.task_draw import GroupOutcome

METRICS_FILE = "metrics.jsonl"


class StepMetrics(BaseModel):
    """One line of ``metrics.jsonl``. Per-trajectory figures count every finished rollout."""

    model_config = ConfigDict(extra="forbid")

    step: int
    policy_version: int = Field(
        description="optimizer steps behind the policy that sampled (async: the oldest group's)"
    )
    rollouts: int
    infra_errors: int = Field(description="rollouts with no reward: left out of the loss")
    overlong_masked: int = Field(
        default=0, description="rollouts left out of the loss by overlong_masking"
    )
    reward_mean: float | None = Field(description="over rollouts without an infra error")
    solved_groups: int = Field(description="groups with at least one reward of 1")
    informative_groups: int = Field(
        description="groups with unequal rewards among the rollouts trained on (a gradient)"
    )
    compactions_per_trajectory: float
    segments_per_trajectory: float
    format_error_rate: float | None = Field(
        default=None,
        description="policy calls whose output was no valid action for its turn, as the "
        "segments mark it (one cut off at max_new_tokens before its closing fence is one); "
        "None in older metrics files",
    )
    completion_tokens_mean: float = Field(
        default=0.0,
        description="tokens the policy sampled per call (its calls with token records); 0 in "
        "older metrics files",
    )
    completion_tokens_max: int = Field(
        default=0, description="the longest call's: a batched group decodes as long as it"
    )
    trained_sequences: int
    trained_tokens: int = Field(description="trained tokens with a gradient (informative)")
    mean_over_tokens: int = Field(
        default=0, description="N, the trained tokens the loss's token-mean divides by"
    )
    tokens: int = Field(description="tokens fed to the learner")
    loss: float
    clip_fraction: float
    grad_norm: float | None
    rollout_s: float = Field(
        description="sync: wall time (several processes: the slowest's); async: worker-seconds "
        "of the groups"
    )
    learn_s: float = Field(
        description="the learner's seconds (several processes: after the last one's rollouts)"
    )
    wait_s: float = Field(
        default=0.0, description="the learner's wait for rollouts (sync: all of rollout_s)"
    )
    staleness_mean: float = Field(
        default=0.0, description="policy versions between generation and use, over the groups"
    )
    staleness_max: int = 0
    dropped_groups: int = Field(default=0, description="stale groups discarded (async)")
    cheating_rate: float | None = Field(
        default=None,
        description="pass rate on the held-out impossible tasks (cheat_probe) after this step's "
        "update; None: not probed at this step",
    )
    groups: list[GroupOutcome] = Field(
        default_factory=list,
        description="each group's task (or start-state) id and trained rewards, in order; "
        "empty in older metrics files",
    )


def read_metrics(output_dir: Path) -> list[StepMetrics]:
    path = output_dir / METRICS_FILE
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [StepMetrics.model_validate_json(line) for line in lines if line.strip()]


def keep_metrics_before(path: Path, step: int) -> None:
    """Drop lines of steps a resumed run will redo (written after the last checkpoint)."""
    if not path.is_file():
        return
    kept = [
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and json.loads(line)["step"] < step
    ]
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")


@dataclass(frozen=True)
class ScoredRollout:
    """One rollout as the learner takes it: ``policy_part``, its events from its start step on
    (``start_states.policy_events``); ``reward`` (``None``: an infra error); ``trained_reward``,
    the reward its advantage is computed from (``None`` also when ``overlong_masking`` masks
    it); and the policy's compactions."""

    policy_part: Trajectory
    reward: float | None
    trained_reward: float | None
    compactions: int

    @classmethod
    def of(
        cls, trajectory: Trajectory, start_step: int, overlong_masking: int | None
    ) -> ScoredRollout:
        """``overlong_masking``: the rollout step cap under which a rollout cut off by the
        context window or by that cap is masked; ``None``: no masking."""
        reward = trajectory.reward
        end = trajectory.end.exit_reason if trajectory.end is not None else None
        cut_off = end == "context_overflow" or (
            end == "max_steps"
            and overlong_masking is not None
            and len(trajectory.model_calls()) >= overlong_masking
        )
        return cls(
            policy_part=policy_events(trajectory, start_step),
            reward=reward,
            trained_reward=None if overlong_masking is not None and cut_off else reward,
            compactions=len(policy_compactions(trajectory, start_step)),
        )


def step_metrics(
    step: int,
    figures: StepFigures,
    stats: LearnerStats,
    grad_norm: float | None,
    dropped_groups: int,
) -> StepMetrics:
    """The ``metrics.jsonl`` line of a step from its (gathered) figures."""
    rewards = [r for group in figures.reward_groups for r in group]
    valid = [r for r in rewards if r is not None]
    trained = [r for group in figures.trained_groups for r in group if r is not None]
    lags = [step - version for version in figures.versions]
    groups = [
        GroupOutcome(task_id=task_id, rewards=rewards)
        for task_id, rewards in zip(figures.task_ids, figures.trained_groups, strict=True)
    ]
    return StepMetrics(
        step=step,
        policy_version=min(figures.versions),
        rollouts=len(rewards),
        infra_errors=len(rewards) - len(valid),
        overlong_masked=len(valid) - len(trained),
        reward_mean=sum(valid) / len(valid) if valid else None,
        solved_groups=sum(any(r == 1 for r in group) for group in figures.reward_groups),
        informative_groups=sum(group.informative for group in groups),
        compactions_per_trajectory=_mean(figures.compactions),
        segments_per_trajectory=figures.segments / max(len(rewards), 1),
        format_error_rate=_mean([int(error) for error in figures.format_errors]),
        completion_tokens_mean=_mean(figures.completion_tokens),
        completion_tokens_max=max(figures.completion_tokens, default=0),
        trained_sequences=stats.sequences,
        trained_tokens=stats.trained_tokens,
        mean_over_tokens=stats.mean_over,
        tokens=stats.tokens,
        loss=stats.loss,
        clip_fraction=stats.clip_fraction,
        grad_norm=grad_norm,
        rollout_s=figures.rollout_s,
        learn_s=figures.learn_s,
        wait_s=figures.wait_s,
        staleness_mean=_mean(lags),
        staleness_max=max(lags),
        dropped_groups=dropped_groups,
        groups=groups,
    )


@dataclass(frozen=True)
class StepFigures:
    """What a step's metrics take from one process's groups: each group's rewards and trained
    rewards, each trajectory's compactions, the segments, whether each policy call was a
    format error, the tokens each policy call sampled, each group's policy version, and the
    times."""

    reward_groups: list[list[float | None]]
    trained_groups: list[list[float | None]]
    compactions: list[int]
    segments: int
    format_errors: list[bool]
    completion_tokens: list[int]
    versions: list[int]
    task_ids: list[str]
    rollout_s: float
    wait_s: float
    learn_s: float

    def gathered(self, accelerator: Accelerator) -> StepFigures:
        """The whole step's, every process's groups together (the same on each process).
        Rollout and wait times are the slowest process's; learn time the shortest, which is
        the learner's time after the last process's rollouts came in."""
        if accelerator.num_processes == 1:
            return self
        every: list[StepFigures] = gather_object([self])
        return StepFigures(
            reward_groups=[group for f in every for group in f.reward_groups],
            trained_groups=[group for f in every for group in f.trained_groups],
            compactions=[count for f in every for count in f.compactions],
            segments=sum(f.segments for f in every),
            format_errors=[error for f in every for error in f.format_errors],
            completion_tokens=[count for f in every for count in f.completion_tokens],
            versions=[version for f in every for version in f.versions],
            task_ids=[task_id for f in every for task_id in f.task_ids],
            rollout_s=max(f.rollout_s for f in every),
            wait_s=max(f.wait_s for f in every),
            learn_s=min(f.learn_s for f in every),
        )


@contextlib.contextmanager
def metric_writers(config: GRPOConfig, *, enabled: bool = True) -> Iterator[Any]:
    """A TensorBoard ``SummaryWriter`` when ``config.report_to`` names it and ``enabled``
    (the main process), else ``None``."""
    if "tensorboard" not in config.report_to or not enabled:
        yield None
        return
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as error:
        raise RuntimeError(
            "report_to tensorboard needs the tensorboard package: "
            "pip install 'autocompact[tensorboard]'"
        ) from error
    writer = SummaryWriter(log_dir=str(config.output_dir / "tensorboard"))
    try:
        yield writer
    finally:
        writer.close()


def _mean(values: list[int]) -> float:
    return sum(values) / len(values) if values else 0.0
