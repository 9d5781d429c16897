"""What a timing rule sees, and the one interface every rule implements.

A ``Moment`` is the episode just before a policy turn, as the history shows it: the context's
messages (``role``, ``content``), its size in tokens, and how many policy turns have passed
since the start or the last summary rewrite. A ``TimingRule`` reads a moment and says whether
to compact now; it has a ``name`` and a one-line ``description`` (what a report prints).

Every caller builds its moment the same way from what it holds: the env from its context and
trajectory (``AutoCompactSWEEnv.moment``, exact), a model-free agent from its observation
(``Moment.of_messages``: approximate tokens, kept recent turns counted as new).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ac_env.actions import SUMMARY_HEADER
from ac_env.tokens import ApproxTokenCounter

Message = Mapping[str, str]


@dataclass(frozen=True)
class Moment:
    """``messages``: the context as the policy sees it; ``tokens``: its size;
    ``turns_since_compaction``: policy turns since the start or the last summary rewrite."""

    messages: tuple[Message, ...]
    tokens: int
    turns_since_compaction: int

    @classmethod
    def of_messages(cls, messages: Sequence[Message]) -> Moment:
        """The moment an observation shows: tokens counted with ``ApproxTokenCounter``, turns
        counted from the last summary message (or the start)."""
        counter = ApproxTokenCounter()
        tokens = sum(
            counter.count(m["content"]) + counter.message_overhead(m["role"]) for m in messages
        )
        start = 0
        for index, message in enumerate(messages):
            if message["role"] == "user" and message["content"].startswith(SUMMARY_HEADER):
                start = index
        turns = sum(1 for m in messages[start:] if m["role"] == "assistant")
        return cls(tuple(messages), tokens, turns)

    def last_exchange(self) -> tuple[str, str] | None:
        """The last policy turn and the message answering it, when the context ends so."""
        if len(self.messages) < 2:
            return None
        turn, answer = self.messages[-2], self.messages[-1]
        if turn["role"] != "assistant" or answer["role"] != "user":
            return None
        return turn["content"], answer["content"]


@runtime_checkable
class TimingRule(Protocol):
    """Whether to compact at a moment. ``name``: how configs and reports call the rule;
    ``description``: what it does, in one line."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def __call__(self, moment: Moment) -> bool: ...
