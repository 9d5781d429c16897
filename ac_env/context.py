"""The chat context an agent sees: messages with their kind and token count, and a segment index.

Each message's tokens are counted once, when it is appended, so a step costs O(new text)
rather than O(context). Every message knows its ``MessageKind``; the trajectory records the
kinds of every prompt, so the trainer never guesses them back. What a compaction does to the
context (the prefix rewrite, observation masking) is ``ac_env.compaction.rewrite``'s; this
class gives it the primitives (``truncate``, ``replace_content``, ``next_segment``). Inside a
segment the context only grows.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from ac_env.tokens import TokenCounter

MessageKind = Literal[
    "system",  # the system prompt (message 0)
    "task",  # the task statement (message 1)
    "action",  # a model's executed output, as written (kept ones after a rewrite too)
    "observation",  # a command's output with its exit status (or its masking placeholder)
    "format_error",  # the env's reply to an output that is not a valid action
    "summary",  # the working-state summary that opens a segment after a prefix rewrite
    "compaction_request",  # the env asks for the summary (forced, or after a compact call)
    "compaction_skipped",  # the env's note that a compaction was skipped (summary-ignored)
]
MESSAGE_KINDS: tuple[MessageKind, ...] = get_args(MessageKind)
Role = Literal["system", "user", "assistant"]

_message_ids = itertools.count()


@dataclass(frozen=True)
class Message:
    role: Role
    content: str
    kind: MessageKind
    tokens: int
    id: int = field(default_factory=lambda: next(_message_ids))

    def as_chat(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


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

    def kinds(self) -> list[MessageKind]:
        """The kind of each message, in order (recorded with every model call's prompt)."""
        return [m.kind for m in self.messages]

    def truncate(self, length: int) -> None:
        """Drop every message from index ``length`` on (a rewrite then appends the new ones)."""
        self.messages = self.messages[:length]
        self._chat = self._chat[:length]
        self.tokens = sum(m.tokens for m in self.messages)

    def replace_content(self, index: int, content: str) -> None:
        """Message ``index`` with new content, same role and kind. It is a new message (a new
        id), so the prompt cache breaks there."""
        old = self.messages[index]
        tokens = self._counter.count(content) + self._counter.message_overhead(old.role)
        self.messages[index] = Message(old.role, content, old.kind, tokens)
        self._chat[index] = self.messages[index].as_chat()
        self.tokens += tokens - old.tokens

    def next_segment(self) -> int:
        """Start a new segment (after a rewrite); returns its index."""
        self.segment += 1
        return self.segment

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


def kept_messages(held: Sequence[Mapping[str, str]], context: Sequence[Mapping[str, str]]) -> int:
    """How many leading messages of ``held`` (a framework's chat so far) the env's new
    ``context`` keeps unchanged: ``len(held)`` inside a segment, fewer after a prefix rewrite."""
    count = 0
    for mine, theirs in zip(held, context, strict=False):
        if dict(mine) != dict(theirs):
            break
        count += 1
    return count
