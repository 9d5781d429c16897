"""The text the policy sees around the task: system prompt, task message, tool results.

What it is told about compaction (the action, the rubric, requests) is in
``ac_env.compaction.texts``; ``system_prompt`` puts the pieces together."""

from __future__ import annotations

from typing import Literal

from ac_env.compaction.protocol import CompactionProtocol
from ac_env.compaction.texts import (
    COMPACTION_RUBRIC,
    INLINE_ACTION,
    NOT_OFFERED,
    TOOL_CALL_ACTION,
)
from ac_env.sandbox.base import ExecResult

_INTRO = """You are a software engineer fixing a bug in a Python repository.
You work in a terminal: each of your replies is exactly ONE action.

Actions:
1. Run one shell command: reply with one fenced block
```bash
<command>
```
   The command runs in the repository root; you see its exit code and output (long outputs
   are truncated). Each command runs in a fresh shell: `cd` and variables do not persist.
"""


def _finish_action(number: int) -> str:
    return f"""{number}. Finish: reply with
```bash
submit
```
   Your changes to the repository, as they are then, are your solution.
"""


_RULES = """
Rules: one action per reply; a short THOUGHT line before a command is fine. Edit files with
shell tools (sed, python, cat <<'EOF' > file). Do not modify the tests to make them pass.
"""


def system_prompt(
    compaction: Literal["offered", "rubric", "not_offered"] = "offered",
    protocol: CompactionProtocol = "inline",
) -> str:
    """The system prompt: the actions (compaction in the form ``protocol`` takes, unless it
    is not offered: the template is then shown for a forced request), and the rules; the
    ``rubric`` adds when to compact and when not."""
    if compaction == "not_offered":
        return _INTRO + _finish_action(2) + _RULES + NOT_OFFERED
    action = INLINE_ACTION if protocol == "inline" else TOOL_CALL_ACTION
    rubric = COMPACTION_RUBRIC if compaction == "rubric" else ""
    return _INTRO + action + _finish_action(3) + _RULES + rubric


SYSTEM_PROMPT = system_prompt("offered")
SYSTEM_PROMPT_WITH_RUBRIC = system_prompt("rubric")
SYSTEM_PROMPT_NO_COMPACTION = system_prompt("not_offered")

TASK_TEMPLATE = """Fix the following issue in the repository (the current directory).

<issue>
{problem_statement}
</issue>"""


def task_message(problem_statement: str) -> str:
    return TASK_TEMPLATE.format(problem_statement=problem_statement.strip())


def tool_message(result: ExecResult, timeout_s: float) -> str:
    status = f"[exit code {result.exit_code}]"
    if result.timed_out:
        status += f" [killed: the command ran past its {timeout_s:g} s limit]"
    return f"{status}\n{result.output}" if result.output else f"{status} (no output)"


def format_error_message(problem: str) -> str:
    return f"[format error] {problem}"
