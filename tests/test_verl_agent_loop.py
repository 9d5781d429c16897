"""``ac_train.integrations.verl_agent_loop`` with verl 0.9.1's own classes: the loop is built
from verl's agent-loop registry by ``hydra.utils.instantiate`` exactly as verl's
``AgentLoopWorker`` builds it, samples through verl's ``LLMServerClient.generate`` (its server,
normally a vLLM/SGLang Ray actor, replaced by ``PolicyServer`` answering scripted actions), and its
outputs go through verl's ``AgentLoopOutput.as_dict`` and its multi-output GRPO advantage
(``compute_advantage_for_multi_trajectories``) under the ``{uid}_{session}_{index}`` keys verl's
v1 worker gives them. The tokenizer is SmolLM2's.

verl needs ``transformers<5.11`` (``.venv`` has 5.2x): ``bash scripts/extra_env.sh verl`` makes
its environment. Skipped where verl is absent.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("verl") is None:
    pytest.skip("verl is not installed: bash scripts/extra_env.sh verl", allow_module_level=True)

import hydra
import numpy as np
import torch
from scripted_policy import ScriptedPolicy
from served_llamacpp import needs_llamacpp
from test_skyrl_adapter import CASES, SUMMARY, in_process
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import AdvantageEstimator
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
from verl.workers.rollout.replica import TokenOutput

from ac_train.integrations.verl_agent_loop import EpisodeChoice, LocalServerClient, local_agent_loop
from ac_train.models.checkpoints import load_tokenizer, smollm2_gguf_path
from ac_train.models.llamacpp import llamacpp_server
from ac_train.segments import ChatRenderer


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


def episode(actions: list[str], tokenizer: Any, env: dict[str, Any], seed: int = 1):
    policy = ScriptedPolicy(actions)
    loop = local_agent_loop(policy, tokenizer, env, prompt_length=8192, response_length=8192)
    outputs = asyncio.run(loop.run({"temperature": 1.0}, raw_prompt=[], extra_info={"seed": seed}))
    return outputs, policy


def test_one_output_per_segment_each_trained_on_what_the_policy_sampled_in_it(tokenizer):
    env_config, script, _summarizer, grade = CASES["proactive"]
    actions, answers = in_process(1, env_config, script)
    outputs, policy = episode(actions, tokenizer, env_config)

    # each turn was sampled in the env's own context (read back from the prompt's token ids)
    assert policy.observations == [[dict(m) for m in answer[0]] for answer in answers[:-1]]
    renderer = ChatRenderer(tokenizer)
    prompts = [renderer.prompt_ids(answer[0]) for answer in answers[:-1]]
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    sampled = [[*tokenizer.encode(a, add_special_tokens=False), end] for a in actions]
    rewrite = next(i for i, a in enumerate(answers[1:]) if a[4]["prefix_rewritten"])
    assert len(outputs) == 2  # one compaction: two segments
    assert [o.reward_score for o in outputs] == [grade, grade]
    firsts = [0, rewrite + 1]
    per_segment = [sampled[: rewrite + 1], sampled[rewrite + 1 :]]
    for output, first, outputs_sampled in zip(outputs, firsts, per_segment, strict=True):
        trained = [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m]
        assert trained == [t for ids in outputs_sampled for t in ids]
        assert output.prompt_ids == prompts[first]
        assert output.response_ids[: len(sampled[first])] == sampled[first]
        assert output.response_logprobs is None  # the server gave none
    # the second segment opens with the summary the first one wrote, and never trains it
    second = outputs[1]
    assert SUMMARY.split("\n")[0] in tokenizer.decode(second.prompt_ids)


def test_verls_multi_output_grpo_gives_every_segment_its_episodes_advantage(tokenizer):
    env_config, script, *_ = CASES["proactive"]
    solved, _ = in_process(1, env_config, script)
    unsolved, _ = in_process(1, env_config, ["grep", SUMMARY, "submit"])
    sessions = [episode(a, tokenizer, env_config)[0] for a in (solved, unsolved)]
    assert [len(s) for s in sessions] == [2, 2]
    assert [s[-1].reward_score for s in sessions] == [1.0, 0.0]

    rows, keys = [], []
    for session_id, outputs in enumerate(sessions):
        for index, output in enumerate(outputs):
            rows.append(output.as_dict())
            keys.append(f"prompt0_{session_id}_{index}")
    width = max(len(row["responses"]) for row in rows)

    def padded(name: str) -> torch.Tensor:
        return torch.stack(
            [torch.nn.functional.pad(row[name], (0, width - len(row[name]))) for row in rows]
        )

    data = DataProto.from_dict(
        tensors={
            "token_level_rewards": padded("rm_scores"),
            "response_mask": padded("response_mask"),
        },
        non_tensors={"uid": np.array(["prompt0"] * len(rows), dtype=object)},
    )
    data = compute_advantage_for_multi_trajectories(data, keys, AdvantageEstimator.GRPO)
    advantages = data.batch["advantages"]
    mask = data.batch["response_mask"].bool()
    per_row = [advantages[i][mask[i]].unique().tolist() for i in range(len(rows))]
    # GRPO over the two sessions' final outputs (rewards 1 and 0, sample std 0.707), broadcast
    # to each session's first segment too
    expected = 0.5 / (2**-0.5 + 1e-6)
    assert per_row == [[pytest.approx(expected)]] * 2 + [[pytest.approx(-expected)]] * 2


def test_a_bad_env_setting_fails_when_the_loop_is_built_naming_the_field(tokenizer):
    # hydra wraps the loop's error in its own, keeping the message
    with pytest.raises(hydra.errors.InstantiationException, match="max_steps"):
        episode([], tokenizer, {"max_steps": -1})


def test_the_example_prints_the_compaction_and_each_segments_advantage():
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, str(root / "examples" / "verl_agent_loop.py")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "compaction at step" in run.stdout and "reward 1.0" in run.stdout
    advantages = re.findall(r"task_(\d)_\d: advantage \[(-?[\d.]+)\]", run.stdout)
    assert {session for session, _ in advantages} == {"0", "1"}
    assert all(float(a) > 0 if s == "0" else float(a) < 0 for s, a in advantages)


class LlamaCppServer:
    """verl's rollout-server interface over llama.cpp's OpenAI-compatible ``/completions``:
    the prompt ids are sent as their text (llama.cpp's server takes no token ids), and the
    completion comes back as text, tokenized, with ``<|im_end|>`` closing it."""

    def __init__(self, url: str, tokenizer: Any) -> None:
        self.url = url
        self.tokenizer = tokenizer
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.calls = 0
        self.generate = type("Remote", (), {"remote": staticmethod(self._generate)})()

    async def _generate(self, *, prompt_ids: list[int], sampling_params: dict, **_: Any):
        body = {
            "prompt": self.tokenizer.decode(prompt_ids, skip_special_tokens=False),
            "max_tokens": 96,
            "temperature": sampling_params["temperature"],
            "stop": ["<|im_end|>"],
        }
        request = urllib.request.Request(
            f"{self.url}/completions",
            json.dumps(body).encode(),
            {"Content-Type": "application/json"},
        )

        def post() -> str:
            with urllib.request.urlopen(request, timeout=300) as reply:
                return json.load(reply)["choices"][0]["text"]

        text = await asyncio.get_running_loop().run_in_executor(None, post)
        self.calls += 1
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.end]
        return TokenOutput(token_ids=ids, stop_reason="completed")


@needs_llamacpp
@pytest.mark.slow
def test_an_episode_against_the_llamacpp_server_gives_one_output_per_segment(tokenizer):
    env = {"task_source": "builtin", "split": "easy", "max_steps": 5}
    env["forced_compaction_threshold"] = 700  # SmolLM2's turns pass it: forced compactions
    with llamacpp_server([(smollm2_gguf_path(), "smollm2")]) as url:
        loop = local_agent_loop(ScriptedPolicy([]), tokenizer, env)
        server = LlamaCppServer(url, tokenizer)
        loop.server_manager = LocalServerClient(loop.config, server)
        trajectory = asyncio.run(loop.play(EpisodeChoice(seed=2), {"temperature": 0.7}))
    outputs = loop.outputs(trajectory)
    calls = trajectory.model_calls()
    assert server.calls == len(calls) and trajectory.compactions()
    # one output per segment the model sampled in (a compaction on the last turn opens none)
    assert len(outputs) == len({call.segment for call in calls})
    trained = [
        t for o in outputs for t, m in zip(o.response_ids, o.response_mask, strict=True) if m
    ]
    assert trained == [t for call in calls for t in call.output_token_ids]
