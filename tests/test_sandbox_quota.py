"""The per-episode disk quota on both isolating backends: a write past it fails inside, the
observation says so, the next command works, the host keeps its space, and grading works."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
from sandbox_task import make_task
from test_sandbox_adversarial import BACKENDS, docker_skip_reason
from test_sandbox_docker import history_image  # noqa: F401  (a fixture)

import ac_env  # noqa: F401  (registers the env id)
from ac_env.sandbox import quota
from ac_env.sandbox.base import Sandbox
from ac_env.sandbox.local import LocalSandbox
from ac_env.sandbox.local import sandbox as local_module
from ac_env.tasks.model import Task

QUOTA_MB = 8
NOTE = f"[disk quota of {QUOTA_MB} MB reached: No space left on device]"


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return make_task(tmp_path, hidden_test=True)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def box(backend: str, task: Task) -> Iterator[Sandbox]:
    sandbox: Sandbox
    if backend == "docker":
        from ac_env.sandbox.docker import DockerSandbox

        sandbox = DockerSandbox(disk_quota_mb=QUOTA_MB)
    else:
        sandbox = LocalSandbox(isolation="bwrap", disk_quota_mb=QUOTA_MB)
    sandbox.start(task)
    yield sandbox
    sandbox.close()


def _size_mb(box: Sandbox, path: str) -> float:
    result = box.exec(f"stat -c %s {path}", 10, 1000)
    return int(result.output.split()[0]) / 2**20


@pytest.mark.parametrize("target", ["big.bin", "/tmp/big.bin"])
def test_a_write_past_the_quota_fails_inside_and_the_episode_goes_on(box: Sandbox, target: str):
    host_free = shutil.disk_usage("/").free
    result = box.exec(f"dd if=/dev/zero of={target} bs=1M count={4 * QUOTA_MB}", 30, 10_000)
    assert result.exit_code != 0
    assert "No space left on device" in result.output
    assert result.output.rstrip().endswith(NOTE)
    assert _size_mb(box, target) <= QUOTA_MB
    assert shutil.disk_usage("/").free > host_free - QUOTA_MB * 2**20
    after = box.exec(f"rm {target} && echo still here", 10, 1000)
    assert after.output == "still here\n"
    assert NOTE not in after.output


def test_the_note_comes_even_when_the_command_hides_its_errors(box: Sandbox):
    result = box.exec("cat /dev/zero > /tmp/fill 2>/dev/null; echo done", 30, 10_000)
    assert result.output.startswith("done\n")
    assert result.output.rstrip().endswith(NOTE)


def test_commands_under_the_quota_get_no_note(box: Sandbox):
    result = box.exec("head -c 1M /dev/zero > small.bin && echo ok", 10, 1000)
    assert result.output == "ok\n"


def test_the_quota_holds_the_host(box: Sandbox, backend: str):
    """The workspace and /tmp are file systems of the quota's size, not the host's disk."""
    sizes = box.exec("df -k --output=size . /tmp | tail -n 2", 10, 1000).output.split()
    assert [int(s) for s in sizes] == [QUOTA_MB * 1024] * 2


@pytest.mark.skipif(docker_skip_reason() is not None, reason=str(docker_skip_reason()))
def test_an_image_tasks_repo_is_copied_into_the_quota_volume(history_image: str, task: Task):  # noqa: F811
    from ac_env.sandbox.docker import DockerSandbox

    image_task = task.model_copy(update={"image_name": history_image, "snapshot_dir": None})
    with DockerSandbox(disk_quota_mb=QUOTA_MB) as box:
        box.start(image_task)
        result = box.exec("cat ops.py; git log --oneline | wc -l; df -k --output=size .", 10, 1000)
        code, commits, _header, size = result.output.rsplit("\n", 4)[:4]
        assert "return a - b" in code and commits == "1" and int(size) == QUOTA_MB * 1024


@pytest.mark.slow
def test_grading_works_after_the_agent_filled_the_disk(backend: str, task: Task, tmp_path: Path):
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text(task.model_dump_json() + "\n")
    sandbox = "local" if backend == "bwrap" else backend
    env = gym.make(
        "AutoCompact-SWE-v0", task_source=str(task_file), sandbox=sandbox, disk_quota_mb=QUOTA_MB
    )
    try:
        env.reset(seed=0)
        observation, *_ = env.step("```bash\ncat /dev/zero > /tmp/fill\n```")
        assert NOTE in observation[-1]["content"]
        env.step("```bash\nrm /tmp/fill; sed -i 's/a - b/a + b/' calc/ops.py\n```")
        _, reward, terminated, _, info = env.step("```bash\nsubmit\n```")
        assert terminated and reward == 1.0 and info["infra_error"] is None
    finally:
        env.close()


@pytest.mark.slow
def test_a_full_workspace_is_the_agents_failure_not_an_infra_error(
    backend: str, task: Task, tmp_path: Path
):
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text(task.model_dump_json() + "\n")
    sandbox = "local" if backend == "bwrap" else backend
    env = gym.make(
        "AutoCompact-SWE-v0", task_source=str(task_file), sandbox=sandbox, disk_quota_mb=QUOTA_MB
    )
    try:
        env.reset(seed=0)
        env.step("```bash\ncat /dev/zero > fill.bin\n```")
        _, reward, _, _, info = env.step("```bash\nsubmit\n```")
        assert reward == 0.0 and info["infra_error"] is None
    finally:
        env.close()


def test_without_the_right_to_mount_the_local_quota_degrades_with_a_warning(
    task: Task, monkeypatch: pytest.MonkeyPatch
):
    def refuse(path: Path, size_mb: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr("ac_env.sandbox.local.sandbox.mount_tmpfs", refuse)
    with LocalSandbox(isolation="none", disk_quota_mb=QUOTA_MB) as box:
        with pytest.warns(RuntimeWarning, match="disk_quota_mb=8 is not enforced"):
            box.start(task)
        assert not box.quota_enforced
        assert box.exec("echo ok", 10, 100).output == "ok\n"
    with LocalSandbox(isolation="none", disk_quota_mb=None) as box:
        box.start(task)
        assert not box.quota_enforced


def test_the_quota_tmpfs_is_gone_after_close(task: Task):
    box = LocalSandbox(isolation="none", disk_quota_mb=QUOTA_MB)
    box.start(task)
    assert box.quota_enforced
    sandbox_dir = box.workspace.parent.parent
    box.close()
    assert not sandbox_dir.exists()
    assert str(sandbox_dir) not in Path("/proc/self/mounts").read_text()


def test_a_dead_runs_quota_mounts_are_removed(task: Task, tmp_path: Path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover = tmp_path / f"autocompact-sandbox-{dead.pid}-x"
    (leftover / "work").mkdir(parents=True)
    quota.mount_tmpfs(leftover / "work", QUOTA_MB)
    (leftover / "work" / "data").write_bytes(b"x" * 1000)
    alive = tmp_path / f"autocompact-sandbox-{os.getpid()}-y"
    (alive / "work").mkdir(parents=True)
    quota.mount_tmpfs(alive / "work", QUOTA_MB)
    try:
        assert quota.leftover_mounts() == [leftover / "work"]
        local_module._remove_leftover_mounts.cache_clear()
        with LocalSandbox(isolation="none", disk_quota_mb=QUOTA_MB) as box:
            box.start(task)
        assert not leftover.exists() and quota.leftover_mounts() == []
    finally:
        for mountpoint in (leftover / "work", alive / "work"):
            if str(mountpoint) in Path("/proc/self/mounts").read_text():
                quota.unmount(mountpoint)


def test_the_free_space_check():
    assert quota.reached("dd: error writing 'x': No space left on device", 1 << 30)
    assert quota.reached("", 0)
    assert not quota.reached("ok", 1 << 30)
