"""SWE-bench-format tasks in Docker, the path a user takes, against the real daemon.

A task mined from a real library (toolz 1.2.0 from PyPI; the offline tiny library of the
miner's own tests when PyPI cannot be reached) becomes a SWE-bench-format instance:
``scripts/swebench_image.py build`` commits an image holding the buggy repo at /testbed and
writes a task file with ``image_name`` set and no ``snapshot_dir``. That file then runs
through ``gym.make(..., sandbox="docker")``, ``ac-bench --sandbox docker`` and grading (gold
patch: resolved, as SWE-bench's own harness also says; empty patch: not). A missing image, a
repo the container's root cannot write and a test command the grader cannot run are refused
with the reason, before anything runs where that is possible.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
from mined_sdist import good_sdist
from sandbox_task import make_task

import ac_env  # noqa: F401  (registers the env ids)
from ac_env.agents.oracle import GoldPatchPolicy
from ac_env.agents.rollout import rollout
from ac_env.bench import cli as bench_cli
from ac_env.grading import grade
from ac_env.mining.build import BuildOptions, build
from ac_env.sandbox.base import SandboxError
from ac_env.tasks import load_tasks
from ac_env.tasks.model import Task

try:
    from ac_env.sandbox.docker import DockerSandbox
    from ac_env.sandbox.docker.session import docker_client

    docker_client()
    NO_DOCKER = None
except SandboxError as error:
    NO_DOCKER = str(error)

pytestmark = pytest.mark.skipif(NO_DOCKER is not None, reason=f"no Docker daemon: {NO_DOCKER}")
PROJECT = Path(__file__).resolve().parent.parent
SCRIPT = PROJECT / "scripts" / "swebench_image.py"
REPOSITORY = "autocompact/test-swe-task"
MISSING_IMAGE = "autocompact/never-built:nothing-here"


def swebench_image(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600
    )


def pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        return False
    return True


def bench(out: Path, task_file: Path, *extra: str) -> int:
    return bench_cli.main(
        [
            *("--out", str(out), "--source", str(task_file), "--split", "all"),
            *("--strategies", "none", "--budgets", "0.05", "--workers", "1", "--no-progress"),
            *extra,
        ]
    )


def remove_images(*names: str) -> None:
    import docker.errors

    for name in names:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client().images.remove(name, force=True)


@pytest.fixture(scope="module")
def mined_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A task file with one task mined from a real library (snapshot_dir tasks)."""
    out = tmp_path_factory.mktemp("mined")
    library = "toolz==1.2.0" if pypi_reachable() else str(good_sdist(out))
    isolation = "bwrap" if shutil.which("bwrap") else "none"
    options = BuildOptions(out=out, max_tasks=1, isolation=isolation, progress=False)
    (report,) = build([library], options)
    assert report.status == "built", report.reason
    return out / "tasks.jsonl"


@pytest.fixture(scope="module")
def instance_file(mined_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The mined task as a SWE-bench-format instance: its image and a task file naming it."""
    out = tmp_path_factory.mktemp("instances") / "tasks.jsonl"
    built = swebench_image("build", str(mined_file), str(out), "--repository", REPOSITORY)
    assert built.returncode == 0, built.stderr
    assert "gold resolves, empty does not" in built.stdout
    yield out
    remove_images(*(task.image_name or "" for task in load_tasks(str(out))))


@pytest.fixture(scope="module")
def instance(instance_file: Path) -> Task:
    (task,) = load_tasks(str(instance_file))
    return task


@pytest.mark.slow
def test_the_task_file_names_an_image_holding_the_buggy_repo_at_the_base_commit(
    mined_file: Path, instance_file: Path, instance: Task
):
    (mined,) = load_tasks(str(mined_file))
    row = json.loads(instance_file.read_text())
    assert "snapshot_dir" not in row and row["image_name"] == f"{REPOSITORY}:{mined.instance_id}"
    assert instance.model_dump(exclude={"image_name", "snapshot_dir"}) == mined.model_dump(
        exclude={"image_name", "snapshot_dir"}
    )
    image = docker_client().images.get(row["image_name"])
    assert image.attrs["Config"]["WorkingDir"] == "/testbed"
    assert mined.snapshot_dir is not None
    snapshot_tree = subprocess.run(
        ["git", "-C", str(mined.snapshot_dir), "rev-parse", "HEAD^{tree}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with DockerSandbox() as box:
        box.start(instance)
        result = box.exec(
            "pwd; git rev-parse 'HEAD^{tree}'; git log --oneline | wc -l; git status --porcelain;"
            " find . -not -user root | wc -l",
            30,
            10_000,
        )
    assert result.output.split("\n") == ["/testbed", snapshot_tree.strip(), "1", "0", ""]


@pytest.mark.slow
def test_grading_resolves_the_gold_patch_and_not_an_empty_one(instance: Task, tmp_path: Path):
    from swebench_verdict import swebench_resolved

    gold = grade(instance, instance.patch, DockerSandbox())
    assert gold.resolved is True and gold.reward == 1.0, gold.reason
    assert gold.fail_to_pass.passed == instance.FAIL_TO_PASS
    assert swebench_resolved(instance, gold, tmp_path) is True
    empty = grade(instance, "", DockerSandbox())
    assert empty.resolved is False and empty.reward == 0.0, empty.reason
    assert empty.fail_to_pass.failed == instance.FAIL_TO_PASS
    assert empty.pass_to_pass.passed == instance.PASS_TO_PASS
    assert swebench_resolved(instance, empty, tmp_path) is False


@pytest.mark.slow
def test_gym_make_runs_an_episode_in_the_image(instance_file: Path, instance: Task):
    env = gym.make(
        "AutoCompact-SWE-v0", task_source=str(instance_file), sandbox="docker", max_steps=5
    )
    try:
        _, info = env.reset(seed=0)
        assert info["instance_id"] == instance.instance_id
        observation, *_ = env.step("```bash\npwd && git log --oneline | wc -l\n```")
        assert "/testbed\n1\n" in observation[-1]["content"]
        trajectory = rollout(env, GoldPatchPolicy(instance), seed=0)
    finally:
        env.close()
    assert trajectory.end is not None and trajectory.end.reward == 1.0


@pytest.mark.slow
def test_ac_bench_runs_the_image_task(instance_file: Path, instance: Task, tmp_path: Path):
    out = tmp_path / "bench"
    assert bench(out, instance_file, "--sandbox", "docker", "--max-steps", "3") == 0
    (record,) = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert record["instance_id"] == instance.instance_id and record["status"] == "ok"
    assert record["budgets"][0]["infra_error"] is None
    assert record["metrics"]["reward"] in (0.0, 1.0)


@pytest.mark.slow
def test_a_build_whose_gold_patch_does_not_resolve_keeps_no_image(tmp_path: Path):
    task = make_task(tmp_path, hidden_test=True, instance_id="calc-wrong-gold")
    wrong = task.model_copy(update={"patch": task.patch.replace("a + b", "a * b")})
    source = tmp_path / "tasks.jsonl"
    source.write_text(wrong.model_dump_json() + "\n")
    built = swebench_image(
        "build", str(source), str(tmp_path / "out.jsonl"), "--repository", REPOSITORY
    )
    assert built.returncode == 1
    assert "calc-wrong-gold: the gold patch gives resolved=False" in built.stderr
    assert not docker_client().images.list(name=f"{REPOSITORY}:calc-wrong-gold")
    assert not (tmp_path / "out.jsonl").exists()


def test_a_missing_image_is_named_and_never_pulled(tmp_path: Path, capsys):
    task = make_task(tmp_path).model_copy(
        update={"image_name": MISSING_IMAGE, "snapshot_dir": None}
    )
    with pytest.raises(SandboxError, match="nothing is pulled") as raised, DockerSandbox() as box:
        box.start(task)
    assert MISSING_IMAGE in str(raised.value)
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text(task.model_dump_json() + "\n")
    out = tmp_path / "bench"
    assert bench(out, task_file, "--sandbox", "docker") == 2
    stderr = capsys.readouterr().err
    assert stderr.startswith("ac-bench: sandbox: docker image(s) not present"), stderr
    assert MISSING_IMAGE in stderr and "nothing is pulled" in stderr
    assert not out.exists()


@pytest.mark.slow
def test_check_names_a_task_whose_image_is_missing(tmp_path: Path):
    task = make_task(tmp_path).model_copy(
        update={"image_name": MISSING_IMAGE, "snapshot_dir": None}
    )
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text(task.model_dump_json() + "\n")
    checked = swebench_image("check", str(task_file))
    assert checked.returncode == 1 and "calc-add" in checked.stderr
    assert f"docker image {MISSING_IMAGE!r} is not present" in checked.stderr


@pytest.mark.slow
def test_a_repo_the_containers_root_cannot_write_is_refused_with_the_reason(tmp_path: Path):
    client = docker_client()
    script = (
        "set -e; mkdir /testbed; cd /testbed; git init -q; echo x > f.py; git add -A;"
        " git -c user.name=t -c user.email=t@t commit -qm base; chown -R 1000:1000 /testbed"
    )
    container = client.containers.run(
        "autocompact/base:latest", ["bash", "-c", script], detach=True, network_mode="none"
    )
    image = f"{REPOSITORY}:not-root-owned"
    try:
        assert container.wait()["StatusCode"] == 0, container.logs()
        container.commit(repository=REPOSITORY, tag="not-root-owned")
        task = make_task(tmp_path).model_copy(update={"image_name": image, "snapshot_dir": None})
        with pytest.raises(SandboxError, match="must be owned by root"), DockerSandbox() as box:
            box.start(task)
    finally:
        container.remove(force=True)
        remove_images(image)


@pytest.mark.slow
def test_a_test_command_the_grader_cannot_run_is_refused_before_the_run(tmp_path: Path, capsys):
    task = make_task(tmp_path).model_copy(
        update={"test_command": "./tests/runtests.py --verbosity 2"}
    )
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text(task.model_dump_json() + "\n")
    out = tmp_path / "bench"
    assert bench(out, task_file, "--sandbox", "docker") == 2
    stderr = capsys.readouterr().err
    assert "tasks: task calc-add: test_command './tests/runtests.py --verbosity 2'" in stderr
    assert "is not a pytest invocation" in stderr and not out.exists()
    result = grade(task, task.patch, DockerSandbox())
    assert result.reward is None and "not a pytest invocation" in str(result.infra_error)
