"""The append-only record of an episode, and its JSONL form.

Events, in order: ``ModelCall`` (the exact messages the model saw, its output, the parsed action,
token ids and log-probs when the policy gave them, who produced the executed output), then what
it caused: a ``ToolResult`` or a ``CompactionEvent``; finally one ``EpisodeEnd``. The trainer
cuts segments at ``CompactionEvent``s: it never guesses boundaries by comparing strings.

Every prompt message's kind (``ac_env.context.MessageKind``: system, task, action,
observation, summary, compaction request, ...) is recorded with it (``ModelCall.message_kinds``),
so the trainer reads what each message is instead of guessing it from positions.

On disk a trajectory is JSONL: a header line, then one line per event. A model call's prompt is
stored as the number of leading messages shared with the previous call's prompt plus the new
ones (each with its ``kind``), so a long episode does not cost quadratic space;
``Trajectory.read`` restores it exactly. Files written before kinds were recorded still load:
``_legacy_kinds`` infers them once, at load time (the only place kinds are inferred).

The episode's reward has one source, ``Trajectory.reward``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ac_env.context import MessageKind
from ac_env.cost import CallCost
from ac_env.pytest_log import Outcome

ChatMessage = dict[str, str]
Summarizer = Literal["policy", "judge", "fallback"]


class ModelCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["model_call"] = "model_call"
    step: int
    segment: int
    messages: list[ChatMessage] = Field(description="the exact prompt the model saw")
    message_kinds: list[MessageKind] = Field(description="the kind of each prompt message")
    output: str = Field(description="the executed output, as written")
    action: dict[str, Any] = Field(description="the parsed action or format error")
    produced_by: Literal["policy", "judge", "fallback"] = "policy"
    rejected_output: str | None = Field(
        default=None, description="the policy's candidate a judge replaced"
    )
    correction: str | None = Field(default=None, description="the judge's correction type")
    prompt_token_ids: list[int] | None = None
    output_token_ids: list[int] | None = None
    output_logprobs: list[float] | None = None
    policy_version: int | None = None
    forced_compaction_request: bool = False
    context_tokens: int
    cost: CallCost

    @model_validator(mode="after")
    def _one_kind_per_message(self) -> ModelCall:
        if len(self.message_kinds) != len(self.messages):
            raise ValueError(
                f"{len(self.message_kinds)} message_kinds for {len(self.messages)} messages"
            )
        return self


class ToolResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["tool_result"] = "tool_result"
    step: int
    command: str
    output: str
    exit_code: int
    timed_out: bool
    truncated: bool
    duration_s: float


class CompactionEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["compaction"] = "compaction"
    step: int
    trigger: Literal["proactive", "forced", "masking"]
    summarizer: Summarizer | Literal["none"] = Field(
        description="'none' for masking: old outputs replaced by a placeholder, no summary"
    )
    summary: str
    rewrite_from: int
    segment_before: int
    segment_after: int
    tokens_before: int
    tokens_after: int
    kept_messages: int


class EpisodeEnd(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["episode_end"] = "episode_end"
    step: int
    exit_reason: str
    submitted: bool
    reward: float | None
    resolved: bool | None
    infra_error: str | None
    patch: str
    tests: dict[str, Outcome]
    """The grade's outcome per graded test (``GradeResult.tests``)."""
    cost: CallCost


Event = Annotated[
    ModelCall | ToolResult | CompactionEvent | EpisodeEnd, Field(discriminator="kind")
]


class TrajectoryHeader(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["header"] = "header"
    instance_id: str
    split: str
    config: dict[str, Any] = Field(default_factory=dict)
    seed: int | None = None


class _Line(BaseModel):
    event: Event


class TrajectoryFormatError(ValueError):
    """A trajectory file line that does not parse; the message names the file and line."""


class Trajectory:
    """Append-only list of events under a header."""

    def __init__(self, header: TrajectoryHeader) -> None:
        self.header = header
        self.events: list[ModelCall | ToolResult | CompactionEvent | EpisodeEnd] = []

    def append(self, event: ModelCall | ToolResult | CompactionEvent | EpisodeEnd) -> None:
        self.events.append(event)

    def model_calls(self) -> list[ModelCall]:
        return [e for e in self.events if isinstance(e, ModelCall)]

    def compactions(self) -> list[CompactionEvent]:
        return [e for e in self.events if isinstance(e, CompactionEvent)]

    def tool_results(self) -> list[ToolResult]:
        return [e for e in self.events if isinstance(e, ToolResult)]

    def turns_since_rewrite(self) -> int:
        """Model calls since the last summary rewrite (masking does not count), or since the
        start."""
        calls = len(self.model_calls())
        rewrites = [e for e in self.compactions() if e.trigger != "masking"]
        return calls - (rewrites[-1].step + 1) if rewrites else calls

    @property
    def end(self) -> EpisodeEnd | None:
        last = self.events[-1] if self.events else None
        return last if isinstance(last, EpisodeEnd) else None

    @property
    def reward(self) -> float | None:
        """The episode's reward: the grade at its end; None when it has no end or grading
        failed (an infrastructure error, never a silent 0)."""
        end = self.end
        if end is None or end.infra_error is not None:
            return None
        return end.reward

    # ---- JSONL -------------------------------------------------------------------------------

    def to_jsonl(self) -> str:
        lines = [self.header.model_dump_json()]
        previous: list[ChatMessage] = []
        for event in self.events:
            record = event.model_dump(mode="json", exclude={"message_kinds"})
            if isinstance(event, ModelCall):
                prompt = [
                    {**message, "kind": kind}
                    for message, kind in zip(event.messages, event.message_kinds, strict=True)
                ]
                shared = _shared_prefix(previous, prompt)
                record["messages"] = {"shared": shared, "new": prompt[shared:]}
                previous = prompt
            lines.append(json.dumps(record, ensure_ascii=False))
        return "\n".join(lines) + "\n"

    def write(self, path: str | Path) -> None:
        """Write atomically: a reader never sees half a trajectory."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_jsonl(), encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def from_jsonl(cls, text: str, source: str = "<string>") -> Trajectory:
        lines = text.splitlines()
        if not lines:
            raise TrajectoryFormatError(f"{source}: empty trajectory")
        try:
            trajectory = cls(TrajectoryHeader.model_validate_json(lines[0]))
        except ValidationError as err:
            raise TrajectoryFormatError(f"{source}:1: {_first_error(err)}") from err
        previous: list[ChatMessage] = []
        summarized = False  # for _legacy_kinds: a summary rewrite happened before this call
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if record.get("kind") == "model_call":
                    packed = record["messages"]
                    prompt = previous[: packed["shared"]] + packed["new"]
                    previous = prompt
                    record["messages"] = [{k: m[k] for k in ("role", "content")} for m in prompt]
                    if all("kind" in m for m in prompt):
                        record["message_kinds"] = [m["kind"] for m in prompt]
                    else:
                        record["message_kinds"] = _legacy_kinds(record, summarized)
                elif record.get("kind") == "compaction":
                    summarized = summarized or record.get("trigger") != "masking"
                event = _Line.model_validate({"event": record}).event
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise TrajectoryFormatError(f"{source}:{number}: {err}") from err
            except ValidationError as err:
                raise TrajectoryFormatError(f"{source}:{number}: {_first_error(err)}") from err
            trajectory.append(event)
        return trajectory

    @classmethod
    def read(cls, path: str | Path) -> Trajectory:
        return cls.from_jsonl(Path(path).read_text(encoding="utf-8"), source=str(path))


def _shared_prefix(before: list[ChatMessage], now: list[ChatMessage]) -> int:
    shared = 0
    for a, b in zip(before, now, strict=False):
        if a != b:
            break
        shared += 1
    return shared


def _legacy_kinds(call: dict[str, Any], summarized: bool) -> list[MessageKind]:
    """The message kinds of a model call read from a file written before kinds were recorded,
    inferred from the structure the env gave every prompt then: the system prompt and the task
    first; after a summary rewrite (``summarized``) the summary as message 2; assistant turns
    are actions; the last message of a call that answered a forced request is that request;
    user turns are command outputs, or the env's format-error and skipped-compaction notes."""
    messages: list[ChatMessage] = call["messages"]
    kinds: list[MessageKind] = []
    for index, message in enumerate(messages):
        content = message["content"]
        if index == 0:
            kinds.append("system")
        elif index == 1:
            kinds.append("task")
        elif index == 2 and summarized:
            kinds.append("summary")
        elif message["role"] == "assistant":
            kinds.append("action")
        elif content.startswith("[format error] "):
            kinds.append("format_error")
        elif content.startswith("[compaction skipped:"):
            kinds.append("compaction_skipped")
        else:
            kinds.append("observation")
    if call.get("forced_compaction_request") and len(kinds) > 2:
        kinds[-1] = "compaction_request"
    return kinds


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"] if p != "event")
    return f"{where}: {first['msg']}" if where else first["msg"]
