"""Names and paths that come from data (task files, mined libraries, records, command lines)
are never trusted: ids must match ``SAFE_NAME``, and every file written under an output
directory is placed there by ``safe_child``, which refuses anything that would land outside.

``SAFE_NAME``: 1 to 128 characters, letters, digits, ``.``, ``_`` and ``-``, starting with a
letter or a digit, and no ``..`` anywhere. It holds SWE-bench's ids
(``django__django-11099``), the built-in suite's (``synthetic__calc-easy-train-3``) and
the miner's (``toolz-1.2.0__3f2a9c01de``); as a single path component it can never name a
parent, a hidden file, or another directory.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class UnsafePathError(ValueError):
    """A path built from data would leave its directory."""


def check_name(value: str, field: str = "instance_id") -> str:
    """``value`` when it matches ``SAFE_NAME``; else ValueError naming ``field`` and the rule."""
    if not SAFE_NAME.fullmatch(value) or ".." in value:
        raise ValueError(
            f"{field} {value[:200]!r} is not a safe name: 1-128 letters, digits, '.', '_' or "
            "'-', starting with a letter or digit, without '..'"
        )
    return value


def safe_child(root: str | os.PathLike[str], *parts: str) -> Path:
    """``root`` joined with ``parts`` (relative paths, ``/`` allowed inside one), resolved
    (symlinks already on disk followed) and checked to lie strictly below resolved ``root``;
    raises ``UnsafePathError`` naming the path otherwise (an absolute part, ``..`` climbing
    out, a NUL, a symlink leading elsewhere)."""
    base = Path(root).resolve()
    joined = "/".join(parts)
    if "\0" in joined or any(Path(part).is_absolute() for part in parts):
        raise UnsafePathError(f"path {joined!r} must be relative and hold no NUL")
    target = base.joinpath(*parts).resolve()
    if target == base or not target.is_relative_to(base):
        raise UnsafePathError(f"path {joined!r} leads outside {base}")
    return target
