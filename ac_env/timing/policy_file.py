"""A trained timing policy as a small JSON file: an MLP from ``features(env)`` to the logits of
``continue`` and ``compact``, evaluated with numpy (no torch).

The file (``format: "autocompact-timing-mlp/1"``) holds ``feature_names`` (the features the
policy was trained on, checked against ``FEATURE_NAMES`` at load), ``layers`` (each a ``weight``
of shape out x in and a ``bias``), the ``activation`` applied between layers (not after the
last), ``actions`` (the logits' names in order), ``budget_usd`` (the budget its training
episodes ran under, ``null`` for none: wherever the policy runs, its cost features are computed
against this budget, as in training), a ``description`` and free-form ``trained_on`` and
``evaluation`` provenance. ``DEFAULT_TIMING_POLICY`` is the file the package ships.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ac_env.timing.features import FEATURE_NAMES

FORMAT = "autocompact-timing-mlp/1"
ACTIONS = ("continue", "compact")
DEFAULT_TIMING_POLICY = Path(__file__).resolve().parent / "policies" / "long_ppo.json"
SIGNIFICANT_DIGITS = 6


class TimingPolicyError(ValueError):
    """A timing policy file could not be read or used; the message names the file."""


class DenseLayer(BaseModel):
    """``outputs = weight @ inputs + bias``."""

    model_config = ConfigDict(extra="forbid")

    weight: list[list[float]]
    bias: list[float]

    @model_validator(mode="after")
    def _rectangular(self) -> DenseLayer:
        if not self.weight or not self.weight[0]:
            raise PydanticCustomError("shape", "weight: must have at least one row and column")
        width = len(self.weight[0])
        for row, values in enumerate(self.weight):
            if len(values) != width:
                raise PydanticCustomError(
                    "shape",
                    f"weight[{row}]: has {len(values)} columns, row 0 has {width}",
                )
        if len(self.bias) != len(self.weight):
            raise PydanticCustomError(
                "shape",
                f"bias: has {len(self.bias)} values, weight has {len(self.weight)} rows",
            )
        if not all(math.isfinite(v) for row in self.weight for v in row) or not all(
            math.isfinite(v) for v in self.bias
        ):
            raise PydanticCustomError("value", "weight, bias: every value must be finite")
        return self


class TimingPolicyFile(BaseModel):
    """The JSON document (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["autocompact-timing-mlp/1"]
    feature_names: list[str]
    layers: list[DenseLayer]
    activation: Literal["tanh", "relu"]
    actions: list[str]
    budget_usd: float | None = Field(default=None, gt=0)
    description: str
    trained_on: dict[str, Any]
    evaluation: dict[str, Any]

    @field_validator("actions")
    @classmethod
    def _known_actions(cls, actions: list[str]) -> list[str]:
        if tuple(actions) != ACTIONS:
            raise ValueError(f"must be {list(ACTIONS)} (the logits' order), got {actions}")
        return actions

    @model_validator(mode="after")
    def _shapes_chain(self) -> TimingPolicyFile:
        if not self.layers:
            raise PydanticCustomError("shape", "layers: needs at least one layer")
        inputs = len(self.feature_names)
        for index, layer in enumerate(self.layers):
            width = len(layer.weight[0])
            if width != inputs:
                source = "len(feature_names)" if index == 0 else f"layers[{index - 1}]'s outputs"
                raise PydanticCustomError(
                    "shape",
                    f"layers[{index}].weight: has {width} columns, {source} is {inputs}",
                )
            inputs = len(layer.weight)
        if inputs != len(self.actions):
            raise PydanticCustomError(
                "shape",
                f"layers[{len(self.layers) - 1}].weight: has {inputs} rows (outputs), "
                f"len(actions) is {len(self.actions)}",
            )
        return self


@dataclass(frozen=True)
class TimingPolicy:
    """A loaded policy: ``wants_compaction(features(env))`` decides before a worker turn."""

    name: str
    source: TimingPolicyFile
    arrays: tuple[tuple[np.ndarray, np.ndarray], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        arrays = tuple(
            (np.asarray(layer.weight, dtype=np.float64), np.asarray(layer.bias, dtype=np.float64))
            for layer in self.source.layers
        )
        object.__setattr__(self, "arrays", arrays)

    def logits(self, features: np.ndarray) -> np.ndarray:
        """One logit per action (``ACTIONS`` order) for a feature vector."""
        values = np.asarray(features, dtype=np.float64)
        expected = (len(self.source.feature_names),)
        if values.shape != expected:
            raise ValueError(f"features: shape {values.shape}, policy {self.name} needs {expected}")
        activate = np.tanh if self.source.activation == "tanh" else _relu
        for index, (weight, bias) in enumerate(self.arrays):
            values = weight @ values + bias
            if index < len(self.arrays) - 1:
                values = activate(values)
        return values

    def wants_compaction(self, features: np.ndarray) -> bool:
        """True when ``compact`` has the largest logit (ties go to ``continue``)."""
        return ACTIONS[int(np.argmax(self.logits(features)))] == "compact"

    def describe(self) -> dict[str, Any]:
        """The policy's name and provenance, for reports."""
        return {
            "name": self.name,
            "description": self.source.description,
            "budget_usd": self.source.budget_usd,
            "trained_on": self.source.trained_on,
            "evaluation": self.source.evaluation,
        }


def _relu(values: np.ndarray) -> np.ndarray:
    return np.maximum(values, 0.0)


def save_timing_policy(
    path: str | Path,
    layers: list[tuple[np.ndarray, np.ndarray]],
    *,
    activation: Literal["tanh", "relu"],
    description: str,
    trained_on: dict[str, Any],
    evaluation: dict[str, Any],
    budget_usd: float | None = None,
) -> Path:
    """Write a policy file (values rounded to ``SIGNIFICANT_DIGITS``; one weight row a line)."""
    document = TimingPolicyFile(
        format=FORMAT,
        feature_names=list(FEATURE_NAMES),
        layers=[
            DenseLayer(weight=_rounded(np.asarray(w)), bias=_rounded(np.asarray(b)))
            for w, b in layers
        ],
        activation=activation,
        actions=list(ACTIONS),
        budget_usd=budget_usd,
        description=description,
        trained_on=trained_on,
        evaluation=evaluation,
    )
    text = json.dumps(document.model_dump(), indent=1, allow_nan=False)
    # a list of numbers on one line (JSON strings never hold a raw newline, so this is safe)
    text = _NUMBER_LIST.sub(lambda m: re.sub(r"\s*\n\s*", "", m.group(0)), text)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text + "\n")
    return target


_NUMBER_LIST = re.compile(r"\[[-+0-9.eE,\s]*\]")


def _rounded(values: np.ndarray) -> Any:
    rounded = np.vectorize(lambda v: float(f"{v:.{SIGNIFICANT_DIGITS}g}"), otypes=[float])
    return rounded(values.astype(np.float64)).tolist()


def load_timing_policy(path: str | Path) -> TimingPolicy:
    """Read and check a policy file; ``TimingPolicyError`` names the file (and line) on error."""
    source = Path(path)
    try:
        text = source.read_text()
    except OSError as error:
        raise TimingPolicyError(f"{source}: cannot read the timing policy: {error}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise TimingPolicyError(f"{source}:{error.lineno}: invalid JSON: {error.msg}") from None
    try:
        document = TimingPolicyFile.model_validate(raw)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" if e["loc"] else e["msg"]
            for e in err.errors()
        )
        raise TimingPolicyError(f"{source}: invalid timing policy: {problems}") from None
    _check_features(source, document.feature_names)
    return TimingPolicy(name=source.stem, source=document)


def _check_features(source: Path, names: list[str]) -> None:
    expected = list(FEATURE_NAMES)
    if names == expected:
        return
    index = next(
        (i for i, (a, b) in enumerate(zip(names, expected, strict=False)) if a != b),
        min(len(names), len(expected)),
    )
    got = names[index] if index < len(names) else "(none)"
    want = expected[index] if index < len(expected) else "(none)"
    raise TimingPolicyError(
        f"{source}: feature_names[{index}] is {got!r}, this version's features have {want!r} "
        f"({len(names)} names in the file, {len(expected)} expected): the policy was trained "
        "on other features"
    )
