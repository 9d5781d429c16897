"""What a policy is: a function from the observation (chat messages) to a response.

The env accepts a ``PolicyOutput`` as an action, so both types live with the env core;
``ac_env.agents`` holds the policies themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field


class PolicyOutput(BaseModel):
    """A response, with what the backend knows about how it was generated.

    ``env.step`` accepts it in place of plain text and records every field in the trajectory.
    """

    model_config = ConfigDict(extra="forbid")

    text: str
    prompt_token_ids: list[int] | None = None
    output_token_ids: list[int] | None = None
    output_logprobs: list[float] | None = None
    policy_version: int | None = None
    produced_by: Literal["policy", "judge", "fallback"] = Field(
        default="policy",
        description="'fallback': written by a model-free summarizer (recorded, never trained)",
    )
    rejected_output: str | None = None
    correction: str | None = None


class SamplingConfig(BaseModel):
    """How every model worker samples (``hf:`` in process, ``openai:`` served), so their results
    compare. ``temperature == 0`` is greedy decoding; ``top_p`` applies only when sampling.
    Nothing else shapes the distribution: served dialects switch off their servers' own
    top-k, min-p and repetition penalties."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float = Field(default=0.7, ge=0, description="0: greedy")
    top_p: float = Field(default=1.0, gt=0, le=1, description="nucleus mass when sampling")
    max_new_tokens: int = Field(default=256, gt=0, description="output tokens per model call")
    stop_after_action: bool = Field(
        default=False,
        description="end a response at the close of its first bash block unless it is a "
        "summary (``ac_env.actions.ends_an_action``): what would follow could not change the "
        "action. Terminal format, in-process sampling only",
    )


class Policy(Protocol):
    """Stateless between calls: everything it knows comes from the observation."""

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput: ...


def missing_token_records(output: PolicyOutput) -> list[str]:
    """What a trainer needs of a sampled output that ``output`` lacks: its token ids and their
    log-probs (prompt ids are the chat template's, which the segmenter renders itself)."""
    return [
        name
        for name, value in (
            ("output_token_ids", output.output_token_ids),
            ("output_logprobs", output.output_logprobs),
        )
        if value is None
    ]
