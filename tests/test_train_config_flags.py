"""``ac-train`` flags built from pydantic configs: type, choices, lists, booleans, defaults."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from ac_train.config_flags import add_fields, given


class Settings(BaseModel):
    steps: int = Field(default=3, description="how many")
    rate: float | None = None
    mode: Literal["step", "informative"] = "step"
    tags: list[str] = Field(default_factory=list)
    resume: bool = True
    where: Path = Path("x")


def parser(**flags) -> argparse.ArgumentParser:
    made = argparse.ArgumentParser()
    add_fields(made, Settings, list(Settings.model_fields), flags=flags or None)
    return made


def test_flags_follow_the_fields_and_leave_defaults_to_the_config():
    args = parser().parse_args(["--steps", "5", "--mode", "informative", "--tags", "a", "b"])
    assert given(args, list(Settings.model_fields)) == {
        "steps": 5,
        "mode": "informative",
        "tags": ["a", "b"],
    }
    assert Settings(**given(args, ["rate", "resume"])) == Settings()
    assert parser().parse_args(["--no-resume"]).resume is False
    assert parser().parse_args(["--where", "y"]).where == Path("y")
    with pytest.raises(SystemExit):
        parser().parse_args(["--mode", "other"])
    assert "how many (default: 3)" in parser().format_help()


def test_other_option_strings_and_unsupported_types():
    assert parser(steps=["--n"]).parse_args(["--n", "2"]).steps == 2

    class Odd(BaseModel):
        pair: tuple[int, int] = (1, 2)

    with pytest.raises(TypeError, match="pair: no command-line flag"):
        add_fields(argparse.ArgumentParser(), Odd, ["pair"])
