"""What a compaction does to the context: the prefix rewrite, and observation masking.

Both start a new segment and return a ``Rewrite``; the env records it as a
``CompactionEvent``. Neither touches the workspace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ac_env.compaction.texts import MASKED_OUTPUT
from ac_env.context import Context, Message, MessageKind

# A request for a summary is never carried across a rewrite.
_NOT_KEPT: tuple[MessageKind, ...] = ("compaction_request",)


@dataclass(frozen=True)
class Rewrite:
    """What a compaction did to the context."""

    rewrite_from: int
    tokens_before: int
    tokens_after: int
    segment: int
    kept_messages: int


def rewrite_prefix(
    context: Context,
    summary: str,
    keep_recent: int,
    too_large: Callable[[Context], bool] | None = None,
) -> Rewrite:
    """Replace the history after the task message by ``summary`` (kind ``summary``) plus the
    last ``keep_recent`` interactions (an assistant turn and the messages answering it; they
    keep their kinds). ``too_large``: a context that would at once ask for another summary
    (the forced trigger's rule); the oldest kept interactions are dropped, one at a time, until
    the context is not, or none is kept."""
    tokens_before = context.tokens
    fixed = Context.FIXED_PREFIX
    history = [m for m in context.messages[fixed:] if m.kind not in _NOT_KEPT]
    for keep in range(keep_recent, -1, -1):
        kept = _last_interactions(history, keep)
        context.truncate(fixed)
        context.append("user", summary, "summary")
        for message in kept:
            context.append(message.role, message.content, message.kind)
        if keep == 0 or too_large is None or not too_large(context):
            break
    return Rewrite(
        rewrite_from=fixed,
        tokens_before=tokens_before,
        tokens_after=context.tokens,
        segment=context.next_segment(),
        kept_messages=len(kept),
    )


def mask_observations(context: Context, keep: int) -> Rewrite | None:
    """Replace the content of every command output but the last ``keep`` by
    ``MASKED_OUTPUT`` (observation masking, as SWE-agent does). A replaced message is a new
    message, so the prompt cache breaks at the first one. Returns None when nothing changed."""
    tokens_before = context.tokens
    outputs = [i for i, m in enumerate(context.messages) if m.kind == "observation"]
    stale = outputs[: max(0, len(outputs) - keep)]
    changed = [i for i in stale if context.messages[i].content != MASKED_OUTPUT]
    if not changed:
        return None
    for index in changed:
        context.replace_content(index, MASKED_OUTPUT)
    return Rewrite(
        rewrite_from=changed[0],
        tokens_before=tokens_before,
        tokens_after=context.tokens,
        segment=context.next_segment(),
        kept_messages=len(context.messages) - Context.FIXED_PREFIX,
    )


def _last_interactions(history: Sequence[Message], count: int) -> list[Message]:
    if count <= 0:
        return []
    starts = [i for i, m in enumerate(history) if m.role == "assistant"]
    if not starts:
        return []
    return list(history[starts[-count] if count <= len(starts) else starts[0] :])
