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


class Policy(Protocol):
    """Stateless between calls: everything it knows comes from the observation."""

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput: ...
