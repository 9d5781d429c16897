"""The configuration of a GRPO run (``GRPOConfig``), its reverse-curriculum starts
(``DemonstrationStarts``) and the presets that name the method's RL rows (``GRPO_PRESETS``): the
settings ``ac_train.grpo.GRPOTrainer`` and ``AsyncGRPOTrainer`` run under (the defaults and
presets: ``ac_train.grpo``'s docstring)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field, model_validator
from transformers import PreTrainedTokenizerBase

import ac_env  # noqa: F401  (registers AutoCompact-SWE-v0)
from ac_env.strategies import get_strategy
from ac_env.tokens import HFTokenCounter
from ac_train.grpo.loss import Behaviour, ClipRange, TokenMean
from ac_train.models.served_sampler import parse_sampler
from ac_train.segments import PrefixMismatch

ENV_ID = "AutoCompact-SWE-v0"


class DemonstrationStarts(BaseModel):
    """Rollouts that start part-way through the reference agent's solved episode of each task
    (a reverse curriculum for a model too weak to solve tasks from the start; see
    ``ac_train.grpo.start_states``). Only what the policy writes from the start on is trained."""

    model_config = ConfigDict(extra="forbid")

    steps_left: list[int] = Field(
        default_factory=lambda: [3],
        min_length=1,
        description="start before the demonstrator's n-th model call from the end, for each n",
    )
    continuation: Literal["exact", "prose", "wrong_line"] | None = Field(
        default=None,
        description="start right after the compaction before the fixing edit, with the "
        "summary's ## Next naming the exact one-line edit and test ('exact'), the "
        "demonstrator's prose plan ('prose') or the edit at a wrong line ('wrong_line'); "
        "replaces steps_left (ac_train.grpo.continuation)",
    )
    max_policy_steps: int = Field(default=4, ge=1, description="env steps from a start")
    probe_samples: int = Field(
        default=0,
        ge=0,
        description="rollouts of the starting policy from each start state before step 1; "
        "the draws then favour the starts likeliest to give a mixed group "
        "(ac_train.grpo.start_probe); 0: no probe",
    )

    @model_validator(mode="after")
    def _probe_tells_spread(self) -> DemonstrationStarts:
        if self.probe_samples == 1:
            raise ValueError(
                "probe_samples: 1 sample cannot tell a settled start state from an unsure "
                "one; use 2 or more (or 0: no probe)"
            )
        return self


class GRPOConfig(BaseModel):
    """One GRPO run. ``env`` holds the env's own options (``task_source``, ``split``,
    ``sandbox``, ...); the rollout limits are ``rollout_max_steps`` / ``rollout_max_tokens``,
    forced compaction is ``forced_compaction_threshold``, and the token counter is always the
    policy's tokenizer (``env_options``)."""

    model_config = ConfigDict(extra="forbid")

    output_dir: Path = Field(description="metrics.jsonl and checkpoint-<step> directories")
    model: str = Field(default="smollm2", description="'smollm2', an HF name or a checkpoint dir")
    env: dict[str, Any] = Field(default_factory=dict, description="AutoCompact-SWE-v0 options")
    steps: int = Field(default=100, ge=1, description="optimizer steps in the whole run")
    tasks_per_step: int = Field(default=8, ge=1)
    rollouts_per_task: int = Field(default=8, ge=2, description="the group size G")
    rollout_max_steps: int = Field(default=50, ge=1, description="env steps per rollout")
    rollout_max_tokens: int = Field(default=32_768, ge=1, description="context window (tokens)")
    forced_compaction_threshold: int | None = Field(
        default=None,
        ge=1,
        description="forced compaction at this many tokens; None (the method's RL): off, a "
        "rollout that reaches rollout_max_tokens ends",
    )
    max_new_tokens: int = Field(default=1024, ge=1, description="per model call")
    temperature: float = Field(default=1.0, gt=0, description="sampling and learner temperature")
    stop_after_action: bool = Field(
        default=False,
        description="end a response at the close of its first bash block unless it is a "
        "summary (SamplingConfig.stop_after_action): nothing after it could change the action, "
        "and a group decodes as long as its longest row. In-process sampling, terminal format",
    )
    rollout_workers: int = Field(default=1, ge=1, description="episodes run at once")
    batch_groups: bool = Field(
        default=False,
        description="decode rollouts together in process: rollouts of one call from a "
        "demonstration start (all on their group's prompt) as one decode per group "
        "(TransformersPolicy's samples_per_prompt); any other rollouts by gathering the model "
        "calls of the rollout_workers threads into one batch (ac_train.models.batched_acts: the "
        "prompts' shared prefix once, then every row's own)",
    )
    sampler: str | None = Field(
        default=None,
        description="openai:<model>@<url>: rollouts from a llama.cpp server started on "
        "sampler_weights (ac_train.models.served_sampler); None: in-process generation",
    )
    sampler_weights: Path | None = Field(
        default=None, description="the served sampler's weight-slot directory"
    )
    learning_rate: float = Field(default=1e-6, gt=0)
    weight_decay: float = Field(default=0.0, ge=0)
    max_grad_norm: float | None = Field(default=1.0, gt=0, description="None: no clipping")
    clip_low: float = Field(default=0.2, gt=0, lt=1, description="ratio floor is 1 - clip_low")
    clip_high: float | None = Field(
        default=None, gt=0, description="ratio ceiling is 1 + clip_high; None: clip_low"
    )
    scale_advantages_by_std: bool = Field(
        default=True, description="divide by the group's std + eps; False: Dr. GRPO"
    )
    token_mean: TokenMean = Field(
        default="step",
        description="the loss's token-mean is over every trained token of the step ('step') or "
        "over the tokens of informative groups only ('informative'); see ac_train.grpo.loss",
    )
    overlong_masking: bool = Field(
        default=False,
        description="SUPO: a rollout cut off by the context window or rollout_max_steps is "
        "left out of the loss and of its group's baseline instead of scored as a failure "
        "(off: the method scores it); a demonstration start's max_policy_steps is no such cap",
    )
    behaviour_logprobs: Behaviour | None = Field(
        default=None,
        description="what the ratio is taken against: 'learner' (its own log-probs, detached: "
        "exact on-policy, the sampler need not record log-probs) or 'sampler' (the recorded "
        "ones); None: 'learner' for the synchronous trainer, whose samples are on-policy, "
        "'sampler' for the asynchronous one, whose may be stale (ac_train.grpo.loss)",
    )
    importance_cap: float | None = Field(
        default=None,
        gt=0,
        description="truncated importance sampling against the sampler's log-probs, each "
        "token's weight capped here (TRL, verl, SkyRL: about 2); needs behaviour 'learner'; "
        "None: off (the method's on-policy loss)",
    )
    advantage_eps: float = Field(default=1e-6, gt=0)
    micro_batch_size: int = Field(default=4, ge=1, description="segments per forward pass")
    micro_batch_tokens: int | None = Field(
        default=None,
        ge=1,
        description="also end a micro-batch before its padded tokens after the context its "
        "segments share pass this (the learner's memory grows with them: verl's dynamic "
        "batch size); None: micro_batch_size alone",
    )
    share_prefix: bool = Field(
        default=True,
        description="run the context a micro-batch's segments share once (a group's segments "
        "share their task's prompt, or their start state): exact, and a group continuing one "
        "long state costs about one context instead of one per rollout; off for a model whose "
        "key/value cache cannot be repeated per row",
    )
    prefix_mismatch: PrefixMismatch = Field(
        default="split", description="a prompt that is not a token prefix starts a new part"
    )
    save_every: int = Field(default=10, ge=1, description="steps between checkpoints")
    cheat_probe: int = Field(
        default=0,
        ge=0,
        description="held-out impossible tasks of env's task_source the policy runs on every "
        "cheat_probe_every steps; their pass rate (every pass is a cheat) is logged as "
        "cheating_rate (ac_env.runs.cheating); 0: no probe",
    )
    cheat_probe_every: int = Field(default=5, ge=1, description="steps between cheating probes")
    resume: bool = Field(default=True, description="continue from the latest checkpoint")
    demonstration: DemonstrationStarts | None = Field(
        default=None, description="start rollouts in demonstrations; None: from the task's start"
    )
    skip_uniform_for: int = Field(
        default=0,
        ge=0,
        description="steps in which a task (or start state) whose latest group's rewards were "
        "all equal (no gradient) is not drawn; 0: uniform draws (ac_train.grpo.task_draw)",
    )
    favour_mixed: bool = Field(
        default=False,
        description="draw the eligible tasks likeliest to give a mixed group, by a posterior "
        "of each one's pass rate given its groups so far (and the probe's rollouts, which "
        "imply it); False: uniform draws (ac_train.grpo.task_draw)",
    )
    seed: int = 0
    progress: bool = True
    report_to: list[Literal["tensorboard"]] = Field(
        default_factory=list,
        description="also log each step's metrics there (TensorBoard: OUTPUT_DIR/tensorboard)",
    )

    @model_validator(mode="after")
    def _sampler_has_weights(self) -> GRPOConfig:
        if (self.sampler is None) != (self.sampler_weights is None):
            raise ValueError("sampler and sampler_weights go together (or neither)")
        if self.sampler is not None:
            parse_sampler(self.sampler)
        return self

    @model_validator(mode="after")
    def _stop_after_action_in_process(self) -> GRPOConfig:
        if self.stop_after_action and self.sampler is not None:
            raise ValueError("stop_after_action: in-process sampling only; unset sampler")
        if self.stop_after_action and self.env.get("action_parser", "terminal") != "terminal":
            raise ValueError(
                "stop_after_action: the end of a terminal-format action; env.action_parser is "
                f"{self.env['action_parser']!r}"
            )
        return self

    @model_validator(mode="after")
    def _batched_groups_are_one_call(self) -> GRPOConfig:
        if self.batch_groups and self.sampler is not None:
            raise ValueError("batch_groups: decodes in process; unset sampler (or this)")
        if self.batch_groups and not self.one_call_rollouts and self.rollout_workers < 2:
            raise ValueError(
                "batch_groups: gathers the calls of rollout_workers threads, so it needs "
                "rollout_workers >= 2 (or demonstration starts with max_policy_steps 1)"
            )
        return self

    @property
    def one_call_rollouts(self) -> bool:
        """Every rollout is one model call from a demonstration start (``batch_groups``)."""
        return self.demonstration is not None and self.demonstration.max_policy_steps == 1

    @model_validator(mode="after")
    def _limits_not_in_env(self) -> GRPOConfig:
        instead = {
            "max_steps": "rollout_max_steps",
            "context_window": "rollout_max_tokens",
            "forced_compaction_threshold": "forced_compaction_threshold",
            "token_counter": "nothing: it is the policy's tokenizer",
        }
        for name, use in instead.items():
            if name in self.env:
                raise ValueError(f"env.{name}: set by the trainer; use {use} instead")
        return self

    @model_validator(mode="after")
    def _importance_weights_against_the_learner(self) -> GRPOConfig:
        if self.importance_cap is not None and self.behaviour_logprobs == "sampler":
            raise ValueError(
                "importance_cap: corrects a loss against the learner's log-probs; set "
                "behaviour_logprobs to 'learner' (or leave it unset)"
            )
        return self

    def behaviour(self, samples_may_be_stale: bool) -> Behaviour:
        """``behaviour_logprobs``, resolved for a trainer (its field's description); with
        ``importance_cap`` always the learner's."""
        if self.behaviour_logprobs is not None:
            return self.behaviour_logprobs
        if self.importance_cap is not None:
            return "learner"
        return "sampler" if samples_may_be_stale else "learner"

    @property
    def clip(self) -> ClipRange:
        high = self.clip_low if self.clip_high is None else self.clip_high
        return ClipRange(low=self.clip_low, high=high)

    @classmethod
    def from_preset(cls, preset: str, **settings: Any) -> GRPOConfig:
        """The settings of ``GRPO_PRESETS[preset]``, overridden by ``settings`` (``env``: key
        by key)."""
        if preset not in GRPO_PRESETS:
            raise ValueError(f"unknown GRPO preset {preset!r}; valid: {', '.join(GRPO_PRESETS)}")
        chosen = GRPO_PRESETS[preset]
        env = {**chosen.get("env", {}), **settings.pop("env", {})}
        return cls(**{**chosen, **settings, "env": env})

    def env_options(self, tokenizer: PreTrainedTokenizerBase) -> dict[str, Any]:
        """The ``gym.make`` keywords of a rollout env: the RL limits, forced compaction as
        configured, every context count by ``tokenizer`` (the policy's), then ``env``."""
        return {
            "max_steps": self.rollout_max_steps,
            "context_window": self.rollout_max_tokens,
            "forced_compaction_threshold": self.forced_compaction_threshold,
            "token_counter": HFTokenCounter(tokenizer),
            **self.env,
        }

    def env_maker(self, tokenizer: PreTrainedTokenizerBase) -> Callable[[], gym.Env[Any, Any]]:
        """A zero-argument env factory (rollout workers, start states) with ``env_options``."""
        options = self.env_options(tokenizer)
        return lambda: gym.make(ENV_ID, **options)


def _preset(strategy: str) -> dict[str, Any]:
    """The settings that run rollouts under ``strategy`` (``ac_env.strategies``)."""
    env = get_strategy(strategy).env_kwargs()
    return {"forced_compaction_threshold": env.pop("forced_compaction_threshold"), "env": env}


GRPO_PRESETS: dict[str, dict[str, Any]] = {
    "autocompact": _preset("learned"),
    "compaction_rl": _preset("fixed"),
}
"""The RL rows of the method's main table as ``GRPOConfig`` settings (module docstring)."""
