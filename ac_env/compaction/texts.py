"""What the policy is told about compaction: the action's description in the system prompt
(one per protocol), the rubric of the ``self`` strategy, the request for a summary, the note
that a compaction was skipped, and the placeholder of a masked output."""

from __future__ import annotations

from ac_env.actions import COMPACT_COMMAND, SUMMARY_HEADER
from ac_env.compaction.summary import SUMMARY_TEMPLATE

INLINE_ACTION = f"""2. Compact your context: reply with a working-state summary that starts with
   `{SUMMARY_HEADER}`. It replaces your earlier history (the task stays, and your edits to the
   repository stay). Write what is known, what the workspace holds now, and what to do next,
   using this template:
{SUMMARY_TEMPLATE}
"""

TOOL_CALL_ACTION = f"""2. Compact your context: reply with
```bash
{COMPACT_COMMAND}
```
   You are then asked for a working-state summary that starts with `{SUMMARY_HEADER}`; it
   replaces your earlier history (the task stays, and your edits to the repository stay).
   Write what is known, what the workspace holds now, and what to do next, using this
   template:
{SUMMARY_TEMPLATE}
"""

# No compaction action is offered (strategies ``none``, ``fixed``, ``masking``). The template is
# still shown, for the summary the environment requests when a length fallback is configured.
NOT_OFFERED = f"""
If your context grows too long you will be asked for a working-state summary: it starts with
`{SUMMARY_HEADER}` and follows this template:
{SUMMARY_TEMPLATE}"""

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

# The forced request: the context passed the length threshold.
COMPACTION_REQUEST = f"""Your context is about to exceed its limit. Reply now with a working-state \
summary starting with `{SUMMARY_HEADER}` (sections Known, Workspace, Next at least). It will \
replace your earlier history."""

# The answer to a bare ``compact`` call (protocol ``tool_call``).
WORKING_STATE_REQUEST = f"""Compacting. Reply now with your working-state summary starting with \
`{SUMMARY_HEADER}` (sections Known, Workspace, Next at least). It will replace your earlier \
history."""

# Summary-ignored: the compaction was skipped and nothing was rewritten.
COMPACTION_SKIPPED = """[compaction skipped: this run keeps the full history, nothing was \
summarized or replaced. Continue with your next action.]"""

MASKED_OUTPUT = "[output of an earlier command omitted to save context]"
