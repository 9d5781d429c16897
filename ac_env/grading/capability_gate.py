"""The static capability gate: a patch whose added code reaches the interpreter's own machinery
is refused before any of it runs, on the host, from the files' bytes.

For every Python file the graded patch changes or adds, the gate reads the capabilities its
base and patched versions use (``capabilities``: syntax trees only, nothing imported or run)
and compares them, by ``GateMode``:

- ``relative`` (the default): a capability the file's base version already used stays allowed
  in that file (a repository that does reflection is not refused a fix that does more of it);
  its uses in added code are reported as ``allowed``. Any use of a capability the base
  version did not use is refused, wherever it is in the file: a patch that only deletes the
  local ``def exec`` an unchanged line called is refused too. A file the patch adds may use
  what the base versions of the files the patch changes or deletes used (the same code could
  have gone into them: moving a fix or a module into a new file is no new power); a base
  version Python cannot compile allows every capability (it never ran: there is nothing to
  compare with);
- ``strict``: the same, and a use in added code is refused even where the base used it;
- ``off``: nothing is checked.

"Added code" is a use whose statement (a compound statement's header) holds a line the patch
added, or sits next to one it removed.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ac_env.grading.capabilities import CAPABILITIES, UNPARSEABLE, Use, capability_uses

GateMode = Literal["relative", "strict", "off"]
GATED_SUFFIXES = (".py", ".pyw")
"""Files the gate reads: what Python imports as source (``.pyw`` on Windows)."""


class CapabilityUse(BaseModel):
    """One use of a capability in a patched file."""

    model_config = ConfigDict(frozen=True)

    file: str
    line: int
    capability: str
    detail: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.capability} ({self.detail})"


@dataclass(frozen=True)
class GateVerdict:
    """What the gate refused (the patch is rejected when any) and what it allowed because the
    file's base version already used the capability."""

    rejected: list[CapabilityUse] = field(default_factory=list)
    allowed: list[CapabilityUse] = field(default_factory=list)


def gates(path: str) -> bool:
    """Whether the gate reads ``path``."""
    return path.endswith(GATED_SUFFIXES)


def check_patch(
    files: Mapping[str, tuple[bytes | None, bytes]],
    mode: GateMode,
    removed: Mapping[str, bytes] | None = None,
) -> GateVerdict:
    """The verdict on a patch, given for each Python file it changes or adds the base bytes
    (None for an added file) and the patched bytes, and the base bytes of the Python files it
    deletes (``removed``: a module moved to a new file keeps what it used)."""
    if mode == "off":
        return GateVerdict()
    rejected: list[CapabilityUse] = []
    allowed: list[CapabilityUse] = []
    before = {path: _capabilities(base) for path, (base, _) in files.items() if base is not None}
    gone = [_capabilities(base) for base in (removed or {}).values()]
    changed = frozenset().union(*before.values(), *gone)
    for path, (base, patched) in sorted(files.items()):
        base_capabilities = before.get(path, changed)
        touched = _touched_lines(base or b"", patched)
        for use in capability_uses(patched):
            found = CapabilityUse(
                file=path, line=use.line, capability=use.capability, detail=use.detail
            )
            added = _in_added_code(use, touched)
            if use.capability not in base_capabilities or (added and mode == "strict"):
                rejected.append(found)
            elif added:
                allowed.append(found)
    return GateVerdict(rejected=rejected, allowed=allowed)


@functools.lru_cache(maxsize=256)
def _capabilities(base: bytes) -> frozenset[str]:
    """What a base version uses; all capabilities where Python cannot compile it (it never
    ran: there is nothing to compare with). Cached: training grades many patches of one
    task, on the same base files."""
    used = frozenset(use.capability for use in capability_uses(base))
    return frozenset(CAPABILITIES) if UNPARSEABLE in used else used


def _touched_lines(base: bytes, patched: bytes) -> set[int]:
    """Lines of ``patched`` (from 1) the patch added, and those next to a removal. The lines
    both versions begin and end with are matched first; a change in between may be matched
    less tightly than ``git diff`` would (more lines count as added, never fewer)."""
    before, after = base.splitlines(), patched.splitlines()
    head = 0
    while head < min(len(before), len(after)) and before[head] == after[head]:
        head += 1
    tail = 0
    while (
        tail < min(len(before), len(after)) - head
        and before[len(before) - 1 - tail] == after[len(after) - 1 - tail]
    ):
        tail += 1
    touched: set[int] = set()
    middle = difflib.SequenceMatcher(
        None, before[head : len(before) - tail], after[head : len(after) - tail]
    )
    for tag, _, _, start, end in middle.get_opcodes():
        if tag in ("replace", "insert"):
            touched.update(range(head + start + 1, head + end + 1))
        elif tag == "delete":
            touched.update((head + start, head + start + 1))
    return touched


def _in_added_code(use: Use, touched: set[int]) -> bool:
    first, last = use.statement
    return any(line in touched for line in range(min(first, use.line), max(last, use.line) + 1))
