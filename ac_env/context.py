"""The chat context an agent sees, with per-message token counts and prefix rewrites.

Each message's tokens are counted once, when it is appended, so a step costs O(new text)
rather than O(context). ``rewrite`` implements compaction: everything after the system and task
messages is replaced by the summary (and, optionally, the last ``keep_recent`` interactions).
Each rewrite starts a new segment: inside a segment the context only grows.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Literal

from ac_env.tokens import TokenCounter

MessageKind = Literal[
    "system",
    "task",
    "action",
    "observation",
    "format_error",
    "summary",
    "compaction_request",
    "compaction_skipped",
]
Role = Literal["system", "user", "assistant"]

_message_ids = itertools.count()

# A request for a summary is never carried across a rewrite.
_NOT_KEPT: tuple[MessageKind, ...] = ("compaction_request",)


@dataclass(frozen=True)
class Message:
    role: Role
    content: str
    kind: MessageKind
    tokens: int
    id: int = field(default_factory=lambda: next(_message_ids))

    def as_chat(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class Rewrite:
    """What a compaction did to the context."""

    rewrite_from: int
    tokens_before: int
    tokens_after: int
    segment: int
    kept_messages: int


class Context:
    """Ordered chat messages; message 0 is the system prompt, message 1 the task."""

    FIXED_PREFIX = 2

    def __init__(self, counter: TokenCounter, system_prompt: str, task_prompt: str) -> None:
        self._counter = counter
        self.messages: list[Message] = []
        self._chat: list[dict[str, str]] = []
        self.tokens = 0
        self.segment = 0
        self.append("system", system_prompt, "system")
        self.append("user", task_prompt, "task")

    def append(self, role: Role, content: str, kind: MessageKind) -> Message:
        tokens = self._counter.count(content) + self._counter.message_overhead(role)
        message = Message(role=role, content=content, kind=kind, tokens=tokens)
        self.messages.append(message)
        self._chat.append(message.as_chat())
        self.tokens += tokens
        return message

    def observation(self) -> tuple[dict[str, str], ...]:
        """The messages as the policy sees them (fresh dicts: callers may mutate them)."""
        return tuple(dict(m) for m in self._chat)

    def rewrite(self, summary: str, keep_recent: int) -> Rewrite:
        """Replace the history after the task message by ``summary`` plus the last
        ``keep_recent`` interactions (an assistant turn and the messages answering it)."""
        tokens_before = self.tokens
        history = [m for m in self.messages[self.FIXED_PREFIX :] if m.kind not in _NOT_KEPT]
        kept = _last_interactions(history, keep_recent)
        self.messages = self.messages[: self.FIXED_PREFIX]
        self._chat = self._chat[: self.FIXED_PREFIX]
        self.tokens = sum(m.tokens for m in self.messages)
        self.append("user", summary, "summary")
        for message in kept:
            self.append(message.role, message.content, message.kind)
        self.segment += 1
        return Rewrite(
            rewrite_from=self.FIXED_PREFIX,
            tokens_before=tokens_before,
            tokens_after=self.tokens,
            segment=self.segment,
            kept_messages=len(kept),
        )

    def mask_observations(self, keep: int, placeholder: str) -> Rewrite | None:
        """Replace the content of every command output but the last ``keep`` by
        ``placeholder`` (observation masking, as SWE-agent does). A replaced message is a new
        message, so the prompt cache breaks at the first one, and the rewrite starts a new
        segment. Returns None when nothing changed."""
        tokens_before = self.tokens
        outputs = [i for i, m in enumerate(self.messages) if m.kind == "observation"]
        stale = outputs[: max(0, len(outputs) - keep)]
        changed = [i for i in stale if self.messages[i].content != placeholder]
        for index in changed:
            old = self.messages[index]
            tokens = self._counter.count(placeholder) + self._counter.message_overhead(old.role)
            self.messages[index] = Message(old.role, placeholder, old.kind, tokens)
            self._chat[index] = self.messages[index].as_chat()
            self.tokens += tokens - old.tokens
        if not changed:
            return None
        self.segment += 1
        return Rewrite(
            rewrite_from=changed[0],
            tokens_before=tokens_before,
            tokens_after=self.tokens,
            segment=self.segment,
            kept_messages=len(self.messages) - self.FIXED_PREFIX,
        )

    def copy(self) -> Context:
        """An independent copy: the same messages (immutable, ids included, so the cost
        meter's cached prefix carries over), token total and segment; appends and rewrites of
        one do not show in the other."""
        twin = copy.copy(self)
        twin.messages = list(self.messages)
        twin._chat = [dict(chat) for chat in self._chat]
        return twin

    def prompt_fingerprint(self) -> list[tuple[int, int]]:
        """(message id, tokens) per message: what the cost meter compares between calls."""
        return [(m.id, m.tokens) for m in self.messages]


def _last_interactions(history: list[Message], count: int) -> list[Message]:
    if count <= 0:
        return []
    starts = [i for i, m in enumerate(history) if m.role == "assistant"]
    if not starts:
        return []
    return history[starts[-count] if count <= len(starts) else starts[0] :]
