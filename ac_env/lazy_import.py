"""What the registries' ``"module:function"`` strings name, imported only when used (a
sandbox backend's factory, a task source's loader), so a registry lists every entry without
importing any backend's dependencies."""

from __future__ import annotations

import importlib
from typing import Any


def import_target(target: str) -> Any:
    """The object ``"package.module:name"`` names; a ValueError when the string has no ``:``,
    ImportError or AttributeError when the module or name does not exist."""
    module, colon, name = target.partition(":")
    if not colon or not module or not name:
        raise ValueError(f"{target!r}: expected 'module:name'")
    return getattr(importlib.import_module(module), name)
