"""The text the policy sees around the task: system prompt, task message, tool results."""

from __future__ import annotations

from ac_env.actions import SUMMARY_HEADER
from ac_env.compaction import SUMMARY_TEMPLATE
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

_COMPACT_ACTION = f"""2. Compact your context: reply with a working-state summary that starts with
   `{SUMMARY_HEADER}`. It replaces your earlier history (the task stays, and your edits to the
   repository stay). Write what is known, what the workspace holds now, and what to do next,
   using this template:
{SUMMARY_TEMPLATE}
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

SYSTEM_PROMPT = _INTRO + _COMPACT_ACTION + _finish_action(3) + _RULES

# No compaction action is offered (strategies ``none``, ``fixed``, ``masking``). The template is
# still shown, for the summary the environment requests when a length fallback is configured.
SYSTEM_PROMPT_NO_COMPACTION = (
    _INTRO
    + _finish_action(2)
    + _RULES
    + f"""
If your context grows too long you will be asked for a working-state summary: it starts with
`{SUMMARY_HEADER}` and follows this template:
{SUMMARY_TEMPLATE}"""
)

# When to compact and when not (strategy ``self``, after SelfCompact's rule prompt).
COMPACTION_RUBRIC = """
When to compact (action 2):
- after a phase ends: the bug is located, a fix is verified, or a direction is ruled out;
- when old command outputs (long test logs, file listings, search results) no longer matter;
- when your context holds more than about 12,000 tokens.
When NOT to compact:
- in the middle of an edit-and-test cycle, before the result of a change is known;
- when you compacted a few turns ago and little has happened since;
- when the summary would drop a fact you still need (file paths, line numbers, failing tests).
"""

SYSTEM_PROMPT_WITH_RUBRIC = SYSTEM_PROMPT + COMPACTION_RUBRIC

TASK_TEMPLATE = """Fix the following issue in the repository (the current directory).

<issue>
{problem_statement}
</issue>"""

COMPACTION_REQUEST = f"""Your context is about to exceed its limit. Reply now with a working-state \
summary starting with `{SUMMARY_HEADER}` (sections Known, Workspace, Next at least). It will \
replace your earlier history."""


def task_message(problem_statement: str) -> str:
    return TASK_TEMPLATE.format(problem_statement=problem_statement.strip())


def tool_message(result: ExecResult, timeout_s: float) -> str:
    status = f"[exit code {result.exit_code}]"
    if result.timed_out:
        status += f" [killed: the command ran past its {timeout_s:g} s limit]"
    return f"{status}\n{result.output}" if result.output else f"{status} (no output)"


def format_error_message(problem: str) -> str:
    return f"[format error] {problem}"


COMPACTION_SKIPPED = """[compaction skipped: this run keeps the full history; your summary above \
changed nothing. Continue with your next action.]"""

MASKED_OUTPUT = "[output of an earlier command omitted to save context]"
