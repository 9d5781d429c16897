"""``TransformersPolicy``: generates with an HF causal LM on the local machine and reports token
ids and log-probs; ``hf_worker``, the ``hf`` rollout worker."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import (
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from ac_env.actions import ends_an_action
from ac_env.agents.errors import ContextLengthError
from ac_env.policy import Policy, PolicyOutput, SamplingConfig
from ac_train.models.checkpoints import load_model
from ac_train.models.decode_cache import shared_prefix_cache, shared_prefix_length


@dataclass(frozen=True)
class SamplingSettings:
    """``temperature == 0`` is greedy decoding; ``top_p`` only applies when sampling;
    ``stop_after_action``: a response ends at the close of its first bash block unless it is a
    summary (``ac_env.actions.ends_an_action``)."""

    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop_after_action: bool = False

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


class TransformersPolicy:
    """A ``Policy`` that generates with an HF causal LM on the local machine.

    ``output_token_ids`` include the stop token when generation stopped on one (it was sampled
    and is what a trainer should reinforce); with ``stop_after_action`` a response also ends
    with the token that closed its first bash block; ``text`` is the decoded output without special
    tokens. ``output_logprobs[i]`` is the log-probability of ``output_token_ids[i]`` under
    ``log_softmax(logits / temperature)``, the behaviour policy's distribution before any top-p
    truncation (so it matches a trainer's recomputation at the same temperature; with the
    default ``top_p=1`` it is exactly the distribution sampled from). Greedy decoding
    (``temperature == 0``) reports log-probs at temperature 1.

    Sampling draws from one ``torch.Generator`` seeded with ``seed``: a fresh policy with the
    same seed replays the same outputs for the same sequence of observations. Calls are
    serialised by a lock, so one policy may be shared between threads (the HTTP server does).

    ``samples_per_prompt`` (n > 1): the first ``act`` on a prompt samples n outputs in one
    batched decode (the prompt's cache computed once, the weights read once per token for all
    n) and the next n - 1 ``act`` calls on the same prompt take the others; meant for one
    policy shared by the rollouts of a GRPO group from one start state, which all begin on the
    same prompt. A prompt met again after its n are used up is sampled afresh.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        policy_version: int = 0,
        samples_per_prompt: int = 1,
        stop_after_action: bool = False,
    ):
        if samples_per_prompt < 1:
            raise ValueError(f"samples_per_prompt must be >= 1, got {samples_per_prompt}")
        self.model = model
        self.tokenizer = tokenizer
        self.sampling = SamplingSettings(max_new_tokens, temperature, top_p, stop_after_action)
        self.policy_version = policy_version
        self.max_positions = int(model.config.max_position_embeddings)
        self.stop_token_ids = _stop_token_ids(model, tokenizer)
        self._fence_token_ids: frozenset[int] | None = None  # built on first stop_after_action
        self._generator = torch.Generator(device=model.device)
        if seed is None:
            self._generator.seed()
        else:
            self._generator.manual_seed(seed)
        self._lock = threading.Lock()
        self.samples_per_prompt = samples_per_prompt
        self._pending: dict[tuple[int, ...], list[PolicyOutput]] = {}

    @classmethod
    def sampled_by(
        cls,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        sampling: SamplingConfig,
        **settings: Any,
    ) -> TransformersPolicy:
        """A policy that samples by ``sampling``, the config every model worker shares
        (``settings``: the other keywords of the constructor)."""
        return cls(
            model,
            tokenizer,
            max_new_tokens=sampling.max_new_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            stop_after_action=sampling.stop_after_action,
            **settings,
        )

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        if self.samples_per_prompt == 1:
            return self.generate(observation, self.sampling)
        key = tuple(self.prompt_token_ids(observation))
        with self._lock:
            pending = self._pending.get(key)
            if not pending:
                pending = self._pending[key] = self.generate_many(
                    observation, self.sampling, self.samples_per_prompt, locked=True
                )
            output = pending.pop(0)
            if not pending:
                del self._pending[key]
        return output

    def prompt_token_ids(self, observation: Sequence[Mapping[str, str]]) -> list[int]:
        """The chat template applied to the observation, ending with the assistant header."""
        messages = [{"role": m["role"], "content": m["content"]} for m in observation]
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(
        self, observation: Sequence[Mapping[str, str]], sampling: SamplingSettings
    ) -> PolicyOutput:
        """Like ``act``, with per-call sampling settings (the HTTP server passes the request's).

        Generation also stops when the context window is full.
        """
        return self.generate_many(observation, sampling, 1)[0]

    def generate_many(
        self,
        observation: Sequence[Mapping[str, str]],
        sampling: SamplingSettings,
        n: int,
        *,
        locked: bool = False,
    ) -> list[PolicyOutput]:
        """``n`` outputs for one observation, decoded as one batch (``locked``: the caller
        holds the policy's lock)."""
        return self.generate_batch([observation] * n, sampling, locked=locked)

    def generate_batch(
        self,
        observations: Sequence[Sequence[Mapping[str, str]]],
        sampling: SamplingSettings,
        *,
        locked: bool = False,
    ) -> list[PolicyOutput]:
        """One output for each observation, all decoded as one batch: the token prefix the
        prompts share is run once, then each row continues from its own prompt (a GRPO
        group's rollouts after they diverged share their start state). The token ids are the
        ones each row sampled; ``locked``: the caller holds the policy's lock."""
        prompts = [self.prompt_token_ids(observation) for observation in observations]
        if len(prompts) > 1 and shared_prefix_length(prompts) == 0:  # nothing to pad against
            return [
                output
                for observation in observations
                for output in self.generate_batch([observation], sampling, locked=locked)
            ]
        for prompt_ids in prompts:
            if len(prompt_ids) >= self.max_positions:
                raise ContextLengthError(
                    f"prompt has {len(prompt_ids)} tokens but the model accepts at most "
                    f"{self.max_positions} positions (prompt and output together)"
                )
        budgets = [min(sampling.max_new_tokens, self.max_positions - len(p)) for p in prompts]
        with contextlib.nullcontext() if locked else self._lock:
            decoded = self._decode(prompts, budgets, sampling)
        return [
            PolicyOutput(
                text=self.tokenizer.decode(output_ids, skip_special_tokens=True),
                prompt_token_ids=prompt_ids,
                output_token_ids=output_ids,
                output_logprobs=logprobs,
                policy_version=self.policy_version,
            )
            for prompt_ids, (output_ids, logprobs) in zip(prompts, decoded, strict=True)
        ]

    @torch.inference_mode()
    def _decode(
        self, prompts: list[list[int]], budgets: list[int], sampling: SamplingSettings
    ) -> list[tuple[list[int], list[float]]]:
        """A sample for each prompt (``ac_train.models.decode_cache.shared_prefix_cache`` lays out
        the batch); a row leaves the batch (and its cache rows) when it stops or spends its
        budget."""
        device = self.model.device
        ended = self._action_end_check(sampling)
        batch = shared_prefix_cache(self.model, prompts, max(budgets))
        cache, logits = batch.cache, batch.logits
        mask, positions = batch.attention_mask, batch.next_positions
        outputs: list[tuple[list[int], list[float]]] = [([], []) for _ in prompts]
        running = list(range(len(prompts)))  # the rows still decoding, in batch order
        while True:
            tokens, logprobs = self._choose(logits, sampling)
            going = []
            for row, (token, logprob) in enumerate(zip(tokens, logprobs, strict=True)):
                output_ids, output_logprobs = outputs[running[row]]
                output_ids.append(token)
                output_logprobs.append(logprob)
                stopped = token in self.stop_token_ids or ended(token, output_ids)
                if not stopped and len(output_ids) < budgets[running[row]]:
                    going.append(row)
            if not going:
                return outputs
            if len(going) < len(running):
                kept = torch.tensor(going, device=device)
                cache.batch_select_indices(kept)
                mask, positions = mask[kept], positions[kept]
                running = [running[row] for row in going]
            mask = torch.cat([mask, mask.new_ones(len(going), 1)], dim=1)
            result = self.model(
                input_ids=torch.tensor([[tokens[row]] for row in going], device=device),
                attention_mask=mask,
                position_ids=positions[:, None],
                cache=cache,
                use_cache=True,
            )
            logits, positions = result.logits[:, -1].float(), positions + 1

    def _action_end_check(self, sampling: SamplingSettings) -> Callable[[int, list[int]], bool]:
        """``(token, output_ids) -> whether the output ended an action with that token``: never
        without ``stop_after_action``; else only a token holding a backtick can close a bash
        block, so only then is the output decoded and checked."""
        if not sampling.stop_after_action:
            return lambda token, output_ids: False
        if self._fence_token_ids is None:
            vocabulary = self.tokenizer.get_vocab()
            self._fence_token_ids = frozenset(i for t, i in vocabulary.items() if "`" in t)
        fences = self._fence_token_ids

        def ended(token: int, output_ids: list[int]) -> bool:
            if token not in fences:
                return False
            text = self.tokenizer.decode(output_ids, skip_special_tokens=True)
            return isinstance(text, str) and ends_an_action(text)

        return ended

    def _choose(
        self, logits: torch.Tensor, sampling: SamplingSettings
    ) -> tuple[list[int], list[float]]:
        """A token for each row of ``logits`` and its log-probability."""
        if sampling.temperature == 0:
            tokens = torch.argmax(logits, dim=-1)
            logprobs = torch.log_softmax(logits, dim=-1)
        else:
            logprobs = torch.log_softmax(logits / sampling.temperature, dim=-1)
            probs = _top_p_filter(logprobs.exp(), sampling.top_p)
            tokens = torch.multinomial(probs, 1, generator=self._generator)[:, 0]
        chosen = logprobs.gather(-1, tokens[:, None])[:, 0]
        return [int(t) for t in tokens], [float(p) for p in chosen]


def _top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero every token outside the smallest set whose probability reaches ``top_p``."""
    if top_p >= 1:
        return probs
    sorted_probs, order = torch.sort(probs, descending=True)
    mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    sorted_probs[mass_before >= top_p] = 0
    return torch.zeros_like(probs).scatter(-1, order, sorted_probs)


def _stop_token_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> frozenset[int]:
    configured: Any = model.generation_config.eos_token_id
    ids = set(configured if isinstance(configured, list) else [configured])
    ids.add(tokenizer.eos_token_id)
    ids.discard(None)
    if not ids:
        raise ValueError("neither the model's generation config nor the tokenizer names an EOS")
    return frozenset(int(i) for i in ids)


_shared_models: dict[str, tuple[PreTrainedModel, PreTrainedTokenizerBase]] = {}
_shared_models_lock = threading.Lock()


def hf_worker(path: str, sampling: SamplingConfig) -> Callable[[int], Policy]:
    """The ``hf`` model worker (entry point ``autocompact.workers``: ``--worker hf:<path>``):
    ``seed -> TransformersPolicy`` on ``load_model(path)``, loaded once and shared between
    threads, sampling by ``sampling``."""

    def make(seed: int) -> Policy:
        with _shared_models_lock:
            if path not in _shared_models:
                _shared_models[path] = load_model(path)
        model, tokenizer = _shared_models[path]
        return TransformersPolicy.sampled_by(model, tokenizer, sampling, seed=seed)

    return make
