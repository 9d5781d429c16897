"""DockerSandbox against a real daemon: the contract (files, diff), image tasks whose repo has a
history, warm reuse, the reaping of a crashed run's containers, and the env on it."""

from __future__ import annotations

import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
from sandbox_task import apply_at_base, make_task

import ac_env  # noqa: F401  (registers the env)
from ac_env.sandbox.base import Sandbox, SandboxError
from ac_env.tasks.model import Task

try:
    from ac_env.sandbox.docker import DockerSandbox
    from ac_env.sandbox.docker.session import HOST_LABEL, PID_LABEL, SESSION_LABEL, docker_client

    docker_client()
    SKIP = None
except SandboxError as error:
    SKIP = str(error)

pytestmark = pytest.mark.skipif(SKIP is not None, reason=str(SKIP))
HISTORY_IMAGE = "autocompact/test-history:latest"


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return make_task(tmp_path)


@pytest.fixture
def box(task: Task) -> Iterator[DockerSandbox]:
    with DockerSandbox() as sandbox:
        sandbox.start(task)
        yield sandbox


@pytest.fixture(scope="module")
def history_image() -> str:
    """An image whose /testbed repo has a future commit (reset away), a tag, a stash."""
    client = docker_client()
    script = (
        "set -e; mkdir /testbed; cd /testbed; git init -q; git config user.name t;"
        " git config user.email t@t; printf 'def add(a, b):\\n    return a - b\\n' > ops.py;"
        " git add -A; git commit -qm base; sed -i 's/a - b/a + b/' ops.py;"
        " echo FUTURE_FIX >> ops.py; git commit -qam fix; git tag fixed; git reset -q --hard"
        " HEAD~1; echo 'stashed FUTURE_FIX' >> ops.py; git stash -q"
    )
    container = client.containers.run(
        "autocompact/base:latest", ["bash", "-c", script], detach=True, network_mode="none"
    )
    try:
        assert container.wait()["StatusCode"] == 0, container.logs()
        container.commit(repository=HISTORY_IMAGE.split(":")[0], tag="latest")
    finally:
        container.remove(force=True)
    return HISTORY_IMAGE


def test_is_a_sandbox_and_runs_in_the_workdir(box: DockerSandbox, task: Task):
    assert isinstance(box, Sandbox)
    result = box.exec("pwd; ls; echo err >&2; exit 3", 10, 1000)
    assert result.output == f"{task.workdir}\ncalc\ntests\nerr\n" and result.exit_code == 3


def test_files_round_trip_and_paths_cannot_escape(box: DockerSandbox):
    box.write_file("pkg/deep/new.txt", b"\x00\xffdata")
    assert box.read_file("pkg/deep/new.txt") == b"\x00\xffdata"
    assert box.read_file(f"{box.workdir}/pkg/deep/new.txt") == b"\x00\xffdata"
    box.exec("ln -s /etc/hostname leak; ln -s .. up", 10, 1000)
    for path in ("../outside", "/etc/hostname", "leak", "up/x", "calc/../../x"):
        with pytest.raises(ValueError, match="outside the workspace"):
            box.read_file(path)
        with pytest.raises(ValueError, match="outside the workspace"):
            box.write_file(path, b"x")


def test_diff_is_what_git_apply_accepts_at_the_base(box: DockerSandbox, task: Task, tmp_path):
    box.exec(
        "sed -i 's/a - b/a + b/' calc/ops.py && rm tests/test_ops.py && mkdir -p data"
        " && printf '\\x00\\x01\\xff' > data/blob.bin && printf 'caf\\xe9\\n' > latin1.txt"
        " && git add -A && git commit -qm 'agent commit' && echo untracked > notes.txt"
        " && echo '*.log' > .gitignore && echo x > run.log && rm -rf .git",
        10,
        1000,
    )
    patch = box.diff()
    assert "diff --git a/run.log" not in patch
    fresh = apply_at_base(task.snapshot_dir, patch, tmp_path / "fresh")
    for name in ("calc/ops.py", "data/blob.bin", "latin1.txt", "notes.txt", ".gitignore"):
        assert (fresh / name).read_bytes() == box.read_file(name), name


def test_image_task_history_is_cut_to_one_commit(history_image: str, task: Task):
    image_task = task.model_copy(update={"image_name": history_image, "snapshot_dir": None})
    with DockerSandbox() as box:
        box.start(image_task)
        result = box.exec(
            "git log --all --oneline | wc -l; git stash list | wc -l; git tag | wc -l;"
            " git fsck --lost-found 2>&1 | grep -c dangling;"
            " git rev-list --all --reflog --objects | cut -c1-40 | git cat-file --batch"
            " | grep -c FUTURE_FIX; grep -rl FUTURE_FIX /testbed /opt /tmp | wc -l; cat ops.py",
            30,
            10_000,
        )
        assert result.output.split("\n")[:6] == ["1", "0", "0", "0", "0", "0"], result.output
        assert "return a - b" in result.output
        box.exec("sed -i 's/a - b/a + b/' ops.py", 10, 1000)
        assert "+    return a + b" in box.diff()


def test_warm_reset_restores_everything_and_reuses_the_container(task: Task):
    box = DockerSandbox(warm=True)
    box.start(task)
    first = box.container_id
    box.exec(
        "echo junk > calc/ops.py; echo new > new.py; echo note > /tmp/note; rm -rf .git;"
        " setsid sleep 1234.5 >/dev/null 2>&1 &",
        10,
        1000,
    )
    box.close()
    box.start(task)
    assert box.container_id == first
    result = box.exec("git status --porcelain; ls /tmp; git log --oneline | wc -l", 10, 1000)
    assert result.output == "1\n"
    assert box.diff() == ""
    box.exec("touch /etc/left-behind", 10, 1000)
    box.close()
    box.start(task)
    assert box.container_id != first
    assert box.exec("ls /etc/left-behind 2>&1 | grep -c 'No such'", 10, 1000).output == "1\n"
    box.close()


def test_a_crashed_runs_containers_are_reaped(task: Task):
    from ac_env.sandbox.docker.session import _remove_leftovers

    client = docker_client()
    dead_pid = _dead_pid()

    labels = {
        SESSION_LABEL: f"crashed-{uuid.uuid4().hex}",
        PID_LABEL: str(dead_pid),
        HOST_LABEL: socket.gethostname(),
    }
    orphan = client.containers.run(
        "autocompact/base:latest",
        ["sleep", "infinity"],
        detach=True,
        labels=labels,
        network_mode="none",
    )
    _remove_leftovers(client)
    assert not client.containers.list(all=True, filters={"id": orphan.id})


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_the_env_runs_on_docker(task: Task, tmp_path: Path):
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text(task.model_dump_json() + "\n")
    env = gym.make("AutoCompact-SWE-v0", task_source=str(task_file), sandbox="docker")
    try:
        env.reset(seed=0)
        fix = "```bash\nsed -i 's/a - b/a + b/' calc/ops.py\n```"
        env.step(fix)
        _, reward, terminated, _, info = env.step("```bash\nsubmit\n```")
        assert terminated and reward == 1.0, info.get("reward_detail")
    finally:
        env.close()
