"""The environment's configuration: every keyword of ``gym.make("AutoCompact-SWE-v0", ...)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ac_env.actions import ActionParser
from ac_env.cost import DEFAULT_PRICING, Pricing
from ac_env.sandbox.base import Sandbox
from ac_env.tokens import TokenCounter

SandboxFactory = Callable[[], Sandbox]


class EnvConfig(BaseModel):
    """Defaults follow the method's evaluation: 16K forced-compaction threshold, 50 steps."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    task_source: str = Field(
        default="builtin", description="'builtin' or a SWE-bench-format .jsonl/.json task file"
    )
    split: str | None = Field(
        default="easy",
        description="task split; None: all splits (the default for a task file)",
    )
    task_ids: list[str] | None = Field(default=None, description="restrict to these tasks")
    sandbox: str | SandboxFactory = Field(
        default="local",
        description="'local' (bubblewrap), 'docker', 'unisolated' (no isolation: opt-out), "
        "or a zero-argument factory returning a Sandbox",
    )
    token_counter: str | TokenCounter = Field(
        default="approx", description="'approx', 'hf:<tokenizer path>', or a TokenCounter"
    )
    pricing: str | Pricing = Field(default=DEFAULT_PRICING, description="preset name or Pricing")
    budget_usd: float | None = Field(default=None, gt=0, description="per-episode budget")
    context_window: int = Field(default=131_072, gt=0, description="hard limit, in tokens")
    forced_compaction_threshold: int | None = Field(
        default=16_384, gt=0, description="tokens before a turn that force a summary; None: off"
    )
    keep_recent: int = Field(default=0, ge=0, description="interactions kept after a summary")
    max_steps: int = Field(default=50, gt=0, description="model turns per episode")
    command_timeout: float = Field(default=60.0, gt=0, description="seconds per command")
    output_limit: int = Field(default=10_000, gt=0, description="bytes of output per command")
    wall_clock_s: float | None = Field(default=None, gt=0, description="seconds per episode")
    action_parser: str | ActionParser = Field(default="terminal", description="'terminal'|'json'")
    system_prompt: str | None = Field(default=None, description="replaces the default prompt")
    mask_observations_keep: int | None = Field(
        default=None,
        ge=0,
        description="keep the last N command outputs, replace older ones by a placeholder "
        "(each replacement is a prefix rewrite); None: off",
    )
    skip_compaction: bool = Field(
        default=False,
        description="a proactive summary is recorded but not applied: the history is kept "
        "(the summary-ignored ablation); forced compaction still applies",
    )
    grading_timeout: float = Field(default=300.0, gt=0, description="seconds for the test run")

    @model_validator(mode="before")
    @classmethod
    def _task_file_takes_every_split(cls, data: Any) -> Any:
        """``easy`` is the built-in suite's default split; a task file's default is all."""
        if isinstance(data, dict) and data.get("task_source", "builtin") != "builtin":
            return {"split": None, **data}
        return data

    @model_validator(mode="after")
    def _threshold_below_window(self) -> EnvConfig:
        threshold = self.forced_compaction_threshold
        if threshold is not None and threshold >= self.context_window:
            raise ValueError(
                f"forced_compaction_threshold ({threshold}) must be below "
                f"context_window ({self.context_window})"
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
