"""Diverged prompts decoded as one batch: each row exactly what it would sample alone, and
``BatchedActs`` batching the calls of rollout threads."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ac_env.agents.errors import ContextLengthError
from ac_train.models.batched_acts import BatchedActs
from ac_train.models.checkpoints import tiny_model_and_tokenizer
from ac_train.models.decode_cache import shared_prefix_length
from ac_train.models.policy import SamplingSettings, TransformersPolicy

GREEDY = SamplingSettings(max_new_tokens=12)


def chat(detail: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": f"calc/ops.py: add(2, 3) gives -1. {detail}"},
    ]


CHATS = [chat("Read the file."), chat("The tests fail: " + "x " * 15), chat("")]


@pytest.fixture(scope="module")
def tiny():
    return tiny_model_and_tokenizer(max_positions=96)


def test_shared_prefix_length():
    assert shared_prefix_length([[1, 2, 3], [1, 2, 4, 5], [1, 2]]) == 2
    assert shared_prefix_length([[1, 2], [1, 2]]) == 2
    assert shared_prefix_length([[1], [2]]) == 0


def test_diverged_prompts_decode_in_one_batch_as_each_alone(tiny):
    policy = TransformersPolicy(*tiny)
    prompts = [policy.prompt_token_ids(c) for c in CHATS]
    assert len({len(p) for p in prompts}) == 3 and shared_prefix_length(prompts) > 5
    batched = policy.generate_batch(CHATS, GREEDY)
    for observation, got in zip(CHATS, batched, strict=True):
        (alone,) = policy.generate_batch([observation], GREEDY)
        assert got.prompt_token_ids == alone.prompt_token_ids
        assert got.output_token_ids == alone.output_token_ids
        assert got.output_logprobs == pytest.approx(alone.output_logprobs, abs=1e-4)


def test_equal_prompts_among_others_are_prefilled_once_and_decode_as_alone(tiny, monkeypatch):
    policy = TransformersPolicy(*tiny)
    observations = [CHATS[0], CHATS[1], CHATS[0], CHATS[2], CHATS[1]]
    prefilled_rows: list[int] = []
    forward = policy.model.forward

    def counting(*args, **kwargs):
        if kwargs["input_ids"].shape[1] > 1:  # a prefill pass, not a decode step
            prefilled_rows.append(kwargs["input_ids"].shape[0])
        return forward(*args, **kwargs)

    monkeypatch.setattr(policy.model, "forward", counting)
    batched = policy.generate_batch(observations, GREEDY)
    assert prefilled_rows == [1, 3]  # the shared prefix, then the 3 distinct prompts' own tokens
    for observation, got in zip(observations, batched, strict=True):
        (alone,) = policy.generate_batch([observation], GREEDY)
        assert got.output_token_ids == alone.output_token_ids
        assert got.output_logprobs == pytest.approx(alone.output_logprobs, abs=1e-4)


def test_each_row_stops_at_its_own_room_in_the_window(tiny):
    policy = TransformersPolicy(*tiny)
    policy.stop_token_ids = frozenset()  # every row decodes until its budget is spent
    long = chat("The tests fail: " + "y " * 30)
    room = policy.max_positions - len(policy.prompt_token_ids(long))
    assert 0 < room < 40
    outputs = policy.generate_batch([CHATS[0], long], SamplingSettings(max_new_tokens=40))
    assert len(outputs[1].output_token_ids) == room
    first_room = policy.max_positions - len(outputs[0].prompt_token_ids)
    assert len(outputs[0].output_token_ids) == min(40, first_room)


def act_from_threads(policy, observations):
    results: dict[int, object] = {}

    def run(index):
        try:
            results[index] = policy.act(observations[index])
        except Exception as error:
            results[index] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(observations))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return [results[i] for i in range(len(observations))]


def test_calls_from_threads_meet_in_one_decode(tiny):
    model, tokenizer = tiny
    batched = BatchedActs(TransformersPolicy(model, tokenizer, max_new_tokens=12), 3, 30.0)
    outputs = act_from_threads(batched, CHATS)
    assert batched.batch_sizes == [3]  # all three, long before the 30 s gather ran out
    alone = TransformersPolicy(model, tokenizer, max_new_tokens=12)
    for observation, output in zip(CHATS, outputs, strict=True):
        assert output.output_token_ids == alone.act(observation).output_token_ids


def test_fewer_callers_than_rows_are_decoded_once_the_gather_time_passes(tiny):
    batched = BatchedActs(TransformersPolicy(*tiny, max_new_tokens=4), rows=6, gather_s=0.2)
    outputs = act_from_threads(batched, CHATS[:2])
    assert batched.batch_sizes == [2] and all(len(o.output_token_ids) == 4 for o in outputs)


def test_one_rows_error_is_its_own(tiny):
    batched = BatchedActs(TransformersPolicy(*tiny, max_new_tokens=4), rows=3, gather_s=30.0)
    too_long = chat("z " * 200)
    outputs = act_from_threads(batched, [CHATS[0], too_long, CHATS[1]])
    assert isinstance(outputs[1], ContextLengthError)
    assert all(len(outputs[i].output_token_ids) == 4 for i in (0, 2))


@pytest.mark.slow  # about 20 s: SmolLM2 on a short start state
def test_the_group_sampling_benchmark_runs_and_writes_its_table(tmp_path):
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "group_sampling.py"
    out = tmp_path / "group_sampling.json"
    command = [sys.executable, str(script), "--group", "3", "--context", "200", "--own", "30"]
    command += ["--new-tokens", "6", "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {row["way"]: row for row in json.loads(out.read_text())["rows"]}
    assert rows["one row at a time"]["speedup"] == 1.0
    assert rows["diverged rows batched"]["tokens_per_s"] > 0
    assert out.with_suffix(".png").stat().st_size > 0
