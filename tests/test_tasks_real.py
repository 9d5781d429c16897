"""The real-code suite: packing a mining build, materialising its repositories from the
shipped trees and patches, and refusing corrupt data with the file and line."""

from __future__ import annotations

import hashlib
import json
import lzma
import shutil
import tarfile
from pathlib import Path

import pytest

from ac_env.mining.build import LibraryReport, write_task_file
from ac_env.mining.pack import pack_suite
from ac_env.mining.sdist import commit_tree, copy_tree, git
from ac_env.tasks.model import GroundTruth, Task
from ac_env.tasks.real.suite import SuiteDataError, read_manifest, read_rows, real_tasks

CORE = "def clamp(x, low, high):\n    return max(low, min(x, high))\n"
BUGGY = "def clamp(x, low, high):\n    return max(low, min(x, low))\n"
TESTS = "from demo.core import clamp\n\n\ndef test_clamp():\n    assert clamp(5, 0, 3) == 3\n"


def _library(build: Path, name: str = "demo", version: str = "1.0") -> Path:
    """A build directory like ``tasks build`` writes: the base repo and one mined task."""
    directory = build / f"{name}-{version}"
    repo = directory / "repo"
    (repo / "demo").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "demo" / "__init__.py").write_text("")
    (repo / "demo" / "core.py").write_text(CORE)
    (repo / "tests" / "test_core.py").write_text(TESTS)
    (repo / "LICENSE").write_text("MIT License\n")
    (repo / ".gitignore").write_text("*.egg-info/\n")
    (repo / "demo.egg-info").mkdir()
    (repo / "demo.egg-info" / "PKG-INFO").write_text("Name: demo\n")
    (repo / "PKG-INFO").write_text(f"Name: {name}\nVersion: {version}\nLicense: MIT\n")
    (repo / "run.sh").write_text("#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    message = f"Import {name} {version}"
    commit_tree(repo, message)
    snapshot = directory / "snapshots" / f"{name}-{version}__clamp"
    copy_tree(repo, snapshot)
    (snapshot / "demo" / "core.py").write_text(BUGGY)
    commit_tree(snapshot, "scratch")
    (snapshot / "demo" / "core.py").write_text(CORE)
    patch = git(snapshot, "diff", "--no-color", "HEAD")
    shutil.rmtree(snapshot / ".git")
    (snapshot / "demo" / "core.py").write_text(BUGGY)
    commit = commit_tree(snapshot, message)
    task = Task(
        instance_id=snapshot.name,
        repo=f"pypi/{name}",
        problem_statement="clamp(5, 0, 3) returns 0",
        patch=patch,
        FAIL_TO_PASS=["tests/test_core.py::test_clamp"],
        PASS_TO_PASS=[],
        base_commit=commit,
        split="real",
        snapshot_dir=snapshot,
        test_files=["tests/test_core.py"],
        ground_truth=GroundTruth(files=["demo/core.py"], functions=["demo.core:clamp"]),
    )
    write_task_file(directory / "tasks.jsonl", [task])
    report = LibraryReport(library=f"{name} {version}", status="built", tasks=1)
    (directory / "report.json").write_text(report.model_dump_json())
    return snapshot


@pytest.fixture
def packed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("AUTOCOMPACT_CACHE", str(tmp_path / "cache"))
    build = tmp_path / "build"
    snapshot = _library(build)
    _library(build, "other", "2.0")
    data = tmp_path / "data"
    pack_suite(build, data, held_out=["other"])
    read_manifest.cache_clear()
    read_rows.cache_clear()
    return snapshot, data


def _tree(repo: Path) -> str:
    return git(repo, "ls-tree", "-r", "HEAD")


def test_materialised_repository_is_the_mined_snapshot(packed: tuple[Path, Path]) -> None:
    snapshot, data = packed
    (task,) = real_tasks(task_ids=["demo-1.0__clamp"], data_dir=data)
    assert task.snapshot_dir is not None and task.snapshot_dir != snapshot
    assert git(task.snapshot_dir, "rev-parse", "HEAD").strip() == task.base_commit
    assert _tree(task.snapshot_dir) == _tree(snapshot)  # ignored files and modes included
    assert (task.snapshot_dir / "demo" / "core.py").read_text() == BUGGY
    assert git(task.snapshot_dir, "rev-list", "--count", "HEAD").strip() == "1"
    again = real_tasks(task_ids=["demo-1.0__clamp"], data_dir=data)
    assert again == [task]


def test_subsets_and_licences(packed: tuple[Path, Path]) -> None:
    _, data = packed
    manifest = read_manifest(data)
    entries = {entry.name: entry for entry in manifest.libraries}
    assert entries["other"].held_out and not entries["demo"].held_out
    assert entries["demo"].license == "MIT" and entries["demo"].license_files == ["LICENSE"]
    assert [t.instance_id for t in real_tasks(subset="eval", data_dir=data)] == ["other-2.0__clamp"]
    with pytest.raises(ValueError, match="valid splits: real, long"):
        real_tasks(split="easy", data_dir=data)


def test_packing_is_reproducible(packed: tuple[Path, Path], tmp_path: Path) -> None:
    _, data = packed
    again = tmp_path / "again"
    pack_suite(tmp_path / "build", again, held_out=["other"])
    for path in sorted(data.iterdir()):
        assert (again / path.name).read_bytes() == path.read_bytes(), path.name


def test_a_corrupt_task_line_is_named_by_file_and_line(packed: tuple[Path, Path]) -> None:
    _, data = packed
    rows = lzma.decompress((data / "tasks.jsonl.xz").read_bytes()).decode().splitlines()
    broken = json.loads(rows[1])
    del broken["task"]["FAIL_TO_PASS"]
    rows[1] = json.dumps(broken)
    (data / "tasks.jsonl.xz").write_bytes(lzma.compress(("\n".join(rows) + "\n").encode()))
    with pytest.raises(
        SuiteDataError, match=r"tasks\.jsonl\.xz:2: task\.FAIL_TO_PASS: Field required"
    ):
        real_tasks(data_dir=data)


def test_a_tampered_archive_is_refused(packed: tuple[Path, Path], tmp_path: Path) -> None:
    _, data = packed
    archive = data / "demo-1.0.tar.xz"
    archive.write_bytes(archive.read_bytes() + b"\0")
    with pytest.raises(SuiteDataError, match="checksum"):
        real_tasks(task_ids=["demo-1.0__clamp"], data_dir=data)


def test_an_archive_member_outside_the_tree_is_refused(
    packed: tuple[Path, Path], tmp_path: Path
) -> None:
    _, data = packed
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tar:
        outside = tmp_path / "payload"
        outside.write_text("x")
        tar.add(outside, arcname="../escaped")
    archive = data / "demo-1.0.tar.xz"
    archive.write_bytes(lzma.compress(evil.read_bytes()))
    manifest = json.loads((data / "manifest.json").read_text())
    for entry in manifest["libraries"]:
        if entry["slug"] == "demo-1.0":
            entry["archive_sha256"] = hashlib.sha256(archive.read_bytes()).hexdigest()
    (data / "manifest.json").write_text(json.dumps(manifest))
    read_manifest.cache_clear()
    with pytest.raises(tarfile.OutsideDestinationError):
        real_tasks(task_ids=["demo-1.0__clamp"], data_dir=data)
    assert not list((tmp_path / "cache").rglob("escaped"))


def test_max_per_function_keeps_the_first_tasks_of_each_function(
    packed: tuple[Path, Path], tmp_path: Path
) -> None:
    build = tmp_path / "build"
    rows = (build / "demo-1.0" / "tasks.jsonl").read_text().splitlines()
    second = json.loads(rows[0])
    second["instance_id"] = "demo-1.0__clamp2"
    (build / "demo-1.0" / "tasks.jsonl").write_text(rows[0] + "\n" + json.dumps(second) + "\n")
    capped = tmp_path / "capped"
    pack_suite(build, capped, max_per_function=1)
    read_rows.cache_clear()
    ids = [row.task.instance_id for row in read_rows(capped)]
    assert "demo-1.0__clamp" in ids and "demo-1.0__clamp2" not in ids
    pack_suite(build, capped)
    read_rows.cache_clear()
    assert "demo-1.0__clamp2" in [row.task.instance_id for row in read_rows(capped)]


def test_the_shipped_suite_is_real_code_at_scale() -> None:
    manifest = read_manifest()
    rows = read_rows()
    libraries = {row.library for row in rows}
    assert len(manifest.libraries) >= 8 and libraries == {e.slug for e in manifest.libraries}
    assert len(rows) >= 390  # 409 mined, less those whose tests accept a wrong patch
    splits = {(row.task.split, row.subset) for row in rows}
    assert splits == {("real", "train"), ("real", "eval"), ("long", "train"), ("long", "eval")}
    for entry in manifest.libraries:
        assert entry.license != "unknown" and entry.license_files, entry.slug
        held = {row.subset for row in rows if row.library == entry.slug}
        assert held == {"eval"} if entry.held_out else "train" in held
    for row in rows:
        if row.task.split == "long":
            truth = row.task.ground_truth
            assert truth is not None  # five or six bugs, in their own functions
            assert 5 <= len(set(truth.functions)) == len(truth.functions) <= 6
            assert len(truth.files) >= 2


def test_gym_make_runs_a_shipped_long_task_offline(tmp_path: Path, monkeypatch) -> None:
    import gymnasium as gym

    import ac_env  # noqa: F401

    monkeypatch.setenv("AUTOCOMPACT_CACHE", str(tmp_path))
    first = next(row.task for row in read_rows() if row.task.split == "long")
    env = gym.make(
        "AutoCompact-SWE-v0", task_source="real", split="long", task_ids=[first.instance_id]
    )
    try:
        obs, info = env.reset(seed=0)
        assert first.problem_statement.splitlines()[0] in obs[-1]["content"]
        obs, reward, terminated, truncated, info = env.step(
            "```bash\ngit log --oneline | wc -l\n```"
        )
        assert obs[-1]["content"].strip().splitlines()[-1].strip() == "1"
    finally:
        env.close()


@pytest.mark.slow
def test_every_shipped_library_materialises_and_its_gold_patch_resolves(
    tmp_path: Path, monkeypatch
) -> None:
    from ac_env.grading import grade
    from ac_env.sandbox.local import LocalSandbox

    monkeypatch.setenv("AUTOCOMPACT_CACHE", str(tmp_path))
    firsts: dict[str, str] = {}
    for row in read_rows():
        firsts.setdefault(row.library, row.task.instance_id)
    for task in real_tasks(task_ids=list(firsts.values())):
        assert task.snapshot_dir is not None
        assert git(task.snapshot_dir, "rev-parse", "HEAD").strip() == task.base_commit
        assert grade(task, task.patch, LocalSandbox()).resolved is True, task.instance_id
        assert grade(task, "", LocalSandbox()).resolved is False, task.instance_id


def test_the_reference_agent_imports_a_src_layout_library(tmp_path: Path, monkeypatch) -> None:
    """cachetools keeps its package in ``src/``: the agent's test runs must import it (before,
    every run of such a library stopped at ``ModuleNotFoundError``)."""
    import gymnasium as gym

    import ac_env  # noqa: F401
    from ac_env.agents.reference import ReferenceAgent

    monkeypatch.setenv("AUTOCOMPACT_CACHE", str(tmp_path))
    task = next(row.task for row in read_rows() if row.library.startswith("cachetools"))
    assert task.test_command.startswith("PYTHONPATH=src")
    env = gym.make("AutoCompact-SWE-v0", task_source="real", task_ids=[task.instance_id])
    try:
        obs, _ = env.reset(seed=0)
        obs, *_ = env.step(ReferenceAgent().act(obs).text)
    finally:
        env.close()
    output = obs[-1]["content"]
    assert "No module named 'cachetools'" not in output
    assert " failed" in output and " passed" in output
