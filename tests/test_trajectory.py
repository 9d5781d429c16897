import pytest

from ac_env.cost import CallCost
from ac_env.trajectory import (
    CompactionEvent,
    EpisodeEnd,
    ModelCall,
    ToolResult,
    Trajectory,
    TrajectoryFormatError,
    TrajectoryHeader,
)


def build():
    t = Trajectory(TrajectoryHeader(instance_id="t-1", split="easy", seed=3))
    sys_msg = {"role": "system", "content": "sys"}
    task = {"role": "user", "content": "task ünïcode"}
    act = {"role": "assistant", "content": "```bash\nls\n```"}
    obs = {"role": "user", "content": "[exit code 0]\na.py"}
    cost = CallCost(input_uncached=10, output=3, usd=0.001)
    t.append(
        ModelCall(
            step=0,
            segment=0,
            messages=[sys_msg, task],
            output=act["content"],
            action={"kind": "bash", "command": "ls"},
            context_tokens=10,
            cost=cost,
            output_token_ids=[1, 2],
            output_logprobs=[-0.1, -0.2],
        )
    )
    t.append(
        ToolResult(
            step=0,
            command="ls",
            output="a.py",
            exit_code=0,
            timed_out=False,
            truncated=False,
            duration_s=0.01,
        )
    )
    t.append(
        ModelCall(
            step=1,
            segment=0,
            messages=[sys_msg, task, act, obs],
            output="# Auto Context Summary",
            action={"kind": "compact"},
            context_tokens=20,
            cost=cost,
            produced_by="judge",
            rejected_output="```bash\nls\n```",
            correction="trigger",
        )
    )
    t.append(
        CompactionEvent(
            step=1,
            trigger="proactive",
            summarizer="policy",
            summary="# Auto Context Summary",
            rewrite_from=2,
            segment_before=0,
            segment_after=1,
            tokens_before=20,
            tokens_after=12,
            kept_messages=0,
        )
    )
    t.append(
        ModelCall(
            step=2,
            segment=1,
            messages=[sys_msg, task, {"role": "user", "content": "# Auto"}],
            output="```bash\nsubmit\n```",
            action={"kind": "submit"},
            context_tokens=12,
            cost=cost,
        )
    )
    t.append(
        EpisodeEnd(
            step=3,
            exit_reason="submitted",
            submitted=True,
            reward=1.0,
            resolved=True,
            infra_error=None,
            patch="diff",
            tests={"a": "PASSED"},
            cost=cost,
        )
    )
    return t


def test_jsonl_round_trip_is_exact(tmp_path):
    t = build()
    path = tmp_path / "t.jsonl"
    t.write(path)
    back = Trajectory.read(path)
    assert back.header == t.header
    assert back.events == t.events
    assert [c.segment for c in back.model_calls()] == [0, 0, 1]
    assert back.end is not None and back.end.reward == 1.0


def test_prompts_are_stored_as_deltas():
    text = build().to_jsonl()
    # the system prompt is written once, not once per call
    assert text.count('"content":"sys"') + text.count('"content": "sys"') == 1


def test_bad_lines_name_file_and_line(tmp_path):
    lines = build().to_jsonl().splitlines()
    lines[2] = lines[2].replace('"exit_code": 0', '"exit_code": "zero"')
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines))
    with pytest.raises(TrajectoryFormatError, match=r"bad.jsonl:3: .*exit_code"):
        Trajectory.read(path)
    path.write_text(lines[0] + "\n{not json\n")
    with pytest.raises(TrajectoryFormatError, match="bad.jsonl:2:"):
        Trajectory.read(path)
    path.write_text("")
    with pytest.raises(TrajectoryFormatError, match="empty"):
        Trajectory.read(path)
