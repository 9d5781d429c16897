import json

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
            message_kinds=["system", "task"],
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
            message_kinds=["system", "task", "action", "observation"],
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
            message_kinds=["system", "task", "summary"],
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


def test_message_kinds_travel_through_the_file(tmp_path):
    t = build()
    lines = [json.loads(line) for line in t.to_jsonl().splitlines()]
    stored = [m["kind"] for m in lines[3]["messages"]["new"]]
    assert stored == ["action", "observation"]  # each stored message carries its kind
    path = tmp_path / "t.jsonl"
    t.write(path)
    back = Trajectory.read(path)
    assert [c.message_kinds for c in back.model_calls()] == [
        ["system", "task"],
        ["system", "task", "action", "observation"],
        ["system", "task", "summary"],
    ]
    assert all("kind" not in m for c in back.model_calls() for m in c.messages)


def test_a_call_needs_one_kind_per_message():
    with pytest.raises(ValueError, match="1 message_kinds for 2 messages"):
        ModelCall(
            step=0,
            segment=0,
            messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "t"}],
            message_kinds=["system"],
            output="x",
            action={"kind": "format_error", "message": "m"},
            context_tokens=1,
            cost=CallCost(),
        )


def _old_call(step, segment, shared, new, **extra):
    return {
        "kind": "model_call",
        "step": step,
        "segment": segment,
        "messages": {"shared": shared, "new": new},
        "output": "x",
        "action": {"kind": "bash", "command": "ls"},
        "context_tokens": 5,
        "cost": {},
        **extra,
    }


def test_files_written_before_kinds_were_recorded_still_load(tmp_path):
    """An old-format file (no kinds): they are inferred once, at load time."""
    user = lambda text: {"role": "user", "content": text}  # noqa: E731
    act = {"role": "assistant", "content": "```bash\nls\n```"}
    summary = "# Auto Context Summary\n## Known\nk\n## Workspace\nw\n## Next\nn"
    old = [
        {"kind": "header", "instance_id": "t-1", "split": "easy"},
        _old_call(0, 0, 0, [{"role": "system", "content": "sys"}, user("task")]),
        _old_call(1, 0, 2, [act, user("[exit code 0]\na.py")]),
        _old_call(2, 0, 4, [act, user("[format error] No action found"), act, user("please")],
                  forced_compaction_request=True),
        {"kind": "compaction", "step": 2, "trigger": "forced", "summarizer": "policy",
         "summary": summary, "rewrite_from": 2, "segment_before": 0, "segment_after": 1,
         "tokens_before": 9, "tokens_after": 4, "kept_messages": 0},
        _old_call(3, 1, 2, [user(summary), act, user("[compaction skipped: this run ...]")]),
    ]  # fmt: skip
    path = tmp_path / "old.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in old) + "\n")
    calls = Trajectory.read(path).model_calls()
    assert calls[2].message_kinds == [
        "system", "task", "action", "observation", "action", "format_error", "action",
        "compaction_request",
    ]  # fmt: skip
    assert calls[3].message_kinds == [
        "system", "task", "summary", "action", "compaction_skipped"
    ]  # fmt: skip


def test_the_reward_has_one_source():
    t = build()
    assert t.reward == 1.0
    t.events[-1] = t.events[-1].model_copy(update={"reward": None, "infra_error": "gone"})
    assert t.reward is None  # an infrastructure failure is no reward, never a silent 0
    assert Trajectory(t.header).reward is None  # no end yet
