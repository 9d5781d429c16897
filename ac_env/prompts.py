"""The text the policy sees around the task: system prompt, task message, tool results."""

from __future__ import annotations

from ac_env.actions import SUMMARY_HEADER
from ac_env.compaction import SUMMARY_TEMPLATE
from ac_env.sandbox.base import ExecResult

SYSTEM_PROMPT = f"""You are a software engineer fixing a bug in a Python repository.
You work in a terminal: each of your replies is exactly ONE action.

Actions:
1. Run one shell command: reply with one fenced block
```bash
<command>
```
   The command runs in the repository root; you see its exit code and output (long outputs
   are truncated). Each command runs in a fresh shell: `cd` and variables do not persist.
2. Compact your context: reply with a working-state summary that starts with
   `{SUMMARY_HEADER}`. It replaces your earlier history (the task stays, and your edits to the
   repository stay). Write what is known, what the workspace holds now, and what to do next,
   using this template:
{SUMMARY_TEMPLATE}
3. Finish: reply with
```bash
submit
```
   Your changes to the repository, as they are then, are your solution.

Rules: one action per reply; a short THOUGHT line before a command is fine. Edit files with
shell tools (sed, python, cat <<'EOF' > file). Do not modify the tests to make them pass.
"""

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
