"""Typed actions and the parsers that turn a model's text into one.

Terminal format (one action per response):
- exactly one ```` ```bash ```` block runs its command;
- a bash block whose command is exactly ``submit`` ends the episode;
- a response that starts with ``# Auto Context Summary`` is a compaction whose summary is the
  whole response;
- a bash block whose command is exactly ``compact`` is a bare compaction call (the
  ``tool_call`` compaction protocol: the environment then asks for the summary).
Anything else (no action, several actions, not a string) is a ``FormatError``: the
environment shows its message as the observation and counts the step; nothing raises.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

SUMMARY_HEADER = "# Auto Context Summary"
SUBMIT_COMMAND = "submit"
COMPACT_COMMAND = "compact"

_BASH_BLOCK = re.compile(r"```bash[ \t]*\n(.*?)\n?```", re.DOTALL)
_ANY_FENCE = re.compile(r"```")


class Bash(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["bash"] = "bash"
    command: str = Field(min_length=1)

    def render(self) -> str:
        return f"```bash\n{self.command}\n```"


class Compact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["compact"] = "compact"
    summary: str

    def render(self) -> str:
        return self.summary


class CompactCall(BaseModel):
    """A bare ``compact`` call, without a summary (see ``ac_env.compaction.protocol``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["compact_call"] = "compact_call"

    def render(self) -> str:
        return f"```bash\n{COMPACT_COMMAND}\n```"


class Submit(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["submit"] = "submit"

    def render(self) -> str:
        return f"```bash\n{SUBMIT_COMMAND}\n```"


Action = Annotated[Bash | Compact | CompactCall | Submit, Field(discriminator="kind")]
ACTION_TYPES = (Bash, Compact, CompactCall, Submit)
action_adapter: TypeAdapter[Bash | Compact | CompactCall | Submit] = TypeAdapter(Action)


class FormatError(BaseModel):
    """A response that is not exactly one valid action; ``message`` tells the policy why."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["format_error"] = "format_error"
    message: str


ParseResult = Bash | Compact | CompactCall | Submit | FormatError


@runtime_checkable
class ActionParser(Protocol):
    """Turns one raw policy response into an action or a format error. Never raises."""

    def parse(self, response: object) -> ParseResult: ...


def _from_command(command: str) -> Bash | CompactCall | Submit | FormatError:
    if command.strip() == SUBMIT_COMMAND:
        return Submit()
    if command.strip() == COMPACT_COMMAND:
        return CompactCall()
    if not command.strip():
        return FormatError(message="The bash block is empty. Put one command in it.")
    return Bash(command=command)


def ends_an_action(text: str) -> bool:
    """Whether a response in the terminal format is complete once it reads ``text``: it holds a
    closed bash block and is not a summary. Nothing that could follow would change its action:
    more text is ignored, or makes a second block or a misplaced summary (a format error).
    A sampler may stop a response here (``SamplingConfig.stop_after_action``)."""
    return not text.strip().startswith(SUMMARY_HEADER) and _BASH_BLOCK.search(text) is not None


class TerminalParser:
    """The terminal REPL format described in the module docstring."""

    def parse(self, response: object) -> ParseResult:
        if isinstance(response, ACTION_TYPES):
            return response
        if not isinstance(response, str):
            return FormatError(message=f"The action must be text, got {type(response).__name__}.")
        text = response.strip()
        if text.startswith(SUMMARY_HEADER):
            return Compact(summary=text)
        blocks = _BASH_BLOCK.findall(response)
        if SUMMARY_HEADER in response:
            return FormatError(
                message=f"A summary must start the response with '{SUMMARY_HEADER}' and be "
                "the whole response; do not mix it with other text or commands."
            )
        if len(blocks) > 1:
            return FormatError(
                message=f"Found {len(blocks)} bash blocks; send exactly one command per response."
            )
        if not blocks:
            hint = " (a code fence must be opened with ```bash)" if _ANY_FENCE.search(text) else ""
            return FormatError(
                message="No action found: reply with exactly one ```bash block"
                f"{hint}, or with a summary starting '{SUMMARY_HEADER}'."
            )
        return _from_command(blocks[0])


class JSONToolCallParser:
    """Function-calling models: one JSON tool call ``{"name": ..., "arguments": {...}}``
    (``arguments`` may itself be a JSON string, as OpenAI returns it). Tools: ``bash``
    (``command``), ``compact`` (``summary``; without it, a bare compaction call), ``submit``."""

    def parse(self, response: object) -> ParseResult:
        if isinstance(response, ACTION_TYPES):
            return response
        if isinstance(response, str):
            try:
                response = json.loads(response)
            except json.JSONDecodeError as err:
                return FormatError(message=f"The tool call is not valid JSON: {err}.")
        if isinstance(response, list):
            if len(response) != 1:
                return FormatError(
                    message=f"Found {len(response)} tool calls; make exactly one per response."
                )
            response = response[0]
        if not isinstance(response, dict):
            return FormatError(message="A tool call must be a JSON object with 'name'.")
        call: dict[str, Any] = response.get("function", response)
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as err:
                return FormatError(message=f"The tool call's arguments are not valid JSON: {err}.")
        name = call.get("name")
        try:
            if name == "bash":
                return _from_command(str(arguments["command"]))
            if name == "compact" and "summary" not in arguments:
                return CompactCall()
            if name == "compact":
                return Compact(summary=str(arguments["summary"]))
            if name == "submit":
                return Submit()
        except (KeyError, TypeError) as err:
            return FormatError(message=f"Tool '{name}' is missing its argument {err}.")
        except ValidationError as err:
            return FormatError(message=f"Tool '{name}': {err.errors()[0]['msg']}.")
        return FormatError(message=f"Unknown tool {name!r}; the tools are bash, compact, submit.")


def make_parser(spec: str | ActionParser) -> ActionParser:
    """``"terminal"`` (default) or ``"json"``, or a parser object."""
    if not isinstance(spec, str):
        return spec
    parsers: dict[str, type[TerminalParser] | type[JSONToolCallParser]] = {
        "terminal": TerminalParser,
        "json": JSONToolCallParser,
    }
    if spec not in parsers:
        raise ValueError(f"action_parser: unknown parser {spec!r}; valid: {sorted(parsers)}")
    return parsers[spec]()
