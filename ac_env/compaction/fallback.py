"""The fallback summarizer: a working-state summary that needs no model.

When the policy's answer to a summary request is not a valid summary, ``extractive_summary``
writes one from what really happened: the files read, the files the real ``git diff`` shows
changed, the last test run and the last commands. The event records it as
``summarizer="fallback"``; it is never trained.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from ac_env.actions import SUMMARY_HEADER
from ac_env.pytest_log import last_test_run


@dataclass(frozen=True)
class CommandRecord:
    """One executed command and what it printed (the trajectory's tool results)."""

    command: str
    output: str
    exit_code: int


_READ_COMMANDS = {"cat", "head", "tail", "nl", "less", "more", "sed", "awk"}
_SEARCH_COMMANDS = {"grep", "rg", "find", "ag", "git"}
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/", re.MULTILINE)
_SOURCE_FILE = re.compile(r"^[\w./-]+\.(?:py|cfg|toml|ini|txt|json|md|yaml|yml)$")


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def files_read(commands: Sequence[CommandRecord]) -> list[str]:
    """Files shown by reading commands (cat, sed -n, head, ...), first-seen order."""
    seen: dict[str, None] = {}
    for record in commands:
        for part in re.split(r"&&|\|\||;|\||\n", record.command):
            words = _words(part)
            in_place_edit = any(w == "-i" or w.startswith("-i.") for w in words[1:])
            if words and words[0] in _READ_COMMANDS and not in_place_edit:
                for word in words[1:]:
                    if _SOURCE_FILE.match(word):
                        seen.setdefault(word.removeprefix("./"), None)
    return list(seen)


def last_run_line(commands: Sequence[CommandRecord]) -> str | None:
    """The last pytest run: its command, tally line and failing ids."""
    found = last_test_run(commands)
    if found is None:
        return None
    record, run = found
    text = f"`{record.command.strip()}` -> {run.tally_line or f'exit code {record.exit_code}'}"
    if run.failing:
        text += "; failing: " + ", ".join(run.failing[:10])
    return text


def extractive_summary(
    task_statement: str, commands: Sequence[CommandRecord], diff: str, recent: int = 5
) -> str:
    """A working-state summary built only from what happened: the files read, the files the
    real ``git diff`` shows changed, the last test run and the last commands. It is the
    fallback when the policy fails to write a valid summary."""
    changed = list(dict.fromkeys(_DIFF_FILE.findall(diff)))
    tests = last_run_line(commands)
    read = files_read(commands)
    searches = [
        r.command
        for r in commands
        if _words(r.command)[:1] and _words(r.command)[0] in _SEARCH_COMMANDS
    ]
    task_line = task_statement.strip().splitlines()[0] if task_statement.strip() else "(none)"
    if not changed:
        next_step = "locate the bug: reproduce it, read the code the failing path goes through"
    elif tests and "failing:" in tests:
        next_step = "fix the remaining failures, then re-run the tests"
    elif tests:
        next_step = "re-run the full test suite once more, then submit"
    else:
        next_step = "run the tests to verify the change"
    lines = [
        SUMMARY_HEADER,
        "## Task",
        task_line,
        "## Known",
        f"- files read: {', '.join(read) if read else 'none'}",
        f"- searches run: {'; '.join(searches[-5:]) if searches else 'none'}",
        "## Workspace",
        f"- files changed (git diff): {', '.join(changed) if changed else 'no changes yet'}",
        "## Tests",
        f"- {tests or 'no test run yet'}",
        "## Recent commands",
        *[f"- `{r.command.strip()}` (exit {r.exit_code})" for r in commands[-recent:]],
        "## Next",
        f"- {next_step}",
    ]
    return "\n".join(lines)
