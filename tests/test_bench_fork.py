"""The counterfactual fork: branches with and without a compaction, regret, resume, the CLI."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from ac_env.actions import SUMMARY_HEADER
from ac_env.bench import BenchConfig
from ac_env.bench import fork as fork_module
from ac_env.bench.cli import main
from ac_env.bench.fork import (
    EPISODES_FILE,
    FORK_DIR,
    FORKS_FILE,
    BranchOutcome,
    ForkRecord,
    regret,
    run_fork,
)
from ac_env.bench.fork_report import strategy_regret
from ac_env.compaction.texts import COMPACTION_SKIPPED
from ac_env.cost import CallCost
from ac_env.policy import PolicyOutput
from ac_env.trajectory import CompactionEvent, ModelCall, ToolResult, Trajectory

SUMMARY = (
    "# Auto Context Summary\n## Known\nthe bug is somewhere in calc\n"
    "## Workspace\nno changes yet\n## Next\nsubmit"
)
FOUND = "6:    return a - b"  # what the locating command prints


class ForgetfulFixer:
    """Locates the bug, then compacts with a summary that leaves the finding out; afterwards
    it fixes the bug only if the finding is still in its history, so the compaction loses
    the episode and skipping it wins it (regret -1)."""

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        history = "\n".join(m["content"] for m in observation[2:])
        if "Auto Context Summary" not in history:
            if FOUND not in history:
                return _bash("grep -n 'a - b' calc/ops.py")
            return PolicyOutput(text=SUMMARY)
        if FOUND in history and "sed -i" not in history:
            return _bash("sed -i 's/a - b/a + b/' calc/ops.py")
        return _bash("submit")


def _bash(command: str) -> PolicyOutput:
    return PolicyOutput(text=f"THOUGHT: x\n```bash\n{command}\n```")


@pytest.fixture
def forgetful(monkeypatch):
    monkeypatch.setattr(
        fork_module,
        "episode_policies",
        lambda *args: lambda seed: lambda env: ForgetfulFixer(),
    )


def config_for(task_file: Path, task_ids: list[str] | None = None) -> BenchConfig:
    return BenchConfig(
        task_source=str(task_file),
        split=None,
        task_ids=task_ids,
        strategies=["self"],
        budgets=[1.0],
        workers=1,
    )


def outcome(reward: float | None, usd: float, infra_error: str | None = None) -> BranchOutcome:
    return BranchOutcome(
        reward=reward,
        exit_reason="submitted",
        steps=3,
        cost=CallCost(usd=usd),
        compactions=0,
        infra_error=infra_error,
        trajectory="t.jsonl",
    )


def after_call(trajectory: Trajectory, step: int) -> object:
    """The event that follows model call ``step``."""
    events = trajectory.events
    index = next(i for i, e in enumerate(events) if isinstance(e, ModelCall) and e.step == step)
    return events[index + 1]


def timeless(trajectory: Trajectory) -> list[dict]:
    return [
        e.model_dump(exclude={"duration_s"} if isinstance(e, ToolResult) else None)
        for e in trajectory.events
    ]


@pytest.mark.slow
def test_branches_differ_exactly_at_the_compaction(tiny_task_file, tmp_path, forgetful):
    config = config_for(tiny_task_file, ["tiny-calc-1"])
    (fork,) = run_fork(config, tmp_path, progress=False)
    root = tmp_path / FORK_DIR
    original = Trajectory.read(root / f"trajectories/self/{fork.instance_id}__seed0.jsonl")
    with_ = Trajectory.read(root / fork.with_compaction.trajectory)
    without = Trajectory.read(root / fork.without_compaction.trajectory)
    assert (fork.step, fork.kind) == (1, "proactive")

    assert timeless(with_) == timeless(original)  # the 'with' branch is the original's run
    calls = [t.model_calls() for t in (with_, without)]
    assert calls[0][: fork.step] == calls[1][: fork.step]  # same prompts, same outputs
    assert calls[0][fork.step].messages == calls[1][fork.step].messages
    assert calls[0][fork.step].output == SUMMARY
    assert calls[1][fork.step].output == SUMMARY  # recorded as sampled; kept and billed: the cut
    compaction = after_call(with_, fork.step)
    assert isinstance(compaction, CompactionEvent) and compaction.summary == SUMMARY
    assert isinstance(after_call(without, fork.step), ModelCall)  # nothing compacted
    assert calls[0][fork.step + 1].messages[2:] == [{"role": "user", "content": SUMMARY}]
    assert calls[1][fork.step + 1].messages[-2:] == [
        {"role": "assistant", "content": SUMMARY_HEADER},
        {"role": "user", "content": COMPACTION_SKIPPED},
    ]

    with_outcome, without_outcome = fork.with_compaction, fork.without_compaction
    assert (with_outcome.reward, without_outcome.reward) == (0.0, 1.0)
    assert (with_outcome.compactions, without_outcome.compactions) == (1, 0)
    assert fork.regret == -1.0
    assert fork.cost_difference_usd == pytest.approx(
        with_outcome.cost.usd - without_outcome.cost.usd
    )
    assert fork.spent_usd == pytest.approx(sum(c.cost.usd for c in calls[0][: fork.step]))


def test_regret_arithmetic_and_aggregate():
    assert regret(outcome(1.0, 0.02), outcome(0.0, 0.01)) == 1.0
    assert regret(outcome(0.0, 0.02), outcome(1.0, 0.01)) == -1.0
    assert regret(outcome(1.0, 0.02), outcome(1.0, 0.01)) == 0.0
    assert regret(outcome(float("nan"), 0.02), outcome(1.0, 0.01)) is None
    assert regret(outcome(1.0, 0.02), outcome(0.0, 0.01, infra_error="grading crashed")) is None

    def record(task: str, step: int, gained: float, kept: float, usd: tuple[float, float]):
        branches = outcome(gained, usd[0]), outcome(kept, usd[1])
        return ForkRecord(
            strategy="self",
            instance_id=task,
            split="easy",
            seed=0,
            step=step,
            kind="proactive",
            tokens_before=900,
            tokens_after=300,
            spent_usd=0.001,
            with_compaction=branches[0],
            without_compaction=branches[1],
            regret=regret(*branches),
            cost_difference_usd=usd[0] - usd[1],
        )

    forks = [
        record("a", 3, 1.0, 0.0, (0.004, 0.005)),
        record("a", 7, 1.0, 1.0, (0.004, 0.006)),
        record("b", 2, 0.0, 1.0, (0.003, 0.003)),
        record("c", 2, 1.0, float("nan"), (0.003, 0.001)),
    ]
    row = strategy_regret("self", forks)
    assert (row.forks, row.helped, row.same, row.hurt, row.ungraded) == (4, 1, 1, 1, 1)
    assert row.regret.mean == pytest.approx((0.5 - 1.0) / 2)  # task a: (1 + 0) / 2; b: -1
    assert row.cost_difference_usd.mean == pytest.approx((-0.0015 + 0.0) / 2)
    assert (row.success_with, row.success_without) == (pytest.approx(2 / 3), pytest.approx(2 / 3))


@pytest.mark.slow
def test_resume_skips_written_forks_and_the_cli_writes_the_report(
    tiny_task_file, tmp_path, forgetful, monkeypatch, capsys
):
    args = ["--fork", "--out", str(tmp_path), "--source", str(tiny_task_file), "--split", "all"]
    args += ["--strategies", "self", "--budgets", "1", "--workers", "1", "--no-progress"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "| self | 2 (2/0) | 0 | 0 | 2 |" in printed  # both tasks: hurt by compacting
    root = tmp_path / FORK_DIR
    summary = json.loads((root / "summary.json").read_text())
    assert summary["strategies"][0]["hurt"] == 2 and len(summary["forks"]) == 2
    assert (root / "report.md").exists() and (root / "regret.png").stat().st_size > 10_000
    forks_before = (root / FORKS_FILE).read_text()

    branches: list[str] = []
    real_branch = fork_module._branch

    def counting(env_kwargs, snapshot, point, policy, fork_dir, name, label):
        branches.append(f"{name} {label}")
        return real_branch(env_kwargs, snapshot, point, policy, fork_dir, name, label)

    monkeypatch.setattr(fork_module, "_branch", counting)
    episodes = (root / EPISODES_FILE).read_text().splitlines()
    (root / EPISODES_FILE).write_text(episodes[0] + "\n")  # interrupted before the 2nd episode
    resumed = run_fork(config_for(tiny_task_file), tmp_path, progress=False)
    assert branches == []  # its original ran again; its fork was already written
    assert len((root / EPISODES_FILE).read_text().splitlines()) == 2
    assert (root / FORKS_FILE).read_text() == forks_before and len(resumed) == 2

    lines = forks_before.splitlines()
    (root / FORKS_FILE).write_text(lines[0] + "\n")
    (root / EPISODES_FILE).write_text(episodes[0] + "\n")
    run_fork(config_for(tiny_task_file), tmp_path, progress=False)
    missing = ForkRecord.model_validate_json(lines[1])
    assert branches == [
        f"self/{missing.instance_id}__seed0 with",
        f"self/{missing.instance_id}__seed0 without",
    ]
