"""The command replay cache (ac_env.sandbox.command_cache): a replayed command does not run,
an edit's effect is applied (and checked), and a different workspace misses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ac_env.sandbox.base import ExecResult, SandboxError
from ac_env.sandbox.command_cache import CachingSandbox
from ac_env.sandbox.local import LocalSandbox
from ac_env.sandbox.signed_records import write_record
from ac_env.tasks.model import Task
from tests.sandbox_task import make_task


class CountingSandbox(LocalSandbox):
    """A local sandbox that records every command it really runs."""

    def __init__(self, ran: list[str]) -> None:
        super().__init__(isolation="none", disk_quota_mb=None)
        self.ran = ran

    def exec(self, command: str, timeout_s: float, output_limit: int) -> ExecResult:
        self.ran.append(command)
        return super().exec(command, timeout_s, output_limit)


def episode(task: Task, store: Path, ran: list[str], commands: list[str]) -> list[ExecResult]:
    sandbox = CachingSandbox(CountingSandbox(ran), store)
    sandbox.start(task)
    try:
        return [sandbox.exec(command, 30, 10_000) for command in commands]
    finally:
        sandbox.close()


def test_a_replayed_command_does_not_run(tmp_path: Path) -> None:
    task, ran = make_task(tmp_path / "task"), []
    read = "head -3 calc/ops.py"
    outputs = [episode(task, tmp_path / "store", ran, [read])[0] for _ in range(3)]
    assert ran == [read]
    assert outputs[0] == outputs[1] == outputs[2]
    assert "Arithmetic helpers" in outputs[2].output


def test_an_edit_changes_the_workspace_whether_run_or_replayed(tmp_path: Path) -> None:
    task, ran = make_task(tmp_path / "task"), []
    edit = "sed -i 's/a - b/a + b/' calc/ops.py && mkdir -p out && echo done > out/log"
    check = "cat calc/ops.py out/log"
    for _ in range(3):
        results = episode(task, tmp_path / "store", ran, [edit, check])
        assert "a + b" in results[1].output and "done" in results[1].output
    assert ran == [edit, check]  # the later episodes replayed both, the edit's effect included


def test_a_replayed_edit_is_checked_against_the_recorded_files(tmp_path: Path) -> None:
    task, ran = make_task(tmp_path / "task"), []
    edit = "sed -i 's/a - b/a + b/' calc/ops.py"
    episode(task, tmp_path / "store", ran, [edit])
    (record,) = (tmp_path / "store").glob("*.json")
    stored = json.loads(record.read_text())["body"]
    stored["after"] = "0" * 64  # files that the effect cannot give, signed by the trusted side
    write_record(record, stored)
    with pytest.raises(SandboxError, match="did not give the recorded files"):
        episode(task, tmp_path / "store", ran, [edit])


def test_a_different_workspace_misses(tmp_path: Path) -> None:
    task, ran = make_task(tmp_path / "task"), []
    read = "grep -n 'return' calc/ops.py"
    commands = [
        read,
        "echo '# note' > notes.txt",  # an untracked file
        read,
        'echo x > "$HOME/scratch"',  # the sandbox's /tmp (its $HOME) counts too
        read,
        "sed -i 's/a - b/a + b/' calc/ops.py",
        read,
    ]
    results = episode(task, tmp_path / "store", ran, commands)
    assert ran == commands
    assert "a - b" in results[0].output and "a + b" in results[6].output


def test_the_env_option_replays_across_episodes(tmp_path: Path) -> None:
    from ac_env.env import AutoCompactSWEEnv

    env = AutoCompactSWEEnv(
        sandbox="unisolated", command_cache=str(tmp_path / "store"), max_steps=3
    )
    outputs = []
    for _ in range(2):
        env.reset(options={"task_id": env.tasks[0].instance_id})
        observation, *_ = env.step("```bash\nls\n```")
        outputs.append(observation[-1]["content"])
    assert isinstance(env.sandbox, CachingSandbox)
    assert env.sandbox.hits == 1 and outputs[0] == outputs[1]
    env.close()


def test_a_patch_is_graded_once_and_the_diff_replayed(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import ac_env.grading.cache as grading_cache
    from ac_env.env import AutoCompactSWEEnv

    graded: list[str] = []
    real_grade = grading_cache.grade

    def counting_grade(task, patch, sandbox, timeout_s, **settings):  # type: ignore[no-untyped-def]
        graded.append(patch)
        return real_grade(task, patch, sandbox, timeout_s, **settings)

    monkeypatch.setattr(grading_cache, "grade", counting_grade)
    env = AutoCompactSWEEnv(sandbox="unisolated", command_cache=str(tmp_path / "store"))
    task_id = env.tasks[0].instance_id
    rewards, diffs = [], []
    for _ in range(2):
        env.reset(options={"task_id": task_id})
        env.step("```bash\necho '# touched' >> README.md\n```")
        diffs.append(env.sandbox.diff())
        *_, info = env.step("```bash\nsubmit\n```")
        rewards.append(info["reward_detail"])
    env.close()
    assert len(graded) == 1 and "touched" in graded[0] and "touched" in diffs[1]
    assert rewards[0] == rewards[1]
