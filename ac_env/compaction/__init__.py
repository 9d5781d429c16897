"""Compaction, in one place. Read the modules in this order:

1. ``summary``: what a working-state summary is (``# Auto Context Summary``, its template, the
   sections it needs) and how it is validated.
2. ``texts``: what the policy is told (the compaction action for each protocol, the rubric,
   the summary requests, the skipped-compaction note, the masking placeholder).
3. ``protocol``: when compaction happens and how a policy asks for it (``Compactor``: the
   proactive, forced and masking triggers, the ``inline`` and ``tool_call`` protocols,
   summary-ignored); the env's ``step`` hands every compaction turn to it.
4. ``rewrite``: what a compaction does to the context (the prefix rewrite, observation
   masking), each starting a new segment.
5. ``fallback``: the summary written without a model when a requested one is invalid.

The benchmark's named baselines (which keywords make ``fixed``, ``self``, ``summary_ignored``,
...) are ``ac_env.strategies``.
"""

from ac_env.compaction.fallback import CommandRecord, extractive_summary, files_read, last_run_line
from ac_env.compaction.protocol import CompactionProtocol, Compactor, Trigger, Turn
from ac_env.compaction.rewrite import Rewrite, mask_observations, rewrite_prefix
from ac_env.compaction.summary import (
    REQUIRED_SECTIONS,
    SUMMARY_TEMPLATE,
    parse_sections,
    summary_problems,
)

__all__ = [
    "REQUIRED_SECTIONS",
    "SUMMARY_TEMPLATE",
    "CommandRecord",
    "CompactionProtocol",
    "Compactor",
    "Rewrite",
    "Trigger",
    "Turn",
    "extractive_summary",
    "files_read",
    "last_run_line",
    "mask_observations",
    "parse_sections",
    "rewrite_prefix",
    "summary_problems",
]
