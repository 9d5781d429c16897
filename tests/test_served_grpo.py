"""GRPO with a served sampler: rollouts from llama-cpp-python's server, the learner's weights
sent back after every update (two weight slots), and the sampler's log-probs after a reload
equal to the learner's."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from served_llamacpp import learner_logprobs, needs_llamacpp

from ac_env.agents.http import OpenAIChatPolicy
from ac_env.policy import SamplingConfig
from ac_train.grpo.config import GRPOConfig
from ac_train.grpo.trainer import GRPOTrainer
from ac_train.models.checkpoints import smollm2_gguf_path
from ac_train.models.llamacpp import llamacpp_server
from ac_train.models.served_sampler import prepare_slots, slot_paths

pytestmark = [pytest.mark.slow, needs_llamacpp]

EXPORTED_TOLERANCE = 1e-2
"""|served - learner| log-prob per token once the learner's float32 weights are served
(measured: at most 3.1e-3 over 24 tokens; llama.cpp keeps its KV cache in float16)."""
CHAT = [
    {"role": "system", "content": "You are a coding agent. Answer with one bash block."},
    {"role": "user", "content": "Show the first lines of setup.py."},
]


def served_logprobs(url, alias, tokenizer):
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=24)
    policy = OpenAIChatPolicy.served(
        url, alias, sampling, server="llamacpp", tokenizer=tokenizer, api_key_env=None
    )
    out = policy.act(CHAT)
    assert out.output_token_ids is not None and out.output_logprobs is not None
    return out.output_token_ids, torch.tensor(out.output_logprobs)


@pytest.mark.timeout(1800)
def test_two_updates_reach_the_sampler_and_its_log_probs_are_the_learners(tmp_path):
    slots = prepare_slots(tmp_path / "slots", smollm2_gguf_path())
    with llamacpp_server([(path, f"smollm2@{slot}") for path, slot in slots]) as url:
        config = GRPOConfig(
            output_dir=tmp_path / "run",
            steps=2,
            tasks_per_step=1,
            rollouts_per_task=2,
            rollout_max_steps=2,
            max_new_tokens=32,
            temperature=1.0,
            learning_rate=1e-3,
            save_every=100,
            progress=False,
            sampler=f"openai:smollm2@{url}",
            sampler_weights=tmp_path / "slots",
        )
        trainer = GRPOTrainer(config)
        # SmolLM2 solves nothing in two steps, so every group's rewards would be equal and no
        # optimizer step would be taken: the rewards alone are set (1, 0, ...) per group.
        # Sampling, segments, the loss, the update, the export and the reload are the real ones.
        score = trainer.score

        def informative(groups):
            scored = score(groups)
            return [
                [dataclasses.replace(r, trained_reward=float(i % 2 == 0)) for i, r in enumerate(g)]
                for g in scored
            ]

        trainer.score = informative
        before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        history = trainer.train()
        sampler = trainer.served_sampler
        assert sampler is not None

        assert [m.step for m in history] == [0, 1]
        assert [m.policy_version for m in history] == [0, 1]
        assert all(m.staleness_max == 0 for m in history)
        assert all(m.informative_groups == 1 and m.grad_norm is not None for m in history)
        assert sampler.version == 1 and sampler.alias == "smollm2@a"
        assert not any(path.is_symlink() for path in slot_paths(tmp_path / "slots"))
        moved = max(
            float((v - before[k]).abs().max()) for k, v in trainer.model.state_dict().items()
        )
        assert moved > 0

        # The weights after the second update are served once pushed: same log-probs.
        model, tokenizer = trainer.model, trainer.tokenizer
        sampler.push(model, 2)
        ids, served = served_logprobs(url, sampler.alias, tokenizer)
        ours, _ = learner_logprobs(model, tokenizer, CHAT, ids)
        assert (ours - served).abs().max() < EXPORTED_TOLERANCE

        # And a change of the weights shows in the served log-probs after the next push.
        with torch.no_grad():
            model.get_input_embeddings().weight.mul_(1.5)
        sampler.push(model, 3)
        ids_after, served_after = served_logprobs(url, sampler.alias, tokenizer)
        ours_after, _ = learner_logprobs(model, tokenizer, CHAT, ids_after)
        assert (ours_after - served_after).abs().max() < EXPORTED_TOLERANCE
        assert ids_after != ids or (served_after - served).abs().max() > 10 * EXPORTED_TOLERANCE
