"""CLI flags built from pydantic configs (ac-bench's from BenchConfig)."""

import argparse
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from ac_env.bench.cli import FLAGS, parse_args
from ac_env.bench.config import BenchConfig
from ac_env.config_flags import add_config_flags, config_kwargs


class Example(BaseModel):
    name: str = Field(default="x", description="a name")
    count: int | None = None
    weights: list[float] = Field(default_factory=lambda: [0.5])


def parser_for(model, flags=None):
    parser = argparse.ArgumentParser()
    add_config_flags(parser, model, flags)
    return parser


def test_given_flags_are_typed_and_the_rest_keep_the_model_defaults():
    args = parser_for(Example, {"name": "--label"}).parse_args(["--weights", "1", "2.5"])
    assert config_kwargs(args, Example) == {"weights": [1.0, 2.5]}
    args = parser_for(Example, {"name": "--label"}).parse_args(["--label", "y", "--count", "3"])
    assert Example(**config_kwargs(args, Example)) == Example(name="y", count=3)


def test_help_shows_description_and_default():
    text = parser_for(Example).format_help()
    assert "a name (default: x)" in text and "(default: 0.5)" in text


def test_booleans_and_literals_get_their_own_flags():
    class Switches(BaseModel):
        resume: bool = True
        mode: Literal["step", "informative"] = "step"
        where: Path = Path("x")

    parser = parser_for(Switches)
    args = parser.parse_args(["--no-resume", "--mode", "informative", "--where", "y"])
    expected = {"resume": False, "mode": "informative", "where": Path("y")}
    assert config_kwargs(args, Switches) == expected
    assert config_kwargs(parser.parse_args([]), Switches) == {}
    with pytest.raises(SystemExit):
        parser.parse_args(["--mode", "other"])


def test_a_field_without_a_flag_type_is_named():
    class Nested(BaseModel):
        inner: dict[str, int] = {}

    with pytest.raises(TypeError, match="inner: no command-line flag"):
        parser_for(Nested)


def test_every_bench_setting_has_its_flag_under_the_old_names():
    argv = ["--out", "o", "--source", "f.jsonl", "--split", "all", "--ids", "a", "b"]
    argv += ["--limit", "2", "--strategies", "none", "--worker", "reference", "--seeds", "1"]
    argv += ["--budgets", "0.5", "--fallback-threshold", "100", "--fixed-threshold", "200"]
    argv += [
        "--pricing",
        "p",
        "--max-steps",
        "3",
        "--keep-recent",
        "1",
        "--sandbox",
        "docker",
        "--workers",
        "1",
    ]
    argv += ["--subset", "eval", "--context-window", "32768"]
    argv += ["--temperature", "0.5", "--top-p", "0.9", "--max-new-tokens", "64"]
    argv += ["--timing-policy", "p.json", "--command-cache", "c", "--hide-fail-to-pass-tests"]
    args = parse_args(argv)
    assert set(config_kwargs(args, BenchConfig)) == set(BenchConfig.model_fields)
    assert args.hide_fail_to_pass_tests is True
    assert (args.task_source, args.task_ids, args.budgets) == ("f.jsonl", ["a", "b"], [0.5])
    assert set(FLAGS) <= set(BenchConfig.model_fields)


def test_every_build_option_has_its_flag_under_the_old_names():
    from ac_env.cli import _parser
    from ac_env.mining.build import BuildOptions

    argv = ["tasks", "build", "toolz==1.2.0", "--out", "o", "--max-tasks", "2"]
    argv += ["--max-candidates", "3", "--max-failing", "4", "--jobs", "2", "--timeout", "9"]
    argv += ["--slow-test-s", "0.5", "--seed", "7", "--unisolated", "--no-progress"]
    args = _parser().parse_args(argv)
    assert config_kwargs(args, BuildOptions) == {
        "out": Path("o"),
        "max_tasks": 2,
        "max_candidates": 3,
        "max_failing": 4,
        "jobs": 2,
        "timeout_s": 9.0,
        "slow_test_s": 0.5,
        "seed": 7,
    }
    assert args.unisolated and args.no_progress
    default = _parser().parse_args(["tasks", "build", "toolz==1.2.0"])
    assert set(config_kwargs(default, BuildOptions)) == {"out"}  # the rest: model defaults


def test_the_grading_settings_have_serve_flags():
    from ac_env.cli import _parser
    from ac_env.config import EnvConfig

    line = ["serve", "--capability-gate", "strict", "--flagged-reward", "zero"]
    served = config_kwargs(_parser().parse_args(line), EnvConfig)
    assert served == {"capability_gate": "strict", "flagged_reward": "zero"}
    with pytest.raises(SystemExit):
        _parser().parse_args(["serve", "--capability-gate", "loose"])
