"""Episode snapshots: a restored episode continues exactly as the original did (workspace,
context, cost meter and its cached prefix, forced-compaction request, commands, RNG,
trajectory), in the same env or another instance, on the local and the docker sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sandbox_task import make_task

from ac_env.env import AutoCompactSWEEnv
from ac_env.sandbox.base import SandboxError
from ac_env.sandbox.local import LocalSandbox
from ac_env.trajectory import ToolResult

try:
    from ac_env.sandbox.docker.session import docker_client

    docker_client()
    NO_DOCKER = None
except SandboxError as error:
    NO_DOCKER = str(error)

SANDBOXES = [
    "local",
    pytest.param("docker", marks=pytest.mark.skipif(NO_DOCKER is not None, reason=str(NO_DOCKER))),
]
SUMMARY = (
    "# Auto Context Summary\n## Known\nadd() subtracts in calc/ops.py\n"
    "## Workspace\ncalc/ops.py fixed and staged; notes.txt drafted\n## Next\ncheck and submit"
)


def bash(command: str) -> str:
    return f"THOUGHT: x\n```bash\n{command}\n```"


# Before the snapshot: an untracked file, /tmp state, a symlink, a staged edit, a compaction.
BEFORE = [
    bash(
        "printf 'draft\\n' > notes.txt && chmod 640 notes.txt && mkdir -p /tmp/work"
        " && echo cached > /tmp/work/state && ln -s calc/ops.py link.py"
    ),
    bash("sed -i 's/a - b/a + b/' calc/ops.py && git add calc/ops.py"),
    SUMMARY,
    bash("echo more >> notes.txt && rm tests/test_ops.py"),
]
# After it: read all of that back, overflow the forced-compaction threshold, answer the
# request with a command (so the fallback summary is built from the commands and the diff),
# submit (graded on the restored workspace; the symlink goes first, since the grader counts a
# symlink in the diff as tampering).
AFTER = [
    bash("cat notes.txt /tmp/work/state; stat -c '%A %N' notes.txt link.py; git status --short"),
    bash("rm link.py && seq 1 1500"),
    bash("python3 -c 'import calc.ops as o; print(o.add(2, 3))'"),
    bash("submit"),
]
THRESHOLD = 3000  # tokens: only `seq 1 1500` passes it


@pytest.fixture(scope="module")
def task_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    task = make_task(tmp_path_factory.mktemp("snapshot-task"))
    path = task.snapshot_dir.parent / "tasks.jsonl"  # type: ignore[union-attr]
    path.write_text(task.model_dump_json() + "\n")
    return path


def make_env(task_file: Path, sandbox: str) -> AutoCompactSWEEnv:
    return AutoCompactSWEEnv(
        task_source=str(task_file),
        split=None,
        sandbox=sandbox,
        forced_compaction_threshold=THRESHOLD,
    )


def run(env: AutoCompactSWEEnv, actions: list[str]) -> list[Any]:
    """(observation, reward, terminated, truncated, info without timings) per step."""
    steps = []
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        info.pop("timings")
        steps.append((observation, reward, terminated, truncated, info))
    return steps


def events(env: AutoCompactSWEEnv) -> list[dict[str, Any]]:
    """The trajectory, without command durations (wall-clock time)."""
    assert env.trajectory is not None
    return [
        e.model_dump(exclude={"duration_s"} if isinstance(e, ToolResult) else None)
        for e in env.trajectory.events
    ]


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_restored_episode_continues_exactly_like_the_original(task_file, sandbox):
    original = make_env(task_file, sandbox)
    forked = make_env(task_file, sandbox)
    other = make_env(task_file, sandbox)
    try:
        original.reset(seed=3)
        before = run(original, BEFORE)
        expected = run(original, AFTER)
        expected_events, expected_draw = events(original), original.np_random.integers(1 << 30)

        forked.reset(seed=3)
        assert run(forked, BEFORE) == before
        snapshot = forked.snapshot()
        assert run(forked, AFTER) == expected  # snapshotting changed nothing
        restored_here = forked.restore(snapshot)
        assert restored_here == before[-1][0]
        assert run(forked, AFTER) == expected
        assert events(forked) == expected_events

        assert other.restore(snapshot) == before[-1][0]  # another instance, never reset
        again = run(other, AFTER)
        assert again == expected
        assert events(other) == expected_events
        assert other.np_random.integers(1 << 30) == expected_draw
    finally:
        for env in (original, forked, other):
            env.close()
    read_back, overflow, forced, submit = again
    assert read_back[0][-1]["content"] == (  # untracked, staged, removed, /tmp, modes, links
        "[exit code 0]\ndraft\nmore\ncached\n-rw-r----- 'notes.txt'\n"
        "lrwxrwxrwx 'link.py' -> 'calc/ops.py'\nM  calc/ops.py\n D tests/test_ops.py\n"
        "?? link.py\n?? notes.txt\n"
    )
    assert read_back[4]["cost"]["step"]["input_cached"] > 0  # the cached prefix carried over
    assert read_back[4]["segment"] == 1 and overflow[4]["compaction_requested"]
    assert forced[4]["compaction"]["summarizer"] == "fallback"
    assert "seq 1 1500" in forced[4]["compaction"]["summary"]  # commands before the snapshot
    assert submit[1] == 1.0 and submit[2]  # the restored fix is graded


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_the_sandbox_archive_restores_every_kind_of_change(tmp_path, sandbox):
    task = make_task(tmp_path)
    make = _sandbox_factory(sandbox)
    with make() as first, make() as second:
        first.start(task)
        first.exec(
            "rm calc/__init__.py && mkdir -p empty/dir && printf '#!/bin/sh\\n' > run.sh"
            " && chmod 755 run.sh && echo 1 > /tmp/t && echo x >> .git/info/exclude",
            10,
            1000,
        )
        archive = first.snapshot()
        second.start(task)
        second.restore(archive)
        listing = "ls -la --time-style=+ . empty /tmp"
        assert second.diff() == first.diff() and "deleted file" in first.diff()
        for command in (listing, "cat /tmp/t .git/info/exclude", "git status --short"):
            output = first.exec(command, 10, 10_000).output
            assert second.exec(command, 10, 10_000).output == output


def _sandbox_factory(name: str) -> Any:
    if name == "docker":
        from ac_env.sandbox.docker import DockerSandbox

        return DockerSandbox
    return LocalSandbox
