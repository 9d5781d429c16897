"""The compaction protocols (``inline``, ``tool_call``) and summary-ignored in both, on a tiny
real task in the real local sandbox."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import ac_env  # noqa: F401  (registers the ids)
from ac_env import PolicyOutput
from ac_env.actions import SUMMARY_HEADER
from ac_env.agents.reference import ReferenceAgent
from ac_env.agents.rollout import rollout
from ac_env.compaction.texts import COMPACTION_REQUEST, COMPACTION_SKIPPED, WORKING_STATE_REQUEST
from ac_env.prompts import SYSTEM_PROMPT, system_prompt
from ac_env.runs.workers import SkipAwareReference
from ac_env.strategies import get_strategy
from ac_env.tokens import ApproxTokenCounter

SUMMARY = (
    "# Auto Context Summary\n## Known\nadd() subtracts in calc/ops.py\n"
    "## Workspace\nno changes yet\n## Next\nfix add"
)
CALL = "THOUGHT: compact\n```bash\ncompact\n```"
COUNTER = ApproxTokenCounter()


def make(tiny_task_file, **kwargs):
    return gym.make("AutoCompact-SWE-v0", task_source=str(tiny_task_file), split=None, **kwargs)


def bash(command):
    return f"THOUGHT: x\n```bash\n{command}\n```"


def output_tokens(text):
    return COUNTER.count(text) + COUNTER.message_overhead("assistant")


def summary_anywhere(env) -> bool:
    """Whether any part of SUMMARY's body is in a prompt, an output or an event."""
    return "add() subtracts" in env.unwrapped.trajectory.to_jsonl()


def summary_kept(env) -> bool:
    """Whether any part of SUMMARY's body is in a prompt, the context or an event (what the
    run kept, as opposed to what the policy sampled)."""
    trajectory = env.unwrapped.trajectory
    prompts = [m["content"] for call in trajectory.model_calls() for m in call.messages]
    events = [event.model_dump_json() for event in trajectory.compactions()]
    context = [m["content"] for m in env.unwrapped.context.observation()]
    return any("add() subtracts" in text for text in [*prompts, *events, *context])


def test_tool_call_asks_for_the_summary_on_the_next_turn(tiny_task_file):
    env = make(tiny_task_file, compaction_protocol="tool_call")
    obs, _ = env.reset(seed=0)
    assert obs[0]["content"] == system_prompt(protocol="tool_call") != SYSTEM_PROMPT
    env.step(bash("echo one"))
    obs, _, _, _, info = env.step(CALL)
    assert not info["prefix_rewritten"] and info["compaction_requested"]
    assert obs[-1]["content"] == WORKING_STATE_REQUEST
    assert info["cost"]["step"]["output"] == output_tokens(CALL)  # the call only
    obs, _, _, _, info = env.step(SUMMARY)
    assert info["prefix_rewritten"] and not info["compaction_requested"]
    assert info["compaction"]["kind"] == "proactive"
    assert info["compaction"]["summarizer"] == "policy"
    assert info["cost"]["step"]["output"] == output_tokens(SUMMARY)  # billed on that turn
    assert [m["content"] for m in obs[2:]] == [SUMMARY]  # the request is not kept
    trajectory = env.unwrapped.trajectory
    call, answer = trajectory.model_calls()[1:]
    assert call.action == {"kind": "compact_call"}
    assert answer.message_kinds[-1] == "compaction_request"
    assert not answer.forced_compaction_request
    env.close()


def test_tool_call_with_json_actions(tiny_task_file):
    env = make(tiny_task_file, compaction_protocol="tool_call", action_parser="json")
    env.reset(seed=0)
    obs, _, _, _, info = env.step(json.dumps({"name": "compact"}))
    assert info["compaction_requested"] and obs[-1]["content"] == WORKING_STATE_REQUEST
    answer = {"name": "compact", "arguments": {"summary": SUMMARY}}
    obs, _, _, _, info = env.step(json.dumps(answer))
    assert info["prefix_rewritten"] and obs[2]["content"] == SUMMARY
    env.close()


def test_an_invalid_requested_summary_is_written_by_the_fallback(tiny_task_file):
    env = make(tiny_task_file, compaction_protocol="tool_call")
    env.reset(seed=0)
    env.step(CALL)
    _, _, _, _, info = env.step(bash("ls"))
    assert info["compaction"]["kind"] == "proactive"
    assert info["compaction"]["summarizer"] == "fallback"
    env.close()


@pytest.mark.parametrize(
    ("protocol", "action", "hint"),
    [("tool_call", SUMMARY, "first call compact"), ("inline", CALL, "no compact command")],
)
def test_the_other_protocols_action_is_a_format_error(tiny_task_file, protocol, action, hint):
    env = make(tiny_task_file, compaction_protocol=protocol)
    env.reset(seed=0)
    obs, _, _, _, info = env.step(action)
    assert not info["prefix_rewritten"] and not info["compaction_requested"]
    assert obs[-1]["content"].startswith("[format error]") and hint in obs[-1]["content"]
    env.close()


def test_forced_compaction_under_tool_call(tiny_task_file):
    env = make(tiny_task_file, compaction_protocol="tool_call", forced_compaction_threshold=1500)
    env.reset(seed=0)
    obs, *_, info = env.step(bash("cat calc/ops.py tests/test_ops.py; seq 1 400"))
    assert info["compaction_requested"] and obs[-1]["content"] == COMPACTION_REQUEST
    obs, _, _, _, info = env.step(SUMMARY)
    assert info["prefix_rewritten"] and info["compaction"]["kind"] == "forced"
    assert env.unwrapped.trajectory.model_calls()[-1].forced_compaction_request
    env.close()


def test_summary_ignored_under_tool_call_skips_the_call(tiny_task_file):
    env = make(tiny_task_file, compaction_protocol="tool_call", skip_compaction=True)
    env.reset(seed=0)
    env.step(bash("echo one"))
    obs, _, _, _, info = env.step(CALL)
    assert not info["prefix_rewritten"] and not info["compaction_requested"]
    assert [m["content"] for m in obs[-2:]] == [CALL, COMPACTION_SKIPPED]
    assert info["cost"]["step"]["output"] == output_tokens(CALL)
    env.step(bash("echo two"))
    assert env.unwrapped.trajectory.compactions() == []
    assert not summary_anywhere(env)
    env.close()


def test_summary_ignored_inline_bills_and_keeps_only_the_heading(tiny_task_file):
    """A policy that writes on past the heading (no stop sequence): the env cuts its reply and
    bills and keeps the heading only; the trajectory records the whole reply with its own
    token ids and log-probs (what was sampled), and the next prompt holds the cut."""
    env = make(tiny_task_file, skip_compaction=True)
    env.reset(seed=0)
    written = PolicyOutput(text=SUMMARY, output_token_ids=[1, 2, 3], output_logprobs=[-1.0] * 3)
    assert env.unwrapped.quote(written).output == output_tokens(SUMMARY_HEADER)
    obs, _, _, _, info = env.step(written)
    assert [m["content"] for m in obs[-2:]] == [SUMMARY_HEADER, COMPACTION_SKIPPED]
    assert info["cost"]["step"]["output"] == output_tokens(SUMMARY_HEADER)
    (call,) = env.unwrapped.trajectory.model_calls()
    assert call.output == SUMMARY and call.output_token_ids == [1, 2, 3]
    assert call.output_logprobs == [-1.0] * 3
    assert call.action == {"kind": "compact", "summary": SUMMARY_HEADER}
    assert not summary_kept(env)
    env.step(bash("echo next"))
    prompt = env.unwrapped.trajectory.model_calls()[-1].messages
    assert [m["content"] for m in prompt[-2:]] == [SUMMARY_HEADER, COMPACTION_SKIPPED]
    # a backend that stopped at the heading: the reply is the heading
    stopped = PolicyOutput(text=SUMMARY_HEADER + "\n", output_token_ids=[7], output_logprobs=[-1.0])
    env.step(stopped)
    assert env.unwrapped.trajectory.model_calls()[-1].output_token_ids == [7]
    env.close()


@pytest.mark.slow
@pytest.mark.parametrize("skip", [False, True])
def test_the_reference_agent_under_tool_call(tiny_task_file, skip):
    kwargs = get_strategy("summary_ignored" if skip else "learned").env_kwargs(protocol="tool_call")
    env = make(tiny_task_file, **kwargs)
    policy = (
        SkipAwareReference("after_locate", "tool_call")
        if skip
        else ReferenceAgent("after_locate", "tool_call")
    )
    trajectory = rollout(env, policy, seed=0, options={"task_id": "tiny-calc-1"})
    env.close()
    kinds = [c.action["kind"] for c in trajectory.model_calls()]
    assert kinds.count("compact_call") == 1 and kinds[-1] == "submit"
    if skip:
        assert "compact" not in kinds and trajectory.compactions() == []
        calls = trajectory.model_calls()
        assert not any(SUMMARY_HEADER in c.output for c in calls)  # none written, none billed
        assert not any("summary" in c.message_kinds for c in calls)  # none kept
    else:
        assert kinds[kinds.index("compact_call") + 1] == "compact"
        assert [(e.trigger, e.summarizer) for e in trajectory.compactions()] == [
            ("proactive", "policy")
        ]
    assert trajectory.reward == 1.0


def test_summary_ignored_inline_with_json_actions(tiny_task_file):
    env = make(tiny_task_file, skip_compaction=True, action_parser="json")
    env.reset(seed=0)
    reply = json.dumps({"name": "compact", "arguments": {"summary": SUMMARY}})
    _, _, _, _, info = env.step(reply)
    cut = reply[: reply.index(SUMMARY_HEADER) + len(SUMMARY_HEADER)]
    assert info["cost"]["step"]["output"] == output_tokens(cut)
    call = env.unwrapped.trajectory.model_calls()[-1]
    assert call.output == reply and call.action == {"kind": "compact", "summary": SUMMARY_HEADER}
    assert not summary_kept(env)
    # a "summary" without the heading is none: a format error, as without summary-ignored
    obs, *_ = env.step(json.dumps({"name": "compact", "arguments": {"summary": "notes"}}))
    assert obs[-1]["content"].startswith("[format error] Summary not applied")
    env.close()
