"""Command-line flags built from a pydantic config, so a CLI never re-declares its settings.

``add_config_flags(parser, Config)`` adds one ``--field-name`` flag per field (or the name
given in ``flags``): its type, ``nargs="+"`` for a list, the field's description and default
as help. A flag left out of the command line keeps the model's default (the flag's default
is ``argparse.SUPPRESS``), so ``config_kwargs(args, Config)`` passes only what was given and
the model stays the one source of defaults and validation.
"""

from __future__ import annotations

import argparse
import types
from collections.abc import Mapping
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

_SCALARS = (str, int, float)


def flag_name(field: str, flags: Mapping[str, str]) -> str:
    return flags.get(field, "--" + field.replace("_", "-"))


def _argument_type(annotation: Any, field: str) -> tuple[type, bool]:
    """(element type, is a list) of ``X``, ``X | None``, ``list[X]`` or ``list[X] | None``."""
    if get_origin(annotation) in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        if len(options) == 1:
            return _argument_type(options[0], field)
    if get_origin(annotation) is list and get_args(annotation)[0] in _SCALARS:
        return get_args(annotation)[0], True
    if annotation in _SCALARS:
        return annotation, False
    raise TypeError(f"{field}: no command-line flag for a field of type {annotation!r}")


def add_config_flags(
    parser: argparse.ArgumentParser,
    model: type[BaseModel],
    flags: Mapping[str, str] | None = None,
    skip: tuple[str, ...] = (),
) -> None:
    """One flag per field of ``model`` except ``skip``; ``flags`` renames some
    (``{"task_source": "--source"}``)."""
    for field, info in model.model_fields.items():
        if field in skip:
            continue
        element, is_list = _argument_type(info.annotation, field)
        default = info.get_default(call_default_factory=True)
        shown = " ".join(map(str, default)) if isinstance(default, list) else default
        help_text = f"{info.description or field.replace('_', ' ')} (default: {shown})"
        parser.add_argument(
            flag_name(field, flags or {}),
            dest=field,
            type=element,
            nargs="+" if is_list else None,
            default=argparse.SUPPRESS,
            help=help_text.replace("%", "%%"),
        )


def config_kwargs(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The fields of ``model`` given on the command line."""
    return {field: getattr(args, field) for field in model.model_fields if hasattr(args, field)}
