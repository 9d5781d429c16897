"""The shell commands that apply or undo one of the reference agent's edits, and the reader
that gets the edit back out of such a command in the history.

An edit replaces a block of lines (usually one) that must still read as the edit expects, so
an edit applied to a file that changed under it fails loudly instead of corrupting it. The
script names the edit in plain constants (``PATH = ...``); that is how the agent recognizes
which edit one of its past commands applied.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Sequence

from ac_env.agents.repairs import Edit

EDIT_END = "AC_EDIT_END"
EDIT_FAILED = "does not hold the text the edit expects"
_EDIT_FIELD = re.compile(r"^(PATH|LINE|OLD|NEW|LABEL|PRIORITY) = (.*)$", re.MULTILINE)


def edit_command(edit: Edit, reverse: bool = False) -> str:
    """The command applying ``edit`` (or undoing it: ``reverse``)."""
    old, new = (edit.new, edit.old) if reverse else (edit.old, edit.new)
    return (
        f"python3 - <<'{EDIT_END}'\n"
        "from pathlib import Path\n"
        f"PATH = {edit.path!r}\n"
        f"LINE = {edit.line}\n"
        f"OLD = {old!r}\n"
        f"NEW = {new!r}\n"
        f"LABEL = {edit.label!r}\n"
        f"PRIORITY = {edit.priority}\n"
        "lines = Path(PATH).read_text().split('\\n')\n"
        "old = OLD.split('\\n')\n"
        "if lines[LINE - 1 : LINE - 1 + len(old)] != old:\n"
        f"    raise SystemExit(f'{{PATH}}:{{LINE}} {EDIT_FAILED}')\n"
        "lines[LINE - 1 : LINE - 1 + len(old)] = NEW.split('\\n')\n"
        "Path(PATH).write_text('\\n'.join(lines))\n"
        f"{EDIT_END}"
    )


def undo_command(edit: Edit, staying: Sequence[Edit]) -> str:
    """The command undoing ``edit``: ``git checkout`` of its file when no edit that stays
    applied (``staying``) is in that file, else the edit in reverse."""
    if any(other.path == edit.path for other in staying):
        return edit_command(edit, reverse=True)
    return f"git checkout -- {shlex.quote(edit.path)}"


def parse_edit(command: str) -> Edit | None:
    """The edit an ``edit_command`` applies, read back from its script's constants."""
    fields = dict(_EDIT_FIELD.findall(command))
    try:
        return Edit(
            path=_literal(fields["PATH"]),
            line=int(fields["LINE"]),
            old=_literal(fields["OLD"]),
            new=_literal(fields["NEW"]),
            label=_literal(fields["LABEL"]),
            priority=int(fields["PRIORITY"]),
        )
    except (KeyError, ValueError, SyntaxError):
        return None


def _literal(text: str) -> str:
    value = ast.literal_eval(text)
    if not isinstance(value, str):
        raise ValueError(text)
    return value
