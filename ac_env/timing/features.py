"""The timing environment's observation: features of the real context and trajectory.

Every feature lies in [0, 1] (ratios, or counts divided by a scale and clipped):

=====  ==========================  =================================================================
index  name                        value
=====  ==========================  =================================================================
0      context_fraction            context tokens / ``context_window``
1      context_vs_threshold        context tokens / ``TOKEN_SCALE`` (16,384), clipped
2      steps_since_compaction      worker turns since the last compaction (or start) / ``max_steps``
3      steps_fraction              worker turns so far / ``max_steps``
4      cost_spent                  USD spent / budget (``COST_SCALE_USD`` when no budget), clipped
5      budget_left                 1 - USD spent / budget, clipped; 1 when there is no budget
6      cache_warm_fraction         share of the next prompt's tokens the prompt cache holds
7      last_exit_nonzero           1 when the last command exited non-zero
8      last_timed_out              1 when the last command timed out
9      tests_run                   tests in the last completed pytest run / ``TEST_SCALE`` (50)
10     tests_failing_fraction      failing / run in that pytest run (0 when none ran)
11     tests_passing_fraction      passing / run in that pytest run (0 when none ran)
12     tests_seen                  1 once a pytest run completed
13     files_read                  distinct files shown by reading commands / ``FILE_SCALE`` (10)
14     files_changed               files in the workspace diff / ``FILE_SCALE`` (10), clipped
15     compacted                   1 once a compaction (not masking) happened
16     compaction_requested        1 when the env has asked for a forced summary
17-21  last_kind_*                 one-hot kind of the last command: test, read, search, edit, other
22-26  recent_kind_*               share of each kind among the last ``RECENT`` (5) commands
=====  ==========================  =================================================================

A command's kind comes from its text (comment lines skipped): ``edit`` when it writes files
(``sed -i``, a redirect outside a heredoc, ``git checkout``/``apply``, ``patch``, a script's
``write_text(``), else ``test``
when it runs pytest, else ``read``/``search`` by its first word, else ``other``.
"""

from __future__ import annotations

import re
from typing import Literal

import numpy as np

from ac_env.compaction import CommandRecord, files_read
from ac_env.env import AutoCompactSWEEnv
from ac_env.pytest_log import summarize_pytest_output
from ac_env.trajectory import ToolResult

TOKEN_SCALE = 16_384
COST_SCALE_USD = 0.05
TEST_SCALE = 50
FILE_SCALE = 10
RECENT = 5
KINDS = ("test", "read", "search", "edit", "other")
FEATURE_NAMES = (
    "context_fraction",
    "context_vs_threshold",
    "steps_since_compaction",
    "steps_fraction",
    "cost_spent",
    "budget_left",
    "cache_warm_fraction",
    "last_exit_nonzero",
    "last_timed_out",
    "tests_run",
    "tests_failing_fraction",
    "tests_passing_fraction",
    "tests_seen",
    "files_read",
    "files_changed",
    "compacted",
    "compaction_requested",
    *(f"last_kind_{kind}" for kind in KINDS),
    *(f"recent_kind_{kind}" for kind in KINDS),
)
FEATURE_INDEX = {name: index for index, name in enumerate(FEATURE_NAMES)}

_EDIT = re.compile(
    r"sed\s+-i|[^<>&2]>>?\s*(?!/dev/null)[\w./\"']|git\s+(?:checkout|apply|restore)|\bpatch\b"
)
_HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)'?\"?\n.*?^\1$", re.MULTILINE | re.DOTALL)
_READ = {"cat", "head", "tail", "nl", "less", "more", "sed", "awk"}
_SEARCH = {"grep", "rg", "find", "ag", "ls", "tree"}
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/", re.MULTILINE)


def command_kind(command: str) -> str:
    """One of ``KINDS`` (see the module docstring)."""
    lines = [line for line in command.splitlines() if line.strip() and not line.startswith("#")]
    text = "\n".join(lines)
    shell = _HEREDOC.sub("<<", text)  # a heredoc's body is a script's text, not shell
    if _EDIT.search(shell) or "write_text(" in text:
        return "edit"
    if "pytest" in text:
        return "test"
    words = text.split()
    if words[:1] == ["timeout"]:
        words = words[2:]
    first = words[0] if words else ""
    if first in _READ:
        return "read"
    if first in _SEARCH:
        return "search"
    return "other"


def steps_since_compaction(env: AutoCompactSWEEnv) -> int:
    """Worker turns (model calls) since the last summary rewrite, or since the start."""
    assert env.trajectory is not None
    return env.trajectory.turns_since_rewrite()


def changed_files(env: AutoCompactSWEEnv) -> list[str]:
    """Files in the workspace diff (the final patch once the episode has ended)."""
    assert env.trajectory is not None and env.sandbox is not None
    end = env.trajectory.end
    diff = end.patch if end is not None else env.sandbox.diff()
    return list(dict.fromkeys(_DIFF_FILE.findall(diff)))


def features(
    env: AutoCompactSWEEnv, budget_usd: float | Literal["run"] | None = "run"
) -> np.ndarray:
    """The observation vector of ``env``'s current state (see the module docstring).
    ``budget_usd``: the budget the cost features are computed against, ``"run"`` for the
    episode's own (a trained policy is shown the budget it was trained under)."""
    assert env.trajectory is not None
    config = env.config
    tokens = env.context.tokens
    results: list[ToolResult] = env.trajectory.tool_results()
    calls = len(env.trajectory.model_calls())
    spent = env.meter.total.usd
    budget = config.budget_usd if budget_usd == "run" else budget_usd
    prompt = env.context.prompt_fingerprint()
    cached = env.meter.quote(prompt, 0).input_cached
    last = results[-1] if results else None
    tests = next((run for run in map(_pytest_run, reversed(results)) if run is not None), None)
    run, failing, passing = tests if tests else (0, 0, 0)
    commands = [CommandRecord(r.command, r.output, r.exit_code) for r in results]
    kinds = [command_kind(r.command) for r in results]
    recent = kinds[-RECENT:]
    values = [
        tokens / config.context_window,
        tokens / TOKEN_SCALE,
        steps_since_compaction(env) / config.max_steps,
        calls / config.max_steps,
        spent / (budget or COST_SCALE_USD),
        1.0 - spent / budget if budget else 1.0,
        cached / max(1, sum(t for _, t in prompt)),
        float(last is not None and last.exit_code != 0),
        float(last is not None and last.timed_out),
        run / TEST_SCALE,
        failing / run if run else 0.0,
        passing / run if run else 0.0,
        float(tests is not None),
        len(files_read(commands)) / FILE_SCALE,
        len(changed_files(env)) / FILE_SCALE,
        float(any(e.trigger != "masking" for e in env.trajectory.compactions())),
        float(bool(env.context.messages) and env.context.messages[-1].kind == "compaction_request"),
        *(float(bool(kinds) and kinds[-1] == kind) for kind in KINDS),
        *(recent.count(kind) / len(recent) if recent else 0.0 for kind in KINDS),
    ]
    return np.clip(np.asarray(values, dtype=np.float32), 0.0, 1.0)


def _pytest_run(result: ToolResult) -> tuple[int, int, int] | None:
    """(run, failing, passing) of a command's completed pytest run; None otherwise."""
    if "pytest" not in result.command:
        return None
    parsed = summarize_pytest_output(result.output)
    if not parsed.completed:
        return None
    return parsed.passed + parsed.failed, parsed.failed, parsed.passed
