"""Names and paths from data are never trusted: instance ids must be safe names wherever a task
comes from, and every file written under an output directory stays under it."""

from __future__ import annotations

import json
import os

import pytest
from pydantic import ValidationError

from ac_env.bench import fork
from ac_env.mining.sdist import parse_source
from ac_env.paths import UnsafePathError, check_name, safe_child
from ac_env.tasks import Task, TaskFileError, load_tasks
from ac_env.tasks.synthetic.suite import plan_suite
from ac_env.trajectory import Trajectory, TrajectoryHeader

ROW = {
    "instance_id": "octo__widgets-101",
    "repo": "octo/widgets",
    "problem_statement": "Widgets overflow.",
    "patch": "diff --git a/w.py b/w.py\n",
    "FAIL_TO_PASS": ["tests/test_w.py::test_overflow"],
    "PASS_TO_PASS": [],
}
UNSAFE_IDS = {
    "slash": "octo/widgets-1",
    "dot-dot": "..",
    "dot-dot inside": "a..b",
    "parent path": "../../etc/passwd",
    "absolute": "/etc/passwd",
    "leading dot": ".hidden",
    "leading dash": "-rf",
    "NUL": "a\0b",
    "over-long": "a" * 129,
    "empty": "",
    "space": "a b",
    "newline": "a\nb",
    "backslash": "a\\b",
}


@pytest.mark.parametrize(
    "name",
    [
        "django__django-11099",
        "scikit-learn__scikit-learn-10297",
        "sphinx-doc__sphinx-8721",
        "toolz-1.2.0__3f2a9c01de",
        "tiny-calc-1",
        "a" * 128,
    ],
)
def test_real_ids_are_safe_names(name):
    assert check_name(name) == name


def test_every_builtin_id_is_a_safe_name():
    for plan in plan_suite():
        check_name(plan.instance_id)


@pytest.mark.parametrize("case", UNSAFE_IDS)
def test_unsafe_ids_are_refused_by_the_task_model(case):
    with pytest.raises(ValidationError, match="instance_id .* is not a safe name"):
        Task(**{**ROW, "instance_id": UNSAFE_IDS[case]})


@pytest.mark.parametrize("case", ["slash", "parent path", "leading dot", "NUL", "over-long"])
def test_a_task_file_names_the_file_line_and_field_of_an_unsafe_id(tmp_path, case):
    rows = [
        ROW,
        {**ROW, "instance_id": "octo__widgets-102"},
        {**ROW, "instance_id": UNSAFE_IDS[case]},
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(TaskFileError, match=rf"^{path}:3: instance_id: .*not a safe name"):
        load_tasks(str(path))


@pytest.mark.parametrize("spec", ["pkg==..", "pkg==1.0+local", "pkg==1!2.0"])
def test_the_miner_refuses_library_specs_that_are_no_safe_name(spec):
    with pytest.raises(ValueError, match="library .* is not a safe name"):
        parse_source(spec)


def test_the_miner_keeps_ordinary_specs():
    assert parse_source("Toolz==1.2.0").slug == "toolz-1.2.0"
    assert parse_source("/x/more_itertools-11.2.1.tar.gz").slug == "more-itertools-11.2.1"


@pytest.mark.parametrize(
    "parts",
    [
        ("/etc/passwd",),
        ("trajectories", "/etc/passwd"),
        ("../outside",),
        ("trajectories/../../outside",),
        ("a\0b",),
        (".",),
        ("",),
    ],
)
def test_safe_child_refuses_paths_that_leave_the_root(tmp_path, parts):
    with pytest.raises(UnsafePathError):
        safe_child(tmp_path / "out", *parts)


def test_safe_child_follows_links_already_on_disk(tmp_path):
    (tmp_path / "out").mkdir()
    os.symlink(tmp_path, tmp_path / "out" / "trajectories")
    with pytest.raises(UnsafePathError, match="leads outside"):
        safe_child(tmp_path / "out", "trajectories", "x.jsonl")
    assert safe_child(tmp_path / "out", "a/b.jsonl") == (tmp_path / "out" / "a" / "b.jsonl")


def test_the_fork_writes_no_trajectory_outside_its_directory(tmp_path):
    trajectory = Trajectory(TrajectoryHeader(instance_id="t", split="easy"))
    with pytest.raises(UnsafePathError):
        fork._write(trajectory, tmp_path / "fork", "../../escaped.jsonl")
    assert not (tmp_path / "escaped.jsonl").exists()
    assert fork._write(trajectory, tmp_path / "fork", "s/t__seed0.jsonl") == (
        "trajectories/s/t__seed0.jsonl"
    )
