"""A key/value cache for decoding that reserves its length up front.

transformers' ``DynamicLayer`` grows by ``torch.cat`` at every decode step, which copies the
whole cache: at a 4,600-token context and 6 rows, SmolLM2's 30 layers copy about 1.3 GB per
generated token, as much time on a CPU as the model itself (``benchmarks/decode_cache.py``).
``ReservedLayer`` allocates ``capacity`` positions once (prompt plus output budget) and writes
each step's keys and values in place; attention reads the filled part, a view. The numbers are
the same: only where they are stored changes.

``reserved_cache`` builds the model's usual ``DynamicCache`` and swaps every full-attention layer
for a reserved one; layers of other kinds (sliding windows) keep their own.

``shared_prefix_cache`` prefills a batch of prompts that begin alike (a GRPO group's rollouts
continuing one start state): the shared tokens are run once and repeated per row, then each
row's own tokens, left-padded to one width, run as one batch. Padding is masked out and
position ids skip it, so each row sees exactly its own prompt. Rows with equal prompts (a
held-out batch holds each start state's samples) are prefilled once and their cache copied.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PretrainedConfig, PreTrainedModel
from transformers.cache_utils import DynamicCache, DynamicLayer


class ReservedLayer(DynamicLayer):
    """A full-attention cache layer holding at most ``capacity`` positions, written in place.

    ``keys`` and ``values`` are views of the filled part of the reserved buffers, which is what
    the rest of transformers reads. Supports what decoding uses: ``update``,
    ``batch_repeat_interleave`` (one prompt, several samples) and ``batch_select_indices``
    (samples that stopped leave the batch)."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.length = 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        rows, heads = key_states.shape[:2]
        self._key_buffer = key_states.new_empty(rows, heads, self.capacity, key_states.shape[-1])
        self._value_buffer = value_states.new_empty(
            rows, heads, self.capacity, value_states.shape[-1]
        )
        self.length = 0

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if end > self.capacity:
            raise ValueError(
                f"the cache reserved {self.capacity} positions; {end} are needed "
                "(reserve the prompt and the whole output budget)"
            )
        self._key_buffer[:, :, self.length : end] = key_states
        self._value_buffer[:, :, self.length : end] = value_states
        self.length = end
        return self._expose()

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.is_initialized:
            self._key_buffer = self._key_buffer.repeat_interleave(repeats, dim=0)
            self._value_buffer = self._value_buffer.repeat_interleave(repeats, dim=0)
            self._expose()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized:
            self._key_buffer = self._key_buffer[indices]
            self._value_buffer = self._value_buffer[indices]
            self._expose()

    def _expose(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.keys = self._key_buffer[:, :, : self.length]
        self.values = self._value_buffer[:, :, : self.length]
        return self.keys, self.values


def reserved_cache(config: PretrainedConfig, capacity: int) -> DynamicCache:
    """The model's decoding cache with every full-attention layer reserved for ``capacity``
    positions."""
    cache = DynamicCache(config=config)
    cache.layers = [
        ReservedLayer(capacity) if type(layer) is DynamicLayer else layer for layer in cache.layers
    ]
    return cache


@dataclass
class PrefilledBatch:
    """Prompts run into a cache, ready for the first sampled token of every row."""

    cache: DynamicCache
    logits: torch.Tensor  # rows x vocabulary: each row's next-token logits (float32)
    attention_mask: torch.Tensor  # rows x cached positions: 0 on padding
    next_positions: torch.Tensor  # rows: each row's next position id (its prompt's length)


def shared_prefix_length(prompts: Sequence[Sequence[int]]) -> int:
    """How many leading tokens all ``prompts`` share."""
    shortest = min(len(prompt) for prompt in prompts)
    for index in range(shortest):
        if any(prompt[index] != prompts[0][index] for prompt in prompts):
            return index
    return shortest


def shared_prefix_cache(
    model: PreTrainedModel, prompts: Sequence[Sequence[int]], budget: int
) -> PrefilledBatch:
    """``prompts`` prefilled as one batch, with room for ``budget`` more tokens a row; equal
    prompts (the samples of one start state among others) are run once and their cache copied.

    The shared prefix stops one token short of the shortest prompt, so every row runs at least
    its last token in the batched pass (equal prompts: one token each). Padding needs a shared
    first token, so that every padded position still sees a real one (a fully masked
    attention row would be NaN): prompts with nothing in common are refused."""
    if not prompts or any(not prompt for prompt in prompts):
        raise ValueError("shared_prefix_cache: every prompt needs at least one token")
    device = model.device
    shared = min(shared_prefix_length(prompts), min(len(p) for p in prompts) - 1)
    suffixes = [list(prompt[shared:]) for prompt in prompts]
    distinct = list(dict.fromkeys(tuple(suffix) for suffix in suffixes))
    copies = [distinct.index(tuple(suffix)) for suffix in suffixes]  # row -> distinct row
    suffixes = [list(suffix) for suffix in distinct]
    width = max(len(suffix) for suffix in suffixes)
    if shared == 0 and width > 1:
        raise ValueError(
            "shared_prefix_cache: prompts that share no first token cannot be padded into "
            "one batch (decode them one at a time)"
        )
    cache = reserved_cache(model.config, shared + width + budget)
    if shared:
        model(
            input_ids=torch.tensor([list(prompts[0][:shared])], device=device),
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
    rows = len(suffixes)
    if rows > 1:
        cache.batch_repeat_interleave(rows)
    pads = torch.tensor([width - len(suffix) for suffix in suffixes], device=device)
    ids = torch.tensor([[0] * (width - len(s)) + s for s in suffixes], device=device)
    columns = torch.arange(width, device=device)[None]
    own = (columns >= pads[:, None]).long()
    mask = torch.cat([own.new_ones(rows, shared), own], dim=1)
    positions = shared + (columns - pads[:, None]).clamp(min=0)
    result = model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=positions,
        cache=cache,
        use_cache=True,
        logits_to_keep=1,
    )
    logits = result.logits[:, -1].float()
    if len(prompts) > rows:  # equal prompts: each runs once, then its cache rows are copied
        index = torch.tensor(copies, device=device)
        cache.batch_select_indices(index)
        logits, mask = logits[index], mask[index]
    lengths = torch.tensor([len(prompt) for prompt in prompts], device=device)
    return PrefilledBatch(cache, logits, mask, lengths)


__all__ = [
    "PrefilledBatch",
    "ReservedLayer",
    "reserved_cache",
    "shared_prefix_cache",
    "shared_prefix_length",
]
