"""AutoCompact-SWE-v0 through verifiers' own rollout code (``verifiers`` 0.3.1, ``verifiers.v1``)
against a real model server (llama-cpp-python's, SmolLM2 GGUF): ``Env.run_episode`` with the
hub package's ``load_environment``, its interception server relaying every model call.

Checked: each compaction segment of the episode is one branch of verifiers' message graph
(branch k holds exactly segment k's last prompt and output), and the training sample prime-rl
makes of each branch (the branch rendered by verifiers' renderer, ``renderers``, trained on
the completions verifiers marked sampled, up to their stop token) is our segmenter's segment,
token for token: the same ids and the same trained tokens. The trace's reward, which every
branch shares, is the episode's.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from served_llamacpp import needs_llamacpp

from ac_env.trajectory import Trajectory
from ac_train.models.checkpoints import load_tokenizer, smollm2_gguf_path
from ac_train.models.llamacpp import llamacpp_server
from ac_train.segments import Segment, segment_trajectory

v1 = pytest.importorskip("verifiers.v1", reason="verifiers is not installed: the verifiers extra")
renderers = pytest.importorskip("renderers")

pytestmark = [pytest.mark.slow, needs_llamacpp]

HUB_PACKAGE = Path(__file__).resolve().parents[1] / "environments" / "autocompact_swe"
ENV = {
    "split": "easy",
    "sandbox": "local",
    "max_steps": 4,
    # low enough that the env asks for a summary within the first turns
    "forced_compaction_threshold": 900,
}


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with llamacpp_server([(smollm2_gguf_path(), "smollm2")]) as url:
        yield url


@pytest.fixture(scope="module")
def episode(server_url):
    """One episode played by verifiers' rollout: its trace, and the env's trajectory."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(HUB_PACKAGE))
        from autocompact_swe import load_environment

        env = load_environment(env=ENV, seeds=[0], max_tokens=96)
    task = next(iter(env.taskset))
    client = v1.EvalClientConfig(base_url=server_url, api_key_var="AUTOCOMPACT_NO_KEY")
    result = asyncio.run(env.run_episode(task, v1.ModelContext(model="smollm2", client=client)))
    assert result.errors == [] and result.ok, result.errors
    (trace,) = result.traces
    trajectory = Trajectory.from_jsonl(trace.info["autocompact"]["trajectory"])
    return trace, trajectory


def branch_sample(branch, renderer) -> tuple[list[int], list[bool]]:
    """What prime-rl trains of a branch: the branch's messages rendered by verifiers'
    renderer, with a token trained where it is a completion verifiers marked sampled (from
    after the assistant header to its stop token, inclusive). The text after the last stop
    token (the template's closing newline) was never in any prompt, and is dropped."""
    messages = [{"role": m.role, "content": m.content} for m in branch.messages]
    rendered = renderer.render(messages, add_generation_prompt=False)
    ids, owner = list(rendered.token_ids), list(rendered.message_indices)
    stops = set(renderer.get_stop_token_ids())
    trained = [False] * len(ids)
    end = 0
    for index, node in enumerate(branch.nodes):
        positions = [p for p, m in enumerate(owner) if m == index]
        if not node.sampled:
            end = positions[-1] + 1
            continue
        header = renderer.render(messages[:index], add_generation_prompt=True).token_ids
        start = len(header)
        assert ids[:start] == list(header), f"message {index}: the header is not a prefix"
        stop = next(p for p in positions if p >= start and ids[p] in stops)
        trained[start : stop + 1] = [True] * (stop + 1 - start)
        end = stop + 1
    return ids[:end], trained[:end]


def test_each_compaction_segment_is_one_branch_with_the_episodes_reward(episode):
    trace, trajectory = episode
    compactions = trajectory.compactions()
    assert compactions, "the episode should compact (forced_compaction_threshold)"
    assert trace.info["autocompact"]["compactions"] == [
        json.loads(c.model_dump_json()) for c in compactions
    ]
    segments = {c.segment for c in trajectory.model_calls()}
    assert trace.num_branches == len(segments) >= 2
    reward = trajectory.reward
    assert trace.reward == (0.0 if reward is None or math.isnan(reward) else reward)
    for branch, segment in zip(trace.branches, sorted(segments), strict=True):
        last = [c for c in trajectory.model_calls() if c.segment == segment][-1]
        chat = [{"role": m["role"], "content": m["content"]} for m in last.messages]
        chat.append({"role": "assistant", "content": last.output})
        assert [{"role": m.role, "content": m.content} for m in branch.messages] == chat


def test_each_branchs_training_sample_is_our_segment_token_for_token(episode):
    trace, trajectory = episode
    tokenizer = load_tokenizer("smollm2")
    renderer = renderers.create_renderer(tokenizer, renderers.DefaultRendererConfig())
    segments: list[Segment] = segment_trajectory(trajectory, tokenizer)
    assert [s.part for s in segments] == [0] * len(segments)  # one sequence per segment
    assert len(segments) == trace.num_branches
    for branch, segment in zip(trace.branches, segments, strict=True):
        ids, trained = branch_sample(branch, renderer)
        assert ids == segment.input_ids, f"branch {branch.index}: token ids differ"
        assert trained == segment.grpo_mask(), f"branch {branch.index}: trained tokens differ"
        assert sum(trained) > 0
