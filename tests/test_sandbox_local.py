"""LocalSandbox: isolation, limits, kills, output caps, files and diffs, on a real tiny repo."""

from __future__ import annotations

import os
import resource
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_task import apply_at_base, git, make_task, processes_mentioning

from ac_env.sandbox.base import Sandbox, SandboxError
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks.model import Task

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
ISOLATIONS = [pytest.param("bwrap", marks=needs_bwrap), "none"]


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return make_task(tmp_path)


@pytest.fixture(params=ISOLATIONS)
def sandbox(request: pytest.FixtureRequest, task: Task) -> Iterator[LocalSandbox]:
    with LocalSandbox(isolation=request.param) as box:
        box.start(task)
        yield box


@pytest.fixture
def bwrap_box(task: Task) -> Iterator[LocalSandbox]:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap missing")
    with LocalSandbox() as box:
        box.start(task)
        yield box


def test_is_a_sandbox():
    assert isinstance(LocalSandbox(isolation="none"), Sandbox)


def test_exec_runs_in_the_repo_with_stderr_interleaved(sandbox: LocalSandbox):
    result = sandbox.exec("pwd; echo out; echo err >&2; exit 3", 10, 10_000)
    assert result.output == f"{sandbox.workdir}\nout\nerr\n"
    assert result.exit_code == 3 and not result.timed_out and not result.truncated
    assert sandbox.exec("python --version && python3 -c 'print(6*7)'", 10, 1000).output.endswith(
        "42\n"
    )


def test_bwrap_workdir_is_the_tasks(bwrap_box: LocalSandbox, task: Task):
    assert bwrap_box.workdir == task.workdir == "/testbed"
    assert bwrap_box.exec("ls", 10, 1000).output.split() == ["calc", "tests"]


def test_history_holds_only_the_snapshot_commit(sandbox: LocalSandbox):
    result = sandbox.exec("git rev-list --all | wc -l; git status --porcelain", 10, 1000)
    assert result.output == "1\n"


def test_git_commits_without_a_global_identity(sandbox: LocalSandbox):
    result = sandbox.exec(
        "echo x > new.txt && git add -A && git commit -qm wip && echo ok", 10, 1000
    )
    assert result.exit_code == 0 and result.output.endswith("ok\n")


def test_background_process_holding_the_pipe_does_not_block_without_isolation(task: Task):
    marker = f"3000.{uuid.uuid4().int % 10**6}"
    with LocalSandbox(isolation="none") as box:
        box.start(task)
        result = box.exec(f"nohup sleep {marker} & echo spawned", 10, 1000)
    assert result.output.endswith("spawned\n") and result.duration_s < 5
    assert processes_mentioning(f"sleep {marker}") == []


def test_output_is_capped_head_and_tail_with_bounded_host_memory(sandbox: LocalSandbox):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = sandbox.exec("echo first; yes | head -c 200000000; echo last", 60, 10_000)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.truncated and result.exit_code == 0
    assert result.output.startswith("first\ny\ny\n") and result.output.endswith("y\nlast\n")
    total = len("first\n") + 200_000_000 + len("last\n")
    assert f"{total - 10_000} bytes omitted" in result.output
    assert len(result.output) < 10_200
    assert grown_mb < 100


def test_undecodable_bytes_become_replacement_characters(sandbox: LocalSandbox):
    result = sandbox.exec(r"printf 'a\xff\xfeb\n'", 10, 1000)
    assert result.output == "a\ufffd\ufffdb\n"


def test_memory_hog_is_bounded(sandbox: LocalSandbox, task: Task):
    with LocalSandbox(isolation=sandbox.isolation, memory_limit_mb=256) as box:
        box.start(task)
        small = box.exec("python3 -c 'b = bytearray(64 << 20); print(len(b))'", 20, 1000)
        hog = box.exec("python3 -c 'b = bytearray(1 << 30)'", 20, 1000)
    assert small.output == f"{64 << 20}\n"
    assert hog.exit_code == 1 and "MemoryError" in hog.output


def test_file_size_is_bounded(sandbox: LocalSandbox, task: Task):
    with LocalSandbox(isolation=sandbox.isolation, max_file_size_mb=1) as box:
        box.start(task)
        result = box.exec("head -c 2000000 /dev/zero > big; stat -c %s big", 10, 1000)
    assert result.output.endswith("1048576\n")


def test_missing_bubblewrap_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxError, match="apt-get install -y bubblewrap") as error:
        LocalSandbox()
    assert 'isolation="none"' in str(error.value)


def test_snapshot_problems_are_sandbox_errors(task: Task, tmp_path: Path):
    box = LocalSandbox(isolation="none")
    with pytest.raises(SandboxError, match="missing or not a git repository"):
        box.start(task.model_copy(update={"snapshot_dir": tmp_path / "nowhere"}))
    with pytest.raises(SandboxError, match="no snapshot_dir"):
        box.start(task.model_copy(update={"snapshot_dir": None}))
    assert task.snapshot_dir is not None
    (task.snapshot_dir / "extra.txt").write_text("x")
    git(task.snapshot_dir, "add", "-A")
    git(task.snapshot_dir, "commit", "-qm", "second")
    with pytest.raises(SandboxError, match="exactly one commit"):
        box.start(task)


def test_files_round_trip_and_paths_cannot_escape(sandbox: LocalSandbox):
    sandbox.write_file("pkg/deep/new.txt", b"\x00\xffdata")
    assert sandbox.exec("cat pkg/deep/new.txt | od -An -c | tr -s ' '", 10, 1000).output.strip()
    assert sandbox.read_file("pkg/deep/new.txt") == b"\x00\xffdata"
    assert sandbox.read_file(f"{sandbox.workdir}/pkg/deep/new.txt") == b"\x00\xffdata"
    assert sandbox.exec("echo more >> pkg/deep/new.txt && echo ok", 10, 1000).output == "ok\n"
    sandbox.exec("ln -s /etc/hostname leak; ln -s .. up", 10, 1000)
    for path in ("../outside", "/etc/hostname", "leak", "up/x", "calc/../../x"):
        with pytest.raises(ValueError, match="outside the workspace"):
            sandbox.read_file(path)
        with pytest.raises(ValueError, match="outside the workspace"):
            sandbox.write_file(path, b"x")


def test_diff_is_what_git_apply_accepts_at_the_base(sandbox: LocalSandbox, task: Task):
    sandbox.exec(
        "sed -i 's/a - b/a + b/' calc/ops.py && rm tests/test_ops.py && mkdir -p data"
        " && printf '\\x00\\x01\\xff' > data/blob.bin && printf 'caf\\xe9\\n' > latin1.txt"
        " && chmod +x calc/__init__.py && git add -A && git commit -qm 'agent commit'"
        " && echo untracked > notes.txt && echo '*.log' > .gitignore && echo x > run.log",
        10,
        1000,
    )
    patch = sandbox.diff()
    assert "diff --git a/run.log" not in patch
    fresh = apply_at_base(task.snapshot_dir, patch, Path(str(task.snapshot_dir) + "-fresh"))
    for name in ("calc/ops.py", "data/blob.bin", "latin1.txt", "notes.txt", ".gitignore"):
        assert (fresh / name).read_bytes() == sandbox.read_file(name), name
    assert not (fresh / "tests" / "test_ops.py").exists()
    assert os.access(fresh / "calc" / "__init__.py", os.X_OK)


def test_diff_survives_a_destroyed_git_directory(sandbox: LocalSandbox):
    assert sandbox.diff() == ""
    sandbox.exec("echo change >> calc/ops.py && rm -rf .git", 10, 1000)
    patch = sandbox.diff()
    assert patch.startswith("diff --git a/calc/ops.py b/calc/ops.py") and "+change" in patch


def test_tmp_persists_across_commands_but_is_the_sandboxs_own(bwrap_box: LocalSandbox):
    name = f"note-{uuid.uuid4().hex}"
    bwrap_box.exec(f"echo kept > /tmp/{name}", 10, 1000)
    assert bwrap_box.exec(f"cat /tmp/{name}", 10, 1000).output == "kept\n"
    assert not Path(f"/tmp/{name}").exists()


def test_commands_no_shell_could_receive_are_refused(sandbox: LocalSandbox):
    assert sandbox.exec("echo a\0b", 10, 1000).exit_code == 126
    result = sandbox.exec("echo " + "x" * 200_000, 10, 1000)
    assert result.exit_code == 126 and "200005 bytes" in result.output


def test_close_removes_everything_and_is_idempotent(task: Task):
    box = LocalSandbox(isolation="none")
    box.start(task)
    box.exec("chmod 000 calc", 10, 1000)
    workspace = box.workspace
    with pytest.raises(SandboxError, match="already started"):
        box.start(task)
    box.close()
    box.close()
    assert not workspace.exists()
    with pytest.raises(SandboxError, match="not started"):
        box.exec("true", 10, 100)
    box.reset(task)
    assert box.exec("ls", 10, 100).output == "calc\ntests\n"
    box.close()


def test_a_forgotten_sandbox_is_removed_when_collected(task: Task):
    box = LocalSandbox(isolation="none")
    box.start(task)
    workspace = box.workspace
    del box
    assert not workspace.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs commands to run as another user")
def test_bubblewrap_setup_failure_is_a_sandbox_error_not_output(task: Task, tmp_path: Path):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap missing")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with LocalSandbox(root_dir=str(private)) as box:
        box.start(task)
        with pytest.raises(SandboxError, match="could not start the command: bwrap: Can't find"):
            box.exec("echo hi", 10, 1000)


def test_a_command_cannot_pose_as_a_sandbox_failure(sandbox: LocalSandbox):
    result = sandbox.exec(
        'echo "bwrap: Can\'t find source path"; ls /proc/self/fd; exit 1', 10, 100
    )
    assert result.exit_code == 1 and result.output.split()[-4:] == ["0", "1", "2", "3"]
