"""A results directory's identity: the run configuration stored beside the results
(``config.json``) and checked on resume, so that a rerun continues the same run and never
mixes two. Any pydantic run configuration (a benchmark's, a collection's) claims one; the
settings its class names in ``RUNTIME_ONLY`` (a ``ClassVar``: settings that change how fast a
run goes, not what it measures) are free to differ."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

CONFIG_FILE = "config.json"


class ConfigMismatchError(ValueError):
    """A results directory holds a run of another configuration."""


def _differences(
    stored: dict[str, Any], current: dict[str, Any], runtime_only: tuple[str, ...]
) -> list[str]:
    """One line per setting that differs, ``runtime_only`` left out."""
    keys = sorted((set(stored) | set(current)) - set(runtime_only))
    return [
        f"{key}: stored {stored.get(key)!r}, now {current.get(key)!r}"
        for key in keys
        if stored.get(key) != current.get(key)
    ]


def claim_directory(config: BaseModel, out_dir: Path) -> None:
    """Write ``config.json`` into a new results directory, or check that the stored one is the
    same run (``ConfigMismatchError`` listing every difference otherwise)."""
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
        diff = _differences(stored, current, getattr(kind, "RUNTIME_ONLY", ()))
        if diff:
            raise ConfigMismatchError(
                f"{out_dir} holds results of another configuration; use a new directory. "
                "Differences: " + "; ".join(diff)
            )
        return
    path.write_text(json.dumps(current, indent=2) + "\n", encoding="utf-8")
