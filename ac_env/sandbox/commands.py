"""What every sandbox refuses to run: commands that no shell could receive as one argument."""

from __future__ import annotations

MAX_COMMAND_BYTES = 128 * 1024
"""Linux refuses a single argument longer than this (MAX_ARG_STRLEN)."""


def command_rejection(command: str) -> str | None:
    """Why ``command`` cannot be passed to ``bash -c``, or None when it can."""
    if "\0" in command:
        return "the command contains a NUL character, which no shell command can hold"
    size = len(command.encode("utf-8", errors="surrogateescape"))
    if size >= MAX_COMMAND_BYTES:
        return f"the command is {size} bytes; a single command may hold {MAX_COMMAND_BYTES}"
    return None
