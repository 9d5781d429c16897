"""Segments cut from real env trajectories (scripted text, and the tiny model with recorded ids):
the invariants of the Segments contract (docs/architecture.md), checked token by token."""

from __future__ import annotations

import copy
import itertools

import gymnasium as gym
import pytest
import torch

import ac_env  # noqa: F401  (registers the env id)
from ac_env import PolicyOutput
from ac_env.agents.rollout import rollout
from ac_env.compaction.texts import COMPACTION_REQUEST, WORKING_STATE_REQUEST
from ac_env.trajectory import CompactionEvent, ModelCall, Trajectory
from ac_train.models.checkpoints import tiny_model_and_tokenizer
from ac_train.models.policy import TransformersPolicy
from ac_train.segments import (
    ChatRenderer,
    PrefixMismatchError,
    Segment,
    SegmentationError,
    TokenKind,
    read_segments,
    segment_files,
    segment_trajectory,
    write_segments,
)

SUMMARY = (
    "# Auto Context Summary\n## Known\nadd() subtracts in calc/ops.py\n"
    "## Workspace\nno changes yet\n## Next\nfix add"
)


def bash(command: str) -> str:
    return f"THOUGHT: look\n```bash\n{command}\n```"


class ScriptedPolicy:
    """Plays ``turns`` in order; answers each forced-compaction request with ``forced``."""

    def __init__(self, turns: list[str], forced: list[str]) -> None:
        self.turns = iter(turns)
        self.forced = iter(forced)

    def act(self, observation):
        if observation[-1]["content"] == COMPACTION_REQUEST:
            return next(self.forced)
        return next(self.turns)


class TinyModelWithJudge:
    """The tiny model's TransformersPolicy; at the ``judge_calls``-th calls a judge replaces
    its output by a summary (a text-only output on the policy's recorded prompt ids)."""

    def __init__(self, policy: TransformersPolicy, judge_calls: set[int]) -> None:
        self.policy = policy
        self.judge_calls = judge_calls
        self.calls = 0

    def act(self, observation):
        out = self.policy.act(observation)
        if self.calls in self.judge_calls:
            out = PolicyOutput(
                text=SUMMARY,
                prompt_token_ids=out.prompt_token_ids,
                produced_by="judge",
                rejected_output=out.text,
                correction="compact",
            )
        self.calls += 1
        return out


def make_env(task_file, **kwargs):
    return gym.make("AutoCompact-SWE-v0", task_source=str(task_file), split=None, **kwargs)


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    return tiny_model_and_tokenizer()


@pytest.fixture(scope="module")
def scripted_trajectory(tiny_task_file) -> Trajectory:
    """Format error, proactive summary, keep_recent=1, a forced compaction answered by a command
    (fallback summary), one answered by a summary, then submit."""
    policy = ScriptedPolicy(
        turns=[
            bash("cat calc/ops.py"),
            "I am not sure what to do.",
            SUMMARY,
            bash("seq 1 200"),
            bash("seq 1 200"),
            bash("ls calc"),
            bash("seq 1 200"),
            bash("submit"),
        ],
        forced=[bash("ls"), SUMMARY],
    )
    env = make_env(tiny_task_file, forced_compaction_threshold=1500, keep_recent=1)
    trajectory = rollout(env, policy, options={"task_id": "tiny-calc-1"})
    env.close()
    return trajectory


@pytest.fixture(scope="module")
def model_trajectory(tiny_task_file, tiny) -> Trajectory:
    """The tiny model with recorded ids: a judge's proactive summary at call 2, then forced
    compactions the model cannot answer (fallback summaries)."""
    model, tokenizer = tiny
    policy = TransformersPolicy(
        model, tokenizer, max_new_tokens=24, temperature=1.0, seed=0, policy_version=3
    )
    env = make_env(tiny_task_file, forced_compaction_threshold=800, max_steps=9)
    trajectory = rollout(env, TinyModelWithJudge(policy, {2}), options={"task_id": "tiny-calc-1"})
    env.close()
    return trajectory


def call_ids(call: ModelCall, renderer: ChatRenderer) -> tuple[list[int], list[int]]:
    """The call's prompt and output ids: recorded, or rendered like the segmenter documents."""
    prompt = call.prompt_token_ids or renderer.prompt_ids(call.messages)
    output = call.output_token_ids or renderer.output_ids(call.messages, prompt, call.output)
    return prompt, output


def runs(segment: Segment, kind: TokenKind) -> list[list[int]]:
    pairs = zip(segment.input_ids, segment.token_kinds, strict=True)
    return [[t for t, _ in g] for k, g in itertools.groupby(pairs, key=lambda p: p[1]) if k == kind]


def assert_segment_invariants(trajectory: Trajectory, segments: list[Segment], tokenizer) -> None:
    renderer = ChatRenderer(tokenizer)
    calls = {call.step: call for call in trajectory.model_calls()}
    instance = trajectory.header.instance_id
    assert len({s.id for s in segments}) == len(segments)
    spans = [(segment, span) for segment in segments for span in segment.outputs]

    # every executed output is in exactly one segment: each summary is trained once
    assert sorted(span.step for _, span in spans) == sorted(calls)
    for segment in segments:
        assert segment.trajectory_id.startswith(instance + ":")
        assert segment.instance_id == instance
        trained = segment.sft_mask()
        inside_outputs = [False] * len(segment.input_ids)
        for span in segment.outputs:
            call = calls[span.step]
            assert call.segment == segment.segment_index  # ids map back to the trajectory
            prompt, output = call_ids(call, renderer)
            # the call's exact context, then its exact output, token for token
            assert segment.input_ids[: span.start] == prompt
            assert segment.input_ids[span.start : span.end] == output
            assert tokenizer.decode(output, skip_special_tokens=True) == call.output
            if call.output_logprobs is not None and call.produced_by == "policy":
                assert segment.behaviour_logprobs[span.start : span.end] == call.output_logprobs
            inside_outputs[span.start : span.end] = [True] * (span.end - span.start)
        # every trained token is an executed model output of this segment
        assert all(inside for inside, t in zip(inside_outputs, trained, strict=True) if t)
        for kind, logprob in zip(segment.token_kinds, segment.behaviour_logprobs, strict=True):
            assert logprob is None or kind == TokenKind.POLICY_OUTPUT
        grpo = segment.grpo_mask()
        assert all(t for t, g in zip(trained, grpo, strict=True) if g)
        assert not any(
            g for g, k in zip(grpo, segment.token_kinds, strict=True) if k == TokenKind.JUDGE_OUTPUT
        )

    # concatenating outputs by kind reproduces the recorded outputs (token level)
    ordered = sorted(segments, key=lambda s: (s.segment_index, s.part))
    assert ordered == segments
    for produced_by, kind in (
        ("policy", TokenKind.POLICY_OUTPUT),
        ("judge", TokenKind.JUDGE_OUTPUT),
    ):
        from_segments = [t for s in ordered for run in runs(s, kind) for t in run]
        recorded = [
            t
            for call in trajectory.model_calls()
            if call.produced_by == produced_by
            for t in call_ids(call, renderer)[1]
        ]
        assert from_segments == recorded

    # tool output is context, never trained; each result shows up as TOOL_OUTPUT (in its call's
    # segment, or the next one when a rewrite came right after it)
    last_step = max(calls)
    for event in trajectory.tool_results():
        index = calls[event.step].segment
        tool_text = "".join(
            tokenizer.decode(run)
            for s in segments
            if s.segment_index in (index, index + 1)
            for run in runs(s, TokenKind.TOOL_OUTPUT)
        )
        if event.step != last_step:
            assert event.output.strip()[:200] in tool_text
        assert all(
            not trained
            for s in segments
            for trained, kind in zip(s.sft_mask(), s.token_kinds, strict=True)
            if kind == TokenKind.TOOL_OUTPUT
        )

    # after each summary rewrite the summary is SUMMARY_COPY (context), never trained there
    for event in trajectory.compactions():
        if event.trigger == "masking":
            continue
        following = [s for s in segments if s.segment_index == event.segment_after]
        for segment in following:
            (copy,) = runs(segment, TokenKind.SUMMARY_COPY)
            assert tokenizer.decode(copy) == event.summary
        if event.summarizer == "fallback":  # no model wrote it: trained nowhere
            for segment in segments:
                trained_text = tokenizer.decode(
                    [t for t, m in zip(segment.input_ids, segment.sft_mask(), strict=True) if m]
                )
                assert event.summary not in trained_text


def test_scripted_trajectory_has_the_cases_under_test(scripted_trajectory):
    kinds = [(e.trigger, e.summarizer) for e in scripted_trajectory.compactions()]
    assert kinds == [("proactive", "policy"), ("forced", "fallback"), ("forced", "policy")]
    assert scripted_trajectory.end.exit_reason == "submitted"


def test_scripted_trajectory_segment_invariants(scripted_trajectory, tiny):
    _, tokenizer = tiny
    segments = segment_trajectory(scripted_trajectory, tokenizer)
    assert [s.segment_index for s in segments] == [0, 1, 2, 3]
    assert all(s.part == 0 for s in segments)
    assert_segment_invariants(scripted_trajectory, segments, tokenizer)


def test_summary_is_the_last_trained_output_of_its_segment(scripted_trajectory, tiny):
    _, tokenizer = tiny
    segments = segment_trajectory(scripted_trajectory, tokenizer)
    compact_steps = {e.step for e in scripted_trajectory.compactions() if e.summarizer == "policy"}
    for segment in segments:
        last = segment.outputs[-1]
        assert last.end == len(segment.input_ids)
        if last.step in compact_steps:
            text = tokenizer.decode(
                segment.input_ids[last.start : last.end], skip_special_tokens=True
            )
            assert text.startswith("# Auto Context Summary")


def test_kept_interaction_is_history_copy_not_trained(scripted_trajectory, tiny):
    _, tokenizer = tiny
    segment = segment_trajectory(scripted_trajectory, tokenizer)[1]  # opened with keep_recent=1
    (kept,) = runs(segment, TokenKind.HISTORY_COPY)
    assert tokenizer.decode(kept) == "I am not sure what to do."
    assert segment.token_kinds.index(TokenKind.HISTORY_COPY) > segment.token_kinds.index(
        TokenKind.SUMMARY_COPY
    )


def test_format_errors_are_trained_unless_the_flag_says_no(scripted_trajectory, tiny):
    _, tokenizer = tiny
    segments = segment_trajectory(scripted_trajectory, tokenizer)
    flagged = [(s, span) for s in segments for span in s.outputs if span.format_error]
    # the reply without an action, and the command sent in answer to a forced request
    assert {scripted_trajectory.model_calls()[span.step].output for _, span in flagged} == {
        "I am not sure what to do.",
        bash("ls"),
    }
    for segment, span in flagged:
        assert all(segment.sft_mask()[span.start : span.end])
        assert not any(segment.sft_mask(train_format_errors=False)[span.start : span.end])
        labels = segment.sft_labels(train_format_errors=False)
        assert set(labels[span.start : span.end]) == {-100}
    total = sum(sum(s.sft_mask()) for s in segments)
    without = sum(sum(s.sft_mask(train_format_errors=False)) for s in segments)
    assert without == total - sum(span.end - span.start for _, span in flagged)


def test_tiny_model_trajectory_has_the_cases_under_test(model_trajectory):
    calls = model_trajectory.model_calls()
    assert calls[0].output_token_ids is not None and calls[0].policy_version == 3
    kinds = [(e.trigger, e.summarizer) for e in model_trajectory.compactions()]
    assert kinds[0] == ("proactive", "judge") and ("forced", "fallback") in kinds
    assert calls[2].produced_by == "judge"


def first_drift(trajectory: Trajectory) -> tuple[int, int]:
    """The first step whose recorded prompt does not extend the previous call's prompt + output
    in the same segment, and the first differing token."""
    for a, b in itertools.pairwise(trajectory.model_calls()):
        expected = a.prompt_token_ids + a.output_token_ids
        if a.segment == b.segment and b.prompt_token_ids[: len(expected)] != expected:
            pairs = zip(expected, b.prompt_token_ids, strict=False)
            return b.step, next(i for i, (x, y) in enumerate(pairs) if x != y)
    raise AssertionError("no drift in this trajectory")


def test_tiny_model_drift_is_reported_with_trajectory_step_and_position(model_trajectory, tiny):
    """The tiny model's sampled tokens re-tokenize differently once decoded, so the next prompt
    does not extend the recorded output: the strict mode says exactly where."""
    _, tokenizer = tiny
    step, position = first_drift(model_trajectory)
    with pytest.raises(PrefixMismatchError) as raised:
        segment_trajectory(model_trajectory, tokenizer, run_id="run7")
    message = str(raised.value)
    assert message.startswith("trajectory tiny-calc-1:run7: the prompt of step ")
    assert f"step {step} is not a token prefix" in message
    assert f"first difference at token {position} " in message


def test_tiny_model_trajectory_split_keeps_every_invariant(model_trajectory, tiny):
    _, tokenizer = tiny
    segments = segment_trajectory(model_trajectory, tokenizer, prefix_mismatch="split")
    assert_segment_invariants(model_trajectory, segments, tokenizer)
    assert max(s.part for s in segments) >= 1  # drift forced at least one split
    first = segments[0]
    assert first.policy_version == 3
    spans = [span for s in segments for span in s.outputs]
    judge = [span for span in spans if span.produced_by == "judge"]
    assert len(judge) == 1 and judge[0].step == 2
    judge_segment = next(s for s in segments if judge[0] in s.outputs)
    assert judge_segment.outputs[-1] == judge[0]  # the judge's summary ends its segment
    assert not any(judge_segment.grpo_mask()[judge[0].start : judge[0].end])
    # an output trained in an earlier part is context (HISTORY_COPY) in the later part
    later_parts = [s for s in segments if s.part > 0]
    assert any(TokenKind.HISTORY_COPY in s.token_kinds for s in later_parts)


def test_observation_masking_segments_keep_the_summary_as_context(tiny_task_file, tiny):
    """Masking rewrites old command outputs (a new segment each time) and writes no summary:
    an earlier summary stays message 2 and stays context."""
    _, tokenizer = tiny
    turns = [SUMMARY, bash("ls"), bash("ls calc"), bash("cat calc/ops.py"), bash("submit")]
    env = make_env(tiny_task_file, forced_compaction_threshold=None, mask_observations_keep=1)
    trajectory = rollout(env, ScriptedPolicy(turns, []), options={"task_id": "tiny-calc-1"})
    env.close()
    triggers = [e.trigger for e in trajectory.compactions()]
    assert triggers[0] == "proactive" and triggers.count("masking") >= 2
    segments = segment_trajectory(trajectory, tokenizer)
    assert_segment_invariants(trajectory, segments, tokenizer)
    for segment in segments[1:]:
        (copy,) = runs(segment, TokenKind.SUMMARY_COPY)
        assert tokenizer.decode(copy) == SUMMARY
    last = tokenizer.decode([t for run in runs(segments[-1], TokenKind.TOOL_OUTPUT) for t in run])
    assert "[output of an earlier command omitted" in last
    assert TokenKind.HISTORY_COPY in segments[-1].token_kinds


def test_segments_read_the_recorded_kinds_of_a_tool_call_compaction(tiny_task_file, tiny):
    """Protocol ``tool_call``: the env's request after a ``compact`` call is scaffolding, not
    tool output, and an answer to it that is no summary is a format error (the fallback wrote
    the summary); the skipped-compaction note is the env's reply. All read from the kinds
    recorded with each prompt, none from positions."""
    _, tokenizer = tiny
    call = "THOUGHT: compact\n```bash\ncompact\n```"
    turns = [bash("ls"), call, bash("ls calc"), bash("submit")]
    env = make_env(tiny_task_file, compaction_protocol="tool_call")
    trajectory = rollout(env, ScriptedPolicy(turns, []), options={"task_id": "tiny-calc-1"})
    env.close()
    assert [(e.trigger, e.summarizer) for e in trajectory.compactions()] == [
        ("proactive", "fallback")
    ]
    first, second = segment_trajectory(trajectory, tokenizer)
    assert_segment_invariants(trajectory, [first, second], tokenizer)
    scaffold = tokenizer.decode([t for run in runs(first, TokenKind.PROMPT_SCAFFOLD) for t in run])
    tool_output = tokenizer.decode([t for run in runs(first, TokenKind.TOOL_OUTPUT) for t in run])
    assert WORKING_STATE_REQUEST in scaffold and WORKING_STATE_REQUEST not in tool_output
    (answer,) = [span for span in first.outputs if span.step == 2]
    assert answer.format_error
    assert not any(span.format_error for span in first.outputs if span.step != 2)


def test_template_that_rewrites_earlier_turns_fails_the_prefix_check(tiny_task_file, tiny):
    """A template that strips thinking from earlier assistant turns changes the prompt."""
    _, tokenizer = tiny
    thinking = copy.deepcopy(tokenizer)  # the shared fixture stays untouched
    thinking.chat_template = (
        "{% for m in messages %}{% set c = m['content'] %}"
        "{% if m['role'] == 'assistant' and not loop.last %}"
        "{% set c = c.split('</think>')[-1] %}{% endif %}"
        "{{ '<|im_start|>' + m['role'] + '\\n' + c + '<|im_end|>\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )
    policy = ScriptedPolicy([f"<think>hmm</think>{bash('ls')}", bash("submit")], [])
    env = make_env(tiny_task_file, forced_compaction_threshold=None)
    trajectory = rollout(env, policy, seed=0)
    env.close()
    with pytest.raises(PrefixMismatchError, match="step 1 is not a token prefix"):
        segment_trajectory(trajectory, thinking)
    assert len(segment_trajectory(trajectory, tokenizer)) == 1


def test_recorded_ids_from_another_tokenizer_are_refused(model_trajectory):
    other = tiny_model_and_tokenizer(vocab_size=1024)[1]
    with pytest.raises(SegmentationError, match="step 0"):
        segment_trajectory(model_trajectory, other, prefix_mismatch="split")


def test_inconsistent_segment_numbers_are_refused(scripted_trajectory, tiny):
    _, tokenizer = tiny
    broken = Trajectory(scripted_trajectory.header)
    for event in scripted_trajectory.events:
        if isinstance(event, CompactionEvent) and event.segment_after == 2:
            continue  # a lost compaction event: step 6 claims a segment never opened
        broken.append(event)
    with pytest.raises(SegmentationError, match="step 6 says segment 2"):
        segment_trajectory(broken, tokenizer)


def test_segments_round_trip_through_jsonl_and_files(scripted_trajectory, tiny, tmp_path):
    _, tokenizer = tiny
    path = tmp_path / "run.jsonl"
    scripted_trajectory.write(path)
    segments = list(segment_files([tmp_path], tokenizer, progress=False))
    assert [s.trajectory_id for s in segments] == [f"tiny-calc-1:{path}"] * 4
    out = tmp_path / "segments" / "all.jsonl"
    out.parent.mkdir()
    assert write_segments(segments, out) == 4
    assert read_segments(out) == segments
    out.write_text(out.read_text().replace('"input_ids":', '"input_ids_":', 1))
    with pytest.raises(SegmentationError, match=r"all.jsonl:1: "):
        read_segments(out)
