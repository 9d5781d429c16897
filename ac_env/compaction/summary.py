"""The working-state summary: its template and its validation.

A summary is Markdown that starts with ``# Auto Context Summary`` and has ``##`` sections.
Three sections are required and must not be empty: what is *known* (confirmed findings), the
*workspace* state (files changed and whether each change is verified, test status), and the
*next* step. Section names are matched case-insensitively with the aliases below, so the
template's long names and short ``## Known`` / ``## Workspace`` / ``## Next`` both validate.
"""

from __future__ import annotations

import re

from ac_env.actions import SUMMARY_HEADER

SUMMARY_TEMPLATE = f"""{SUMMARY_HEADER}
## Task
<the task in one or two sentences, and any constraint from it>
## Known
<confirmed findings: where the bug is and why, with file paths and function names>
## Ruled out
<directions already checked and dismissed>
## Workspace
<files changed so far and whether each change is verified; or 'no changes yet'>
## Tests
<the last test run: command, passed/failed counts, failing test ids>
## Next
<the concrete next action>
"""

REQUIRED_SECTIONS: dict[str, tuple[str, ...]] = {
    "known": ("known", "confirmed findings", "findings", "known facts"),
    "workspace": ("workspace", "workspace state"),
    "next": ("next", "next step", "next steps", "plan"),
}

_SECTION = re.compile(r"^##[ \t]+(.+?)[ \t]*$", re.MULTILINE)


def parse_sections(summary: str) -> dict[str, str]:
    """Section title (lower-cased) -> body text, in order of appearance."""
    matches = list(_SECTION.finditer(summary))
    sections: dict[str, str] = {}
    ends = [m.start() for m in matches[1:]] + [len(summary)]
    for match, end in zip(matches, ends, strict=False):
        sections[match.group(1).strip().lower().rstrip(":")] = summary[match.end() : end].strip()
    return sections


def summary_problems(summary: str) -> list[str]:
    """What makes ``summary`` invalid; empty when it is a valid working-state summary."""
    if not summary.lstrip().startswith(SUMMARY_HEADER):
        return [f"the summary must start with '{SUMMARY_HEADER}'"]
    sections = parse_sections(summary)
    problems = []
    for aliases in REQUIRED_SECTIONS.values():
        bodies = [sections[a] for a in aliases if a in sections]
        if not bodies:
            problems.append(f"missing section '## {aliases[0].capitalize()}'")
        elif not any(bodies):
            problems.append(f"section '## {aliases[0].capitalize()}' is empty")
    return problems
