"""``ac_train.integrations.verl_agent_loop`` with verl 0.9.1's own classes: the loop is built
from verl's agent-loop registry by ``hydra.utils.instantiate`` exactly as verl's
``AgentLoopWorker`` builds it, samples through verl's ``LLMServerClient.generate`` (its server,
normally a vLLM/SGLang Ray actor, replaced by one that answers with scripted actions), and its
outputs go through verl's ``AgentLoopOutput.as_dict`` and its multi-output GRPO advantage
(``compute_advantage_for_multi_trajectories``) under the ``{uid}_{session}_{index}`` keys verl's
v1 worker gives them. The tokenizer is SmolLM2's.

verl needs ``transformers<5.11`` (``.venv`` has 5.2x): ``bash scripts/extra_env.sh verl`` makes
its environment. Skipped where verl is absent.
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

import pytest

if importlib.util.find_spec("verl") is None:
    pytest.skip("verl is not installed: bash scripts/extra_env.sh verl", allow_module_level=True)

import hydra
import numpy as np
import torch
from omegaconf import OmegaConf
from test_skyrl_adapter import CASES, SUMMARY, in_process
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import AdvantageEstimator
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.llm_server import LLMServerClient
from verl.workers.rollout.replica import TokenOutput

from ac_train.integrations.verl_agent_loop import AGENT_NAME, AutoCompactAgentLoop
from ac_train.models.checkpoints import load_tokenizer
from ac_train.segments import ChatRenderer

VERL_CONFIG = {
    "actor_rollout_ref": {
        "rollout": {"name": "vllm", "prompt_length": 8192, "response_length": 8192}
    },
    "data": {},
}


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


class _RemoteMethod:
    """A Ray actor method's ``.remote`` (awaited by ``LLMServerClient.generate``)."""

    def __init__(self, method: Any) -> None:
        self.remote = method


class ScriptedServer:
    """verl's rollout server interface (``generate(request_id, prompt_ids, sampling_params)``
    returning a ``TokenOutput``), answering with the next scripted action's token ids."""

    def __init__(self, actions: list[str], tokenizer: Any) -> None:
        self.actions = list(actions)
        self.tokenizer = tokenizer
        self.prompts: list[list[int]] = []
        self.sampled: list[list[int]] = []
        self.generate = _RemoteMethod(self._generate)

    async def _generate(self, *, prompt_ids: list[int], **_: Any) -> TokenOutput:
        self.prompts.append(list(prompt_ids))
        ids = self.tokenizer.encode(self.actions.pop(0), add_special_tokens=False)
        ids.append(self.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        self.sampled.append(ids)
        return TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids), stop_reason="completed")


class OneServerClient(LLMServerClient):
    """verl's client with its load balancer (a Ray actor) replaced by one in-process server."""

    def __init__(self, config: Any, server: ScriptedServer) -> None:
        super().__init__(config)
        self.server = server

    async def _acquire_server(self, request_id: str, **extra: Any) -> tuple[str, Any]:
        return "scripted", self.server

    def _release_server(self, server_id: str, request_id: str | None = None) -> None:
        return None


def episode(actions: list[str], tokenizer: Any, env: dict[str, Any], seed: int = 1):
    config = OmegaConf.create(VERL_CONFIG)
    server = ScriptedServer(actions, tokenizer)
    loop = hydra.utils.instantiate(
        config=_agent_loop_registry[AGENT_NAME] | {"env": env},
        trainer_config=DictConfigWrap(config=config),
        server_manager=OneServerClient(config, server),
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
    )
    assert isinstance(loop, AutoCompactAgentLoop)
    outputs = asyncio.run(loop.run({"temperature": 1.0}, raw_prompt=[], extra_info={"seed": seed}))
    return outputs, server


def test_one_output_per_segment_each_trained_on_what_the_policy_sampled_in_it(tokenizer):
    env_config, script, _summarizer, grade = CASES["proactive"]
    actions, answers = in_process(1, env_config, script)
    outputs, server = episode(actions, tokenizer, env_config)

    renderer = ChatRenderer(tokenizer)
    assert server.prompts == [renderer.prompt_ids(answer[0]) for answer in answers[:-1]]
    rewrite = next(i for i, a in enumerate(answers[1:]) if a[4]["prefix_rewritten"])
    assert len(outputs) == 2  # one compaction: two segments
    assert [o.reward_score for o in outputs] == [grade, grade]
    per_segment = [server.sampled[: rewrite + 1], server.sampled[rewrite + 1 :]]
    for output, sampled in zip(outputs, per_segment, strict=True):
        trained = [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m]
        assert trained == [t for ids in sampled for t in ids]
        assert output.prompt_ids + output.response_ids[: len(sampled[0])] == (
            server.prompts[server.sampled.index(sampled[0])] + sampled[0]
        )
        logprobs = output.response_logprobs
        assert logprobs is not None
        assert [lp for lp, m in zip(logprobs, output.response_mask, strict=True) if m] == [
            -0.25
        ] * len(trained)
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
