"""Judge-corrected collection: corrections land in the executed trajectory, filters, resume,
and the dataset export."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.reference import ReferenceAgent
from ac_env.policy import PolicyOutput
from ac_train.collect import CollectConfig, collect, filter_reasons
from ac_train.segments import TokenKind, read_segments

PREMATURE = """# Auto Context Summary
## Task
fix add
## Known
nothing yet
## Workspace
no changes yet
## Next
look around
"""


class CompactsFirst:
    """A policy with a timing mistake: it compacts at once, then works like the reference."""

    def __init__(self) -> None:
        self.agent = ReferenceAgent("never")

    def act(self, observation):
        if len(observation) == 2:
            return PolicyOutput(text=PREMATURE)
        return self.agent.act(observation)


def config(tiny_task_file, **overrides) -> CollectConfig:
    settings = {"worker": "reference", "rollouts_per_task": 1, "max_steps": 15, **overrides}
    return CollectConfig(task_source=str(tiny_task_file), split=None, **settings)


def test_collect_records_corrections_and_resumes(tiny_task_file, tmp_path):
    out = tmp_path / "run"
    summary = collect(config(tiny_task_file), out, policy=CompactsFirst(), progress=False)
    assert summary.episodes == 2 and summary.success_rate == 1.0
    assert summary.corrections["trigger"] == 2 and summary.correction_mix["trigger"] > 0
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    first = episodes[0]
    assert first["verdicts"][0]["correction"] == "trigger"
    assert "not located" in first["verdicts"][0]["reason"]
    trajectory = (out / first["trajectory"]).read_text()
    calls = [json.loads(line) for line in trajectory.splitlines() if '"model_call"' in line]
    assert calls[0]["produced_by"] == "judge" and calls[0]["rejected_output"] == PREMATURE
    assert calls[0]["action"]["kind"] == "bash"  # the executed step is the judge's

    before = (out / "episodes.jsonl").read_text()
    again = collect(config(tiny_task_file), out, policy=CompactsFirst(), progress=False)
    assert (out / "episodes.jsonl").read_text() == before
    assert again == summary
    with pytest.raises(ValueError, match="rollouts_per_task"):
        collect(config(tiny_task_file, rollouts_per_task=2), out, progress=False)


def test_collect_without_a_judge_executes_the_candidate(tiny_task_file, tmp_path):
    summary = collect(
        config(tiny_task_file, judge="none", task_ids=["tiny-calc-1"]),
        tmp_path / "run",
        policy=CompactsFirst(),
        progress=False,
    )
    assert summary.reviewed_calls == 0 and sum(summary.corrections.values()) == 0


@pytest.mark.slow
def test_collect_exports_segments_with_judge_tokens(tiny_task_file, tmp_path):
    from ac_train.models.checkpoints import tiny_model_and_tokenizer

    _, tokenizer = tiny_model_and_tokenizer()
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    out = tmp_path / "run"
    summary = collect(
        config(tiny_task_file, task_ids=["tiny-calc-1"], tokenizer=str(tmp_path / "tokenizer")),
        out,
        policy=CompactsFirst(),
        progress=False,
    )
    segments = read_segments(out / "dataset" / "segments.jsonl")
    assert summary.segments == len(segments) >= 1
    kinds = [kind for segment in segments for kind in segment.token_kinds]
    assert TokenKind.JUDGE_OUTPUT in kinds and TokenKind.POLICY_OUTPUT in kinds
    assert (out / "dataset" / "hf").is_dir()


def scripted_trajectory(tiny_task_file, *outputs: str):
    env = gym.make("AutoCompact-SWE-v0", task_source=str(tiny_task_file), split=None)
    try:
        env.reset(options={"task_id": "tiny-calc-1"})
        for output in outputs:
            *_, terminated, truncated, _ = env.step(output)
            if terminated or truncated:
                break
        else:
            env.unwrapped.abort("max_steps")
        return env.unwrapped.trajectory
    finally:
        env.close()


RUN = "```bash\npython3 -m pytest -q\n```"
SUMMARY = PREMATURE.replace("look around", "read calc/ops.py")


@pytest.mark.parametrize(
    ("outputs", "reasons"),
    [
        ((RUN, "```bash\ncat calc/ops.py\n```", "```bash\nsubmit\n```"), []),
        ((RUN, "oops", "no action", "bad", "```bash\nls\n```"), ["malformed"]),
        ((RUN, SUMMARY, SUMMARY, "```bash\ncat calc/ops.py\n```"), ["summary_loop"]),
        (
            (RUN, SUMMARY, "```bash\nls\n```", "```bash\nls -a\n```", "```bash\nls tests\n```"),
            ["off_task"],
        ),
        (
            (RUN, SUMMARY, "```bash\nls\n```", "```bash\ncat calc/ops.py\n```", "```bash\nls\n```"),
            [],
        ),
        (("```bash\nsubmit\n```",), ["no_command"]),
        (("oops", "```bash\nsubmit\n```"), ["no_command"]),
    ],
    ids=["clean", "malformed", "summary_loop", "off_task", "back_on_task", "submits", "no_run"],
)
def test_filters(tiny_task_file, outputs, reasons):
    trajectory = scripted_trajectory(tiny_task_file, *outputs)
    assert filter_reasons(trajectory, CollectConfig()) == reasons


def test_shadow_mode_measures_without_correcting(tiny_task_file, tmp_path):
    out = tmp_path / "run"
    summary = collect(
        config(tiny_task_file, judge_mode="shadow", task_ids=["tiny-calc-1"]),
        out,
        policy=CompactsFirst(),
        progress=False,
    )
    assert summary.corrections["trigger"] == 1  # what the judge would have corrected
    assert summary.proactive_compactions == 1 and summary.right_time_rate == 0.0
    assert summary.valid_action_rate == 1.0
    episode = json.loads((out / "episodes.jsonl").read_text().splitlines()[0])
    first = json.loads((out / episode["trajectory"]).read_text().splitlines()[1])
    assert first["produced_by"] == "policy" and first["action"]["kind"] == "compact"


def test_the_cli_names_a_bad_setting_and_exits_2(tmp_path, capsys):
    from ac_train.cli import main

    assert main(["collect", "--out", str(tmp_path / "a"), "--judge", "oracel"]) == 2
    assert "unknown judge 'oracel'" in capsys.readouterr().err
    assert main(["collect", "--out", str(tmp_path / "b"), "--ids", "no-such-task"]) == 2
    assert "no-such-task" in capsys.readouterr().err
