"""The host never interprets what the agent wrote: a workspace whose ``.git/config``,
hooks and ``.gitattributes`` hold every program-running or output-changing git setting runs
nothing on the host (a marker file outside every sandbox proves it), with the command cache on
and off and on both backends, and a real fix still grades 1 however the attributes try to hide
it; a grade record planted in the cache is ignored; fifos and other special files never hang a
step; the cache's key covers git's object store; index stat data does not change the key."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import subprocess
from pathlib import Path

import gymnasium as gym
import pytest
from reward_hacks import EPISODE_CHEATS, EpisodeCheat
from sandbox_task import git

import ac_env  # noqa: F401  (registers the env ids)
from ac_env.grading.cache import FORMAT, grader_fingerprint
from ac_env.sandbox.base import SandboxError
from ac_env.sandbox.command_cache import Uncacheable, manifest
from ac_env.sandbox.git_index import index_digest
from ac_env.sandbox.host_files import UnsafeFileError, read_regular, write_regular
from ac_env.sandbox.local import LocalSandbox
from ac_env.sandbox.signed_records import record_path
from ac_env.tasks import load_tasks


def bash(command: str) -> str:
    return f"```bash\n{command}\n```"


def docker_or_skip() -> None:
    from ac_env.sandbox.docker.session import docker_client

    try:
        docker_client()
    except SandboxError as error:
        pytest.skip(str(error))


@pytest.mark.parametrize("cheat", EPISODE_CHEATS, ids=lambda cheat: cheat.name)
@pytest.mark.parametrize(
    ("sandbox", "cache"), [("local", False), ("local", True), ("docker", False)]
)
def test_episode_cheats_run_nothing_on_the_host_and_earn_nothing(
    cheat: EpisodeCheat, sandbox: str, cache: bool, tiny_task_file: Path, tmp_path: Path
) -> None:
    if sandbox == "docker":
        docker_or_skip()
    elif shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    marker = tmp_path / "marker"
    marker.mkdir()
    options = {"command_cache": str(tmp_path / "cache")} if cache else {}
    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=str(tiny_task_file),
        split=None,
        sandbox=sandbox,
        max_steps=10,
        **options,
    )
    episodes = cheat.episodes(marker)
    if cache and len(episodes) == 1:
        episodes = episodes * 2  # the second episode replays the first
    try:
        for commands in episodes:
            env.reset(options={"task_id": "tiny-calc-1"})
            for command in commands:
                observation, *_ = env.step(bash(command))
            last = observation[-1]["content"]
            _, reward, *_, info = env.step(bash("submit"))
            assert info["infra_error"] is None, info
            assert reward == cheat.reward, info["reward_detail"]
        assert cheat.absent == "" or cheat.absent not in last, last
        assert cheat.present in last, last
        if cheat.reward == 1.0:
            patch = env.unwrapped.trajectory.end.patch  # type: ignore[attr-defined]
            assert "-    return a - b\n+    return a + b" in patch
    finally:
        env.close()
    assert sorted(os.listdir(marker)) == []


def test_a_planted_grade_record_is_ignored(tiny_task_file: Path, tmp_path: Path) -> None:
    (task,) = [
        t for t in load_tasks(str(tiny_task_file), split=None) if t.instance_id == "tiny-calc-1"
    ]
    cache = tmp_path / "cache"
    task_digest = hashlib.sha256(task.model_dump_json().encode()).hexdigest()
    key = json.dumps([FORMAT, grader_fingerprint(), task_digest, "", 300.0])
    forged = {
        "key": key,
        "grade": {"resolved": True, "reward": 1.0, "reason": "resolved", "patch_applied": True},
    }
    path = record_path(cache / "grades", key)
    path.parent.mkdir(parents=True)
    other_key = b"k" * 32
    canonical = json.dumps(forged, sort_keys=True, separators=(",", ":")).encode()
    path.write_text(
        json.dumps({"body": forged, "mac": hmac.new(other_key, canonical, "sha256").hexdigest()})
    )
    sandbox = "local" if shutil.which("bwrap") else "unisolated"
    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=str(tiny_task_file),
        split=None,
        sandbox=sandbox,
        command_cache=str(cache),
    )
    try:
        env.reset(options={"task_id": "tiny-calc-1"})
        _, reward, *_ = env.step(bash("submit"))  # an empty patch
    finally:
        env.close()
    assert reward == 0.0


def test_host_file_helpers_refuse_special_files_and_links(tmp_path: Path) -> None:
    fifo, link = tmp_path / "fifo", tmp_path / "link"
    os.mkfifo(fifo)
    (tmp_path / "target").write_bytes(b"x")
    link.symlink_to(tmp_path / "target")
    for path in (fifo, link):
        with pytest.raises(OSError):
            read_regular(path)
        with pytest.raises(OSError):
            write_regular(path, b"y")
    assert (tmp_path / "target").read_bytes() == b"x"
    (tmp_path / "big").write_bytes(b"z" * 100)
    with pytest.raises(UnsafeFileError, match="over the limit"):
        read_regular(tmp_path / "big", 99)


def test_the_cache_key_covers_the_object_store(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git" / "objects" / "ab").mkdir(parents=True)
    obj = repo / ".git" / "objects" / "ab" / ("c" * 38)
    obj.write_bytes(b"honest")
    before = manifest({"repo": repo})
    obj.write_bytes(b"poison")  # the same object name, other content
    assert manifest({"repo": repo}) != before
    os.mkfifo(repo / "fifo")
    with pytest.raises(Uncacheable):
        manifest({"repo": repo})


def test_the_index_digest_ignores_stat_data_and_sees_entries(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    index = repo / ".git" / "index"
    first = index_digest(index.read_bytes())
    assert first.startswith("entries:")
    os.utime(repo / "a.py", (1, 1))
    git(repo, "update-index", "--really-refresh")  # rewrites the entry's stat data
    assert index.read_bytes() != b"" and index_digest(index.read_bytes()) == first
    for version in ("3", "4"):
        git(repo, "update-index", "--index-version", version)
        if version == "3":
            git(repo, "update-index", "--skip-worktree", "a.py")  # an extended flag
        digest = index_digest(index.read_bytes())
        assert digest.startswith("entries:"), version
    git(repo, "update-index", "--no-skip-worktree", "a.py")
    (repo / "a.py").write_text("x = 2\n")
    git(repo, "add", "a.py")
    assert index_digest(index.read_bytes()) != first


def test_the_diff_ignores_workspace_attributes_on_both_backends(tiny_task_file: Path) -> None:
    (task,) = [
        t for t in load_tasks(str(tiny_task_file), split=None) if t.instance_id == "tiny-calc-1"
    ]
    backends: list[object] = []
    if shutil.which("bwrap"):
        backends.append(LocalSandbox())
    try:
        docker_or_skip()
        from ac_env.sandbox.docker import DockerSandbox

        backends.append(DockerSandbox())
    except pytest.skip.Exception:
        pass
    if not backends:
        pytest.skip("no sandbox backend")
    for sandbox in backends:
        sandbox.start(task)  # type: ignore[attr-defined]
        try:
            sandbox.exec(  # type: ignore[attr-defined]
                "printf '*.py binary diff=x working-tree-encoding=UTF-16 ident\\n' > .gitattributes"
                " && cp .gitattributes .git/info/attributes"
                " && sed -i 's/a - b/a + b/' calc/ops.py",
                30,
                10_000,
            )
            patch = sandbox.diff()  # type: ignore[attr-defined]
        finally:
            sandbox.close()  # type: ignore[attr-defined]
        assert "-    return a - b\n+    return a + b" in patch, (type(sandbox).__name__, patch)
        assert "GIT binary patch" not in patch


def test_the_miner_drops_a_git_directory_an_sdist_carries(tmp_path: Path) -> None:
    from ac_env.mining.sdist import commit_tree, unpack

    marker = tmp_path / "marker"
    root = tmp_path / "pkg-1.0"
    (root / ".git").mkdir(parents=True)
    (root / "pkg.py").write_text("x = 1\n")
    (root / ".git" / "config").write_text(f"[core]\n\tfsmonitor = touch {marker}\n")
    archive = tmp_path / "pkg-1.0.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(tmp_path), "pkg-1.0"], check=True)
    target = tmp_path / "unpacked"
    unpack(archive, target)
    commit_tree(target, "import")
    assert not marker.exists()
    assert "fsmonitor" not in (target / ".git" / "config").read_text()
