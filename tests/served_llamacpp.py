"""Shared by the tests against llama-cpp-python's server: the skip when it is not installed,
and the learner's own log-probs of a served output."""

from __future__ import annotations

import importlib.util

import pytest
import torch

needs_llamacpp = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama-cpp-python[server] is not installed: bash scripts/llamacpp.sh install",
)


def learner_logprobs(model, tokenizer, chat, output_ids) -> tuple[torch.Tensor, torch.Tensor]:
    """The learner's log-probs (temperature 1) of ``output_ids`` after the chat template's
    prompt of ``chat``, and its largest log-prob at each of those positions (its greedy
    choice's)."""
    prompt = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt_ids + list(output_ids)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
    logprobs = torch.log_softmax(logits, -1)
    chosen = logprobs.gather(-1, ids[0, len(prompt_ids) :, None])[:, 0]
    return chosen, logprobs.max(-1).values
