"""Trajectory -> segments: token ids with a typed per-token mask, for SFT and GRPO.

A trajectory is cut at every ``CompactionEvent`` (never by comparing strings). Inside a segment
the prompt only grows, so one token sequence holds all of the segment's model calls: the last
call's prompt plus its output, with every earlier output of the segment at its position. Each
token gets a ``TokenKind``; what is trained is decided from the kinds:

- SFT trains ``POLICY_OUTPUT`` and ``JUDGE_OUTPUT`` (optionally without format-error outputs);
- GRPO trains ``POLICY_OUTPUT`` only: a judge's replacement was never sampled by the policy.

Prompt tokens are typed from the message kinds the trajectory recorded with every prompt
(``ModelCall.message_kinds``), never from positions. A summary is trained once, as the last
output of the segment that wrote it; in the next segment it is a ``summary`` message of the
prompt and is ``SUMMARY_COPY`` (context only). A fallback summary was written by no model, so
it is never trained. Tool output is never trained.

A segment carries no reward: the episode's reward is ``Trajectory.reward`` (one source), and
the learner gives every segment of a trajectory that trajectory's advantage.

Token ids: a call's recorded ``prompt_token_ids`` / ``output_token_ids`` are used when the
policy gave them (no re-rendering drift); otherwise the tokenizer's chat template renders them.
Each call's prompt must be a token prefix of the segment's sequence (earlier output included).
When it is not (a chat template that rewrites earlier turns, or a sampled output whose decoded
text re-tokenizes differently), ``prefix_mismatch="raise"`` raises ``PrefixMismatchError``
naming the trajectory, step and first differing token; ``"split"`` starts a new sequence (the
next ``part`` of the same segment) at that call, so every trained token still sits in exactly
the context it was generated in.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from tqdm import tqdm

from ac_env.context import MessageKind
from ac_env.trajectory import CompactionEvent, ModelCall, Trajectory

PrefixMismatch = Literal["raise", "split"]


class TokenKind(IntEnum):
    """What one token of a segment is. Only the two ``*_OUTPUT`` kinds of models are trained."""

    PROMPT_SCAFFOLD = 0
    """System prompt, task, chat-template tokens, a request for a summary."""
    TOOL_OUTPUT = 1
    """The environment's reply to an action: command output with its status, format errors,
    the note that a compaction was skipped."""
    SUMMARY_COPY = 2
    """The summary that opens a segment after a rewrite (written in the previous segment)."""
    HISTORY_COPY = 3
    """An earlier model output kept as context: ``keep_recent`` interactions after a rewrite,
    or an output trained in an earlier part of the same segment."""
    POLICY_OUTPUT = 4
    """An executed output the policy sampled in this segment."""
    JUDGE_OUTPUT = 5
    """An executed output a judge wrote in place of the policy's."""
    FALLBACK_OUTPUT = 6
    """An executed output no model wrote (``produced_by="fallback"``)."""


SFT_TRAINED = frozenset({TokenKind.POLICY_OUTPUT, TokenKind.JUDGE_OUTPUT})
GRPO_TRAINED = frozenset({TokenKind.POLICY_OUTPUT})
IGNORE_INDEX = -100

# The token kind of each recorded message kind's content; an assistant message is
# HISTORY_COPY unless the sequence trains it (then it is one of the *_OUTPUT kinds).
_MESSAGE_TOKEN_KIND: dict[MessageKind, TokenKind] = {
    "system": TokenKind.PROMPT_SCAFFOLD,
    "task": TokenKind.PROMPT_SCAFFOLD,
    "compaction_request": TokenKind.PROMPT_SCAFFOLD,
    "summary": TokenKind.SUMMARY_COPY,
    "action": TokenKind.HISTORY_COPY,
    "observation": TokenKind.TOOL_OUTPUT,
    "format_error": TokenKind.TOOL_OUTPUT,
    "compaction_skipped": TokenKind.TOOL_OUTPUT,
}

_OUTPUT_KIND = {
    "policy": TokenKind.POLICY_OUTPUT,
    "judge": TokenKind.JUDGE_OUTPUT,
    "fallback": TokenKind.FALLBACK_OUTPUT,
}


class OutputSpan(BaseModel):
    """Where one model call's executed output lies in ``Segment.input_ids``: ``[start, end)``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step: int
    start: int
    end: int
    produced_by: Literal["policy", "judge", "fallback"]
    format_error: bool
    """Not a valid action for its turn: a format error, or an answer to a summary request
    (forced, or after a ``compact`` call) that was not a valid summary (the fallback summary
    replaced it)."""
    policy_version: int | None = None
    forced_summary: bool = False
    """A summary that answered a forced-compaction request."""


class Segment(BaseModel):
    """One training sequence: a segment (or, after a prefix split, one part of it).

    ``input_ids``, ``token_kinds`` and ``behaviour_logprobs`` are aligned. ``behaviour_logprobs``
    holds the sampler's log-prob of each policy-output token when the policy recorded it, else
    ``None``. ``policy_version`` is the oldest version among the segment's policy outputs
    (what a staleness bound checks).
    """

    model_config = ConfigDict(extra="forbid")

    trajectory_id: str
    instance_id: str
    segment_index: int
    part: int = 0
    input_ids: list[int]
    token_kinds: list[TokenKind]
    behaviour_logprobs: list[float | None]
    outputs: list[OutputSpan]
    policy_version: int | None

    @model_validator(mode="after")
    def _aligned(self) -> Segment:
        n = len(self.input_ids)
        if len(self.token_kinds) != n or len(self.behaviour_logprobs) != n:
            raise ValueError(
                f"input_ids ({n}), token_kinds ({len(self.token_kinds)}) and behaviour_logprobs "
                f"({len(self.behaviour_logprobs)}) must have the same length"
            )
        for span in self.outputs:
            if not 0 <= span.start <= span.end <= n:
                raise ValueError(
                    f"output of step {span.step} [{span.start}, {span.end}) is out "
                    f"of the sequence (length {n})"
                )
        return self

    @property
    def id(self) -> str:
        """``<trajectory_id>/<segment_index>.<part>``: unique, and names its trajectory."""
        return f"{self.trajectory_id}/{self.segment_index}.{self.part}"

    def sft_mask(self, train_format_errors: bool = True) -> list[bool]:
        """Trained by SFT: policy and judge outputs (format-error outputs if asked)."""
        mask = [kind in SFT_TRAINED for kind in self.token_kinds]
        if not train_format_errors:
            for span in self.outputs:
                if span.format_error:
                    mask[span.start : span.end] = [False] * (span.end - span.start)
        return mask

    def sft_labels(self, train_format_errors: bool = True) -> list[int]:
        """``input_ids`` where SFT trains, ``-100`` elsewhere (unshifted, as HF models expect)."""
        mask = self.sft_mask(train_format_errors)
        return [t if m else IGNORE_INDEX for t, m in zip(self.input_ids, mask, strict=True)]

    def grpo_mask(self) -> list[bool]:
        """Trained by GRPO: on-policy tokens only (never a judge's replacement)."""
        return [kind in GRPO_TRAINED for kind in self.token_kinds]


class SegmentationError(ValueError):
    """A trajectory that cannot be cut into consistent token sequences; the message says where."""


class PrefixMismatchError(SegmentationError):
    """A call's prompt is not a token prefix of its segment's sequence."""


# ---- chat rendering ------------------------------------------------------------------------


class ChatRenderer:
    """The tokenizer's chat template, as a policy applies it: render to text, then encode
    without adding special tokens (``TransformersPolicy.prompt_token_ids`` does the same)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.special_ids = frozenset(int(i) for i in tokenizer.all_special_ids)

    def text(self, messages: Sequence[Mapping[str, str]], generation_prompt: bool) -> str:
        chat = [{"role": m["role"], "content": m["content"]} for m in messages]
        return str(
            self.tokenizer.apply_chat_template(
                chat, tokenize=False, add_generation_prompt=generation_prompt
            )
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        return self.encode(self.text(messages, generation_prompt=True))

    def prompt_ids_and_kinds(
        self, messages: Sequence[Mapping[str, str]], content_kinds: Sequence[TokenKind]
    ) -> tuple[list[int], list[TokenKind]]:
        """The prompt's ids, each token typed by the message content it starts in
        (``content_kinds[i]`` for message ``i``) or ``PROMPT_SCAFFOLD`` for template text."""
        text = self.text(messages, generation_prompt=True)
        spans = self._content_spans(messages, text)
        encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        starts = [start for start, _ in spans]
        kinds = []
        for token_start, _ in encoded["offset_mapping"]:
            index = bisect.bisect_right(starts, token_start) - 1
            inside = index >= 0 and token_start < spans[index][1]
            kinds.append(content_kinds[index] if inside else TokenKind.PROMPT_SCAFFOLD)
        return list(encoded["input_ids"]), kinds

    def output_ids(
        self, messages: Sequence[Mapping[str, str]], prompt_ids: list[int], output: str
    ) -> list[int]:
        """The ids of an assistant turn holding ``output``: its content tokens plus the
        template's end-of-turn token (a special token right after the content), the token a
        model must generate to stop."""
        prompt_text = self.text(messages, generation_prompt=True)
        turn = {"role": "assistant", "content": output}
        text = self.text([*messages, turn], generation_prompt=False)
        if not text.startswith(prompt_text + output):
            raise SegmentationError(
                "the chat template does not render an assistant turn as the generation prompt "
                "followed by the output verbatim; recorded output_token_ids are needed"
            )
        encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = encoded["input_ids"], encoded["offset_mapping"]
        position = _first_difference(prompt_ids, ids)
        if position is not None:
            raise SegmentationError(
                f"the prompt's tokens change when the assistant turn is appended (token "
                f"{position}); the template or tokenizer merges across the turn boundary"
            )
        content_end = len(prompt_text) + len(output)
        output_ids: list[int] = []
        for token, (start, _) in zip(
            ids[len(prompt_ids) :], offsets[len(prompt_ids) :], strict=True
        ):
            if start < content_end:
                output_ids.append(token)
                continue
            if token in self.special_ids:
                output_ids.append(token)
            break
        return output_ids

    def _content_spans(
        self, messages: Sequence[Mapping[str, str]], text: str
    ) -> list[tuple[int, int]]:
        """Character span of each message's content in ``text``: the template is rendered
        again with a unique marker per content, and the text between markers is matched."""
        marked = [{"role": m["role"], "content": _marker(i)} for i, m in enumerate(messages)]
        template = self.text(marked, generation_prompt=True)
        spans = []
        in_template = in_text = 0
        for i, message in enumerate(messages):
            marker_at = template.find(_marker(i), in_template)
            scaffold = template[in_template:marker_at]
            content = message["content"]
            content_start = in_text + len(scaffold)
            if (
                marker_at < 0
                or not text.startswith(scaffold, in_text)
                or not text.startswith(content, content_start)
            ):
                raise SegmentationError(
                    f"the chat template does not copy message {i} ({message['role']}) verbatim"
                )
            spans.append((content_start, content_start + len(content)))
            in_template = marker_at + len(_marker(i))
            in_text = content_start + len(content)
        if text[in_text:] != template[in_template:]:
            raise SegmentationError(
                "the chat template renders the text after the last message "
                "differently depending on content"
            )
        return spans


def _marker(index: int) -> str:
    return f"\ue000{index}\ue001"


def _first_difference(expected: list[int], actual: list[int]) -> int | None:
    """First index where ``actual`` stops starting with ``expected``; None if it does."""
    if actual[: len(expected)] == expected:
        return None
    for index, (a, b) in enumerate(zip(expected, actual, strict=False)):
        if a != b:
            return index
    return len(actual)  # actual is a strict prefix of expected


# ---- cutting -------------------------------------------------------------------------------


@dataclass
class _Group:
    """The model calls of one segment."""

    index: int
    calls: list[ModelCall]


@dataclass
class _CallTokens:
    call: ModelCall
    prompt_ids: list[int]
    output_ids: list[int]


def segment_trajectory(
    trajectory: Trajectory,
    tokenizer: Any,
    *,
    run_id: str | None = None,
    prefix_mismatch: PrefixMismatch = "raise",
) -> list[Segment]:
    """Cut ``trajectory`` into segments (see the module docstring).

    ``tokenizer`` must be the one the policy used (its chat template renders calls without
    recorded ids, and types every prompt token). ``run_id`` tells apart runs of the same task;
    by default it is a hash of the trajectory's content.
    """
    run_id = run_id or hashlib.sha1(trajectory.to_jsonl().encode()).hexdigest()[:12]
    trajectory_id = f"{trajectory.header.instance_id}:{run_id}"
    renderer = ChatRenderer(tokenizer)
    instance = trajectory.header.instance_id
    segments = []
    for group in _groups(trajectory, trajectory_id):
        tokens = [_call_tokens(call, renderer, trajectory_id) for call in group.calls]
        for part, piece in enumerate(_pieces(tokens, prefix_mismatch, trajectory_id)):
            segments.append(_segment(piece, group, part, renderer, trajectory_id, instance))
    return segments


def _groups(trajectory: Trajectory, trajectory_id: str) -> list[_Group]:
    groups = [_Group(0, [])]
    for event in trajectory.events:
        if isinstance(event, CompactionEvent):
            if event.segment_before != groups[-1].index:
                raise SegmentationError(
                    f"trajectory {trajectory_id}: compaction at step {event.step} leaves segment "
                    f"{event.segment_before}, but segment {groups[-1].index} is open"
                )
            groups.append(_Group(event.segment_after, []))
        elif isinstance(event, ModelCall):
            if event.segment != groups[-1].index:
                raise SegmentationError(
                    f"trajectory {trajectory_id}: step {event.step} says segment {event.segment}, "
                    f"but the compaction events put it in segment {groups[-1].index}"
                )
            groups[-1].calls.append(event)
    return [group for group in groups if group.calls]


def _call_tokens(call: ModelCall, renderer: ChatRenderer, trajectory_id: str) -> _CallTokens:
    prompt_ids = call.prompt_token_ids
    if prompt_ids is None:
        prompt_ids = renderer.prompt_ids(call.messages)
    output_ids = call.output_token_ids
    try:
        if output_ids is None:
            output_ids = renderer.output_ids(call.messages, prompt_ids, call.output)
        else:
            decoded = renderer.tokenizer.decode(output_ids, skip_special_tokens=True)
            if decoded != call.output:
                raise SegmentationError(
                    "its recorded output_token_ids do not decode to its output text "
                    f"({decoded[:40]!r}... vs {call.output[:40]!r}...)"
                )
    except SegmentationError as err:
        raise SegmentationError(f"trajectory {trajectory_id}, step {call.step}: {err}") from err
    logprobs = call.output_logprobs
    if logprobs is not None and len(logprobs) != len(output_ids):
        raise SegmentationError(
            f"trajectory {trajectory_id}, step {call.step}: {len(logprobs)} output_logprobs "
            f"for {len(output_ids)} output tokens"
        )
    return _CallTokens(call, list(prompt_ids), list(output_ids))


def _pieces(
    tokens: list[_CallTokens], prefix_mismatch: PrefixMismatch, trajectory_id: str
) -> list[list[_CallTokens]]:
    """Consecutive calls whose prompts extend the previous call's prompt + output."""
    pieces = [[tokens[0]]]
    for previous, current in itertools.pairwise(tokens):
        expected = previous.prompt_ids + previous.output_ids
        position = _first_difference(expected, current.prompt_ids)
        if position is None:
            pieces[-1].append(current)
            continue
        if prefix_mismatch == "raise":
            found = current.prompt_ids[position] if position < len(current.prompt_ids) else "end"
            raise PrefixMismatchError(
                f"trajectory {trajectory_id}: the prompt of step {current.call.step} is not a "
                f"token prefix of its segment's sequence (step {previous.call.step}'s prompt + "
                f"output): first difference at token {position} (expected "
                f"{expected[position]}, found {found}). A chat template that rewrites earlier "
                "turns, or an output whose text re-tokenizes differently, does this; "
                "prefix_mismatch='split' starts a new sequence there instead"
            )
        pieces.append([current])
    return pieces


def _segment(
    piece: list[_CallTokens],
    group: _Group,
    part: int,
    renderer: ChatRenderer,
    trajectory_id: str,
    instance_id: str,
) -> Segment:
    last = piece[-1]
    content_kinds = [_MESSAGE_TOKEN_KIND[kind] for kind in last.call.message_kinds]
    rendered, kinds = renderer.prompt_ids_and_kinds(last.call.messages, content_kinds)
    if rendered != last.prompt_ids:
        position = _first_difference(rendered, last.prompt_ids)
        raise SegmentationError(
            f"trajectory {trajectory_id}, step {last.call.step}: the recorded prompt_token_ids "
            f"differ from this tokenizer's chat template at token "
            f"{len(rendered) if position is None else position}; segment with the tokenizer the "
            "policy used"
        )
    input_ids = last.prompt_ids + last.output_ids
    kinds = kinds + [TokenKind.PROMPT_SCAFFOLD] * len(last.output_ids)
    logprobs: list[float | None] = [None] * len(input_ids)
    spans = []
    for item in piece:
        call = item.call
        start = len(item.prompt_ids)
        stop = start + len(item.output_ids)
        kinds[start:stop] = [_OUTPUT_KIND[call.produced_by]] * (stop - start)
        if call.produced_by == "policy" and call.output_logprobs is not None:
            logprobs[start:stop] = call.output_logprobs
        spans.append(
            OutputSpan(
                step=call.step,
                start=start,
                end=stop,
                produced_by=call.produced_by,
                format_error=_is_format_error(call),
                policy_version=call.policy_version,
                forced_summary=call.forced_compaction_request
                and call.action.get("kind") == "compact",
            )
        )
    versions = [
        s.policy_version
        for s in spans
        if s.produced_by == "policy" and s.policy_version is not None
    ]
    return Segment(
        trajectory_id=trajectory_id,
        instance_id=instance_id,
        segment_index=group.index,
        part=part,
        input_ids=input_ids,
        token_kinds=kinds,
        behaviour_logprobs=logprobs,
        outputs=spans,
        policy_version=min(versions) if versions else None,
    )


def _is_format_error(call: ModelCall) -> bool:
    """A format error, or an answer to a summary request that is not a valid summary."""
    kind = call.action.get("kind")
    requested = call.message_kinds[-1:] == ["compaction_request"]
    return kind == "format_error" or (requested and kind != "compact")


# ---- many trajectories, and the JSONL form ---------------------------------------------------


def segment_files(
    paths: Iterable[str | Path],
    tokenizer: Any,
    *,
    prefix_mismatch: PrefixMismatch = "raise",
    progress: bool = True,
) -> Iterator[Segment]:
    """Segments of every trajectory file (``.jsonl``, one trajectory each; a directory means
    its ``*.jsonl`` files), with a progress bar. The run id is the file's path."""
    files = expand_trajectory_paths(paths)
    for path in tqdm(files, desc="segmenting", unit="traj", disable=not progress):
        trajectory = Trajectory.read(path)
        yield from segment_trajectory(
            trajectory, tokenizer, run_id=str(path), prefix_mismatch=prefix_mismatch
        )


def expand_trajectory_paths(paths: Iterable[str | Path]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(path.glob("*.jsonl")))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"trajectory path {path} does not exist")
    return files


def write_segments(segments: Iterable[Segment], path: str | Path) -> int:
    """Write one segment per line (atomically); returns how many."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as out:
        for segment in segments:
            out.write(segment.model_dump_json() + "\n")
            count += 1
    tmp.replace(path)
    return count


def read_segments(path: str | Path) -> list[Segment]:
    segments = []
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                segments.append(Segment.model_validate_json(line))
            except ValidationError as err:
                first = err.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise SegmentationError(f"{path}:{number}: {where}: {first['msg']}") from err
    return segments


__all__ = [
    "GRPO_TRAINED",
    "IGNORE_INDEX",
    "SFT_TRAINED",
    "ChatRenderer",
    "OutputSpan",
    "PrefixMismatchError",
    "Segment",
    "SegmentationError",
    "TokenKind",
    "expand_trajectory_paths",
    "read_segments",
    "segment_files",
    "segment_trajectory",
    "write_segments",
]
