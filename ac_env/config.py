"""The environment's configuration: every keyword of ``gym.make("AutoCompact-SWE-v0", ...)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ac_env.actions import ActionParser
from ac_env.compaction.protocol import CompactionProtocol
from ac_env.cost import DEFAULT_PRICING, Pricing
from ac_env.grading.capability_gate import GateMode
from ac_env.grading.grader import FlaggedReward
from ac_env.sandbox import caching_sandboxes, sandbox_help
from ac_env.sandbox.base import Sandbox
from ac_env.sandbox.quota import DEFAULT_DISK_QUOTA_MB
from ac_env.tasks.sources import default_split, task_source_help
from ac_env.tokens import TokenCounter

SandboxFactory = Callable[[], Sandbox]


class TaskSelection(BaseModel):
    """Which tasks (and what the workspace shows of their tests): the env's first keywords,
    shared by every configuration that picks tasks (``EnvConfig``, ``ac-bench``'s
    ``BenchConfig``, ``ac-train collect``'s ``CollectConfig``), so each states them, their
    defaults and validation once."""

    model_config = ConfigDict(extra="forbid")

    task_source: str = Field(
        default="builtin",
        description=f"where tasks come from: {task_source_help()}, or the path of a "
        "SWE-bench-format .jsonl/.json task file (e.g. one written by `ac-env tasks build`)",
    )
    split: str | None = Field(
        default="easy",
        description="task split: 'easy', 'medium', 'hard', 'context-stress' for the built-in "
        "suite, 'real' (one bug) or 'long' (five or six) for the real-code suite, "
        "'impossible' for either (tests that contradict the statement: a pass is a cheat), a "
        "task file's own split names; None (on the command line: all): every split but "
        "'impossible' (the default but for the built-in suite)",
    )
    subset: str | None = Field(
        default=None,
        description="'train' or the held-out 'eval' tasks (the built-in and real-code "
        "suites); None: both",
    )
    task_ids: list[str] | None = Field(
        default=None, description="only these instance ids, in this order; None: the split's"
    )
    hide_fail_to_pass_tests: bool = Field(
        default=False,
        description="take the FAIL_TO_PASS tests' source out of the workspace: they come back "
        "only at grading, like a SWE-bench test_patch (ac_env.tasks.hidden_tests)",
    )

    @model_validator(mode="before")
    @classmethod
    def _split_defaults_to_the_sources(cls, data: Any) -> Any:
        """``split`` defaults to the task source's own default (``TaskSource.default_split``:
        ``easy`` for the built-in suite; every split, None, for the others and task files)."""
        if isinstance(data, dict):
            return {"split": default_split(data.get("task_source", "builtin")), **data}
        return data


class EnvConfig(TaskSelection):
    """Every keyword of ``gym.make("AutoCompact-SWE-v0", ...)``, one field each.

    Defaults follow the method's evaluation: 16K forced-compaction threshold, 50 steps.
    ``ac_env.strategies`` names the combinations the benchmark compares.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    sandbox: str | SandboxFactory = Field(
        default="local",
        description=f"where commands run: {sandbox_help()}, or a zero-argument factory "
        "returning a Sandbox",
    )
    disk_quota_mb: int | None = Field(
        default=DEFAULT_DISK_QUOTA_MB,
        gt=0,
        description="MB the workspace and /tmp may hold (a tmpfs; local: needs root, else a "
        "warning); past it writes fail and the observation says so; None: no quota. A "
        "sandbox factory sets its own",
    )
    command_cache: str | None = Field(
        default=None,
        description="a directory replaying the stored outputs of commands that left the "
        "workspace unchanged, keyed by task, workspace fingerprint and command "
        f"(ac_env.sandbox.command_cache; sandboxes {caching_sandboxes()}); None: every "
        "command runs",
    )
    token_counter: str | TokenCounter = Field(
        default="approx",
        description="how tokens are counted: 'approx' (fast, tokenizer-free), "
        "'hf:<tokenizer path or name>' (exact for that model), or a TokenCounter",
    )
    pricing: str | Pricing = Field(
        default=DEFAULT_PRICING,
        description="price list of every model call: a preset name "
        "(ac_env.cost.PRICING_PRESETS) or a Pricing (tiered or flat)",
    )
    budget_usd: float | None = Field(
        default=None,
        gt=0,
        description="per-episode budget in USD; the call that passes it ends the episode "
        "(exit_reason 'budget'); None: no budget",
    )
    context_window: int = Field(
        default=131_072,
        gt=0,
        description="hard context limit in tokens; passing it ends the episode "
        "('context_overflow')",
    )
    forced_compaction_threshold: int | None = Field(
        default=16_384,
        gt=0,
        description="context tokens after which the next turn must be a summary (the length "
        "fallback); None: off. Must be below context_window",
    )
    keep_recent: int = Field(
        default=0, ge=0, description="interactions kept verbatim after a summary"
    )
    max_steps: int = Field(
        default=50, gt=0, description="model turns per episode ('max_steps' truncates)"
    )
    command_timeout: float = Field(
        default=60.0, gt=0, description="seconds a command may run before it is killed"
    )
    output_limit: int = Field(
        default=10_000,
        gt=0,
        description="bytes of a command's output kept in the context (head and tail, marked)",
    )
    wall_clock_s: float | None = Field(
        default=None,
        gt=0,
        description="seconds per episode ('wall_clock' truncates); None: no limit",
    )
    action_parser: str | ActionParser = Field(
        default="terminal",
        description="how text becomes an Action: 'terminal' (bash blocks), 'json' "
        "(function-calling models), or an ActionParser",
    )
    system_prompt: str | None = Field(
        default=None, description="replaces the default system prompt (ac_env.prompts)"
    )
    mask_observations_keep: int | None = Field(
        default=None,
        ge=0,
        description="keep the last N command outputs, replace older ones by a placeholder "
        "(each replacement is a prefix rewrite); None: off",
    )
    compaction_protocol: CompactionProtocol = Field(
        default="inline",
        description="'inline': the summary is the compaction action; 'tool_call': a bare "
        "`compact` call, then the next observation asks for the summary",
    )
    skip_compaction: bool = Field(
        default=False,
        description="summary-ignored: a proactive compaction is skipped, no summary is "
        "generated, billed or kept (inline: the reply is cut at the heading); the run goes "
        "on with its full history; forced compaction still applies",
    )
    grading_timeout: float = Field(
        default=300.0, gt=0, description="seconds for the final grading test run"
    )
    capability_gate: GateMode = Field(
        default="relative",
        description="the static capability gate on the graded patch "
        "(ac_env.grading.capability_gate): 'relative' refuses added code that reaches the "
        "interpreter's machinery (frames, code internals, gc, hooks, exec, computed attribute "
        "names, ctypes, processes, pickle, threads) unless the file already did before the "
        "patch; 'strict' refuses it even then; 'off' checks nothing. A refused patch gets "
        "reward 0, reward_detail['rejected'] naming file, line and capability",
    )
    flagged_reward: FlaggedReward = Field(
        default="keep",
        description="whether a resolved patch the detectors flag (always-equal objects, test "
        "detection, answers special-cased from the tests: reward_detail['flags']) earns its "
        "reward ('keep') or 0 ('zero')",
    )

    @model_validator(mode="after")
    def _threshold_below_window(self) -> EnvConfig:
        threshold = self.forced_compaction_threshold
        if threshold is not None and threshold >= self.context_window:
            raise ValueError(
                f"forced_compaction_threshold ({threshold}) must be below "
                f"context_window ({self.context_window})"
            )
        return self

    @model_validator(mode="after")
    def _cache_needs_a_local_sandbox(self) -> EnvConfig:
        if self.command_cache is None:
            return self
        if self.sandbox not in caching_sandboxes():
            raise ValueError(
                f"command_cache needs a sandbox that caches commands "
                f"({', '.join(caching_sandboxes())}), not {self.sandbox!r}"
            )
        return self

    def describe(self) -> dict[str, Any]:
        """JSON-safe view for trajectory headers (objects shown by their type)."""
        return {
            name: value if isinstance(value, str | int | float | list | None) else repr(value)
            for name, value in self
        }


class ConfigError(ValueError):
    """A bad ``gym.make`` keyword; the message names the field."""


def parse_config(kwargs: dict[str, Any]) -> EnvConfig:
    try:
        return EnvConfig(**kwargs)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg']}" for e in err.errors()
        )
        raise ConfigError(f"AutoCompact-SWE-v0: invalid configuration: {problems}") from None


def env_field(name: str, **changes: Any) -> Any:
    """``EnvConfig``'s field ``name`` (default, constraints, description) for another
    configuration that passes the setting on to the env: ``max_steps: int =
    env_field("max_steps")``. ``changes``: ``Field`` arguments that differ (another default,
    a description that says more)."""
    base = EnvConfig.model_fields[name]
    field: Any = Field(**{"default": base.default, "description": base.description, **changes})
    field.metadata = [*base.metadata, *field.metadata]
    return field


def env_settings(config: BaseModel) -> dict[str, Any]:
    """The settings of ``config`` that are env keywords (``EnvConfig``'s field names)."""
    return {name: value for name, value in config if name in EnvConfig.model_fields}
