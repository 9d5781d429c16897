"""What every sandbox refuses to run (commands no shell could receive as one argument), and the
environment every sandbox runs a command in."""

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


def command_env(tmp: str) -> dict[str, str]:
    """The environment every backend gives a command (besides ``PATH``): ``tmp`` as home and
    temp dir, no pager, no system git config, a fixed git identity, unbuffered Python that
    writes no bytecode."""
    identity = {"NAME": "AutoCompact Agent", "EMAIL": "agent@autocompact.invalid"}
    return {
        "HOME": tmp,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
        "GIT_CONFIG_NOSYSTEM": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        **{
            f"GIT_{role}_{key}": value
            for role in ("AUTHOR", "COMMITTER")
            for key, value in identity.items()
        },
    }
