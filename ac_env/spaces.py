"""Spaces for text environments.

gymnasium's ``Text`` space only admits characters of a fixed charset (alphanumerics by
default), which rejects code. ``UnicodeText`` admits any string up to a length; ``Messages``
is the observation space: a tuple of ``{"role", "content"}`` chat messages.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Space

ROLES = ("system", "user", "assistant")

# Printable samples cover ASCII code, whitespace, and a spread of non-ASCII code points.
_SAMPLE_ALPHABET = (
    [chr(c) for c in range(32, 127)]
    + ["\n", "\t", "`", "é", "ß", "λ", "中", "文", "😀", "\u200b"]
    + ["```bash\n", "\n```", "# Auto Context Summary\n", "submit"]
)


class UnicodeText(Space[str]):
    """Any Python string of at most ``max_length`` characters (any Unicode code point)."""

    def __init__(self, max_length: int = 1_000_000, seed: int | np.random.Generator | None = None):
        if max_length < 1:
            raise ValueError(f"max_length must be positive, got {max_length}")
        self.max_length = max_length
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        length = int(self.np_random.integers(0, min(self.max_length, 64) + 1))
        picks = self.np_random.integers(0, len(_SAMPLE_ALPHABET), size=length)
        return "".join(_SAMPLE_ALPHABET[i] for i in picks)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnicodeText) and other.max_length == self.max_length


class Messages(Space[tuple[dict[str, str], ...]]):
    """A tuple of chat messages ``{"role": one of ROLES, "content": str}``."""

    def __init__(
        self,
        max_messages: int = 100_000,
        max_content_length: int = 10_000_000,
        seed: int | np.random.Generator | None = None,
    ):
        self.max_messages = max_messages
        self.content = UnicodeText(max_content_length)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def seed(self, seed: int | None = None) -> int | list[int] | dict[str, int]:
        seeds = super().seed(seed)
        self.content.seed(int(self.np_random.integers(2**31)))
        return seeds

    def sample(self, mask: Any = None, probability: Any = None) -> tuple[dict[str, str], ...]:
        count = int(self.np_random.integers(1, 5))
        roles = self.np_random.integers(0, len(ROLES), size=count)
        return tuple({"role": ROLES[r], "content": self.content.sample()} for r in roles)

    def contains(self, x: Any) -> bool:
        return (
            isinstance(x, tuple)
            and len(x) <= self.max_messages
            and all(
                isinstance(m, dict)
                and m.keys() == {"role", "content"}
                and m["role"] in ROLES
                and self.content.contains(m["content"])
                for m in x
            )
        )

    def __repr__(self) -> str:
        return f"Messages(max_messages={self.max_messages})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Messages) and other.max_messages == self.max_messages
