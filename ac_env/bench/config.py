"""What a benchmark run is: its configuration, stored beside its results and checked on resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ac_env.bench.workers import check_worker
from ac_env.config import every_split_unless_builtin
from ac_env.policy import SamplingConfig
from ac_env.strategies import DEFAULT_THRESHOLD, STRATEGIES, get_strategy
from ac_env.timing.policy_file import DEFAULT_TIMING_POLICY

DEFAULT_BUDGETS = (0.10, 0.20, 0.40, 0.80, 1.20, 4.00)
CONFIG_FILE = "config.json"
# Settings that change how fast a run goes, not what it measures: free to differ on resume.
_RUNTIME_ONLY = ("workers", "command_cache")


class BenchConfig(BaseModel):
    """``worker``: ``reference``, ``openai:<model>@<base url>`` or a registered model worker
    (``hf:<path or smollm2>`` when ``ac_train`` is installed).
    ``budgets`` in USD per episode; each episode runs once, at the highest."""

    model_config = ConfigDict(extra="forbid")

    task_source: str = Field(
        default="builtin",
        description="'builtin' (the synthetic suite), 'real' (the real-code suite) or a task file",
    )
    split: str | None = Field(
        default="easy",
        description="task split; None (on the command line: all) for every split; the "
        "default is easy for the built-in suite, every split for any other source",
    )
    subset: str | None = Field(
        default=None, description="'train' or held-out 'eval' (built-in and real suites)"
    )
    task_ids: list[str] | None = Field(default=None, description="only these task ids")
    limit: int | None = Field(default=None, gt=0, description="first N tasks of the selection")
    strategies: list[str] = Field(
        default_factory=lambda: ["none", "fixed", "learned"],
        description=f"compaction strategies, of: {', '.join(STRATEGIES)}",
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
    context_window: int = Field(
        default=131_072, gt=0, description="context tokens past which an episode overflows"
    )
    pricing: str = Field(default="qwen3-coder-flash", description="pricing preset")
    max_steps: int = Field(default=50, gt=0, description="model turns per episode")
    sandbox: str = Field(default="local", description="local | unisolated | docker")
    workers: int = Field(default=2, gt=0, description="episodes run in parallel")
    command_cache: str | None = Field(
        default=None,
        description="replay recorded command outputs and grades from this directory (local "
        "sandboxes; ac_env.sandbox.command_cache): strategies that run the same commands on the "
        "same workspace pay for them once. For deterministic workers (the reference agent): a "
        "flaky test keeps the outcome it first had",
    )
    temperature: float = Field(default=0.7, ge=0, description="model workers' sampling; 0: greedy")
    top_p: float = Field(default=1.0, gt=0, le=1, description="nucleus mass when sampling")
    max_new_tokens: int = Field(default=256, gt=0, description="output tokens per model call")

    @model_validator(mode="before")
    @classmethod
    def _other_sources_take_every_split(cls, data: Any) -> Any:
        return every_split_unless_builtin(data)

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

    @property
    def sampling(self) -> SamplingConfig:
        """The one sampling configuration every model worker of the run uses."""
        return SamplingConfig(
            temperature=self.temperature, top_p=self.top_p, max_new_tokens=self.max_new_tokens
        )

    @property
    def run_budget(self) -> float:
        return max(self.budgets)


class ConfigMismatchError(ValueError):
    """A results directory holds a run of another configuration."""


def differences(stored: dict[str, Any], current: dict[str, Any]) -> list[str]:
    keys = sorted((set(stored) | set(current)) - set(_RUNTIME_ONLY))
    return [
        f"{key}: stored {stored.get(key)!r}, now {current.get(key)!r}"
        for key in keys
        if stored.get(key) != current.get(key)
    ]


def claim_directory(config: BaseModel, out_dir: Path) -> None:
    """Write ``config.json`` (any run configuration: a benchmark's, a collection's) into a new
    results directory, or check that the stored one is the same run (``ConfigMismatchError``
    listing every difference otherwise)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / CONFIG_FILE
    current = json.loads(config.model_dump_json())
    if path.exists():
        stored = json.loads(path.read_text(encoding="utf-8"))
        kind = type(config)
        try:  # settings added since the directory was written take their defaults
            stored = json.loads(kind.model_validate(stored).model_dump_json())
        except ValidationError as err:
            raise ConfigMismatchError(f"{path}: not a {kind.__name__}: {err}") from err
        diff = differences(stored, current)
        if diff:
            raise ConfigMismatchError(
                f"{out_dir} holds results of another configuration; use a new directory. "
                "Differences: " + "; ".join(diff)
            )
        return
    path.write_text(json.dumps(current, indent=2) + "\n", encoding="utf-8")
