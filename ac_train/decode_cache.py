"""A key/value cache for decoding that reserves its length up front.

transformers' ``DynamicLayer`` grows by ``torch.cat`` at every decode step, which copies the
whole cache: at a 4,600-token context and 6 rows, SmolLM2's 30 layers copy about 1.3 GB per
generated token, as much time on a CPU as the model itself (``benchmarks/decode_cache.py``).
``ReservedLayer`` allocates ``capacity`` positions once (prompt plus output budget) and writes
each step's keys and values in place; attention reads the filled part, a view. The numbers are
the same: only where they are stored changes.

``reserved_cache`` builds the model's usual ``DynamicCache`` and swaps every full-attention layer
for a reserved one; layers of other kinds (sliding windows) keep their own.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import PretrainedConfig
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


__all__ = ["ReservedLayer", "reserved_cache"]
