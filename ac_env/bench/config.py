"""What a benchmark run is: its configuration, stored beside its results and checked on
resume (``ac_env.runs.run_dir``). The task selection and every setting passed on to the env
take their defaults, constraints and descriptions from the env's own ``EnvConfig``."""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict, Field, field_validator, model_validator

from ac_env.config import TaskSelection, env_field
from ac_env.policy import SamplingConfig
from ac_env.runs.workers import check_worker
from ac_env.strategies import (
    DEFAULT_THRESHOLD,
    STRATEGIES,
    check_trained_baselines,
    get_strategy,
)
from ac_env.timing.policy_file import DEFAULT_TIMING_POLICY

DEFAULT_BUDGETS = (0.10, 0.20, 0.40, 0.80, 1.20, 4.00)


class BenchConfig(TaskSelection):
    """``worker``: ``reference``, ``openai:<model>@<base url>`` or a registered model worker
    (``hf:<path or smollm2>`` when ``ac_train`` is installed).
    ``budgets`` in USD per episode; each episode runs once, at the highest."""

    model_config = ConfigDict(extra="forbid")
    RUNTIME_ONLY: ClassVar[tuple[str, ...]] = ("workers", "command_cache")
    """Settings that change how fast a run goes, not what it measures: free to differ on
    resume (``ac_env.runs.run_dir``)."""

    limit: int | None = Field(default=None, gt=0, description="first N tasks of the selection")
    strategies: list[str] = Field(
        default_factory=lambda: ["none", "fixed", "learned"],
        description=f"compaction strategies, of: {', '.join(STRATEGIES)}, a baseline's name, "
        "or rule:<timing rule> (the reference agent following that rule, e.g. rule:every:8)",
    )
    worker: str = Field(
        default="reference",
        description="reference | openai:<model>@<url> | a registered worker (hf:<path|smollm2>)",
    )
    timing_policy: str = Field(
        default=DEFAULT_TIMING_POLICY.stem,
        description="what decides the reference worker's compactions under 'learned': a "
        "shipped timing policy's name or a policy file's path",
    )
    seeds: list[int] = Field(default_factory=lambda: [0], description="one episode per seed")
    budgets: list[float] = Field(
        default_factory=lambda: list(DEFAULT_BUDGETS), description="USD per episode"
    )
    fallback_threshold: int | None = Field(
        default=None, gt=0, description="forced compaction at this many tokens, any strategy"
    )
    fixed_threshold: int = Field(
        default=DEFAULT_THRESHOLD, gt=0, description="the 'fixed' strategy's threshold"
    )
    context_window: int = env_field("context_window")
    pricing: str = env_field("pricing", description="pricing preset (ac_env.cost.PRICING_PRESETS)")
    max_steps: int = env_field("max_steps")
    keep_recent: int = env_field("keep_recent")
    sandbox: str = env_field("sandbox")
    workers: int = Field(default=2, gt=0, description="episodes run in parallel")
    command_cache: str | None = env_field(
        "command_cache",
        description="replay recorded command outputs and grades from this directory (local "
        "sandboxes; ac_env.sandbox.command_cache): strategies that run the same commands on the "
        "same workspace pay for them once. For deterministic workers (the reference agent): a "
        "flaky test keeps the outcome it first had",
    )
    temperature: float = Field(default=0.7, ge=0, description="model workers' sampling; 0: greedy")
    top_p: float = Field(default=1.0, gt=0, le=1, description="nucleus mass when sampling")
    max_new_tokens: int = Field(default=256, gt=0, description="output tokens per model call")

    @field_validator("strategies")
    @classmethod
    def _known_strategies(cls, names: list[str]) -> list[str]:
        if not names:
            raise ValueError("at least one strategy")
        for name in names:
            get_strategy(name)
        return names

    @field_validator("budgets")
    @classmethod
    def _positive_budgets(cls, budgets: list[float]) -> list[float]:
        if not budgets or any(b <= 0 for b in budgets):
            raise ValueError("budgets must be a non-empty list of positive USD amounts")
        return sorted(set(budgets))

    @field_validator("worker")
    @classmethod
    def _known_worker(cls, worker: str) -> str:
        return check_worker(worker)

    @model_validator(mode="after")
    def _trained_rows_run_a_checkpoint(self) -> BenchConfig:
        check_trained_baselines(self.strategies, self.worker)
        return self

    @property
    def sampling(self) -> SamplingConfig:
        """The one sampling configuration every model worker of the run uses."""
        return SamplingConfig(
            temperature=self.temperature, top_p=self.top_p, max_new_tokens=self.max_new_tokens
        )

    @property
    def run_budget(self) -> float:
        return max(self.budgets)
