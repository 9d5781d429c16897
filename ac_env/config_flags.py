"""Command-line flags built from a pydantic config, so a CLI never re-declares its settings.

``add_config_flags(parser, Config)`` adds one ``--field-name`` flag per field (or the name
given in ``flags``): its type, ``nargs="+"`` for a list, the choices of a ``Literal``,
``--name/--no-name`` for a ``bool``, the field's description and default as help. A flag left
out of the command line keeps the model's default (the flag's default is ``argparse.SUPPRESS``),
so ``config_kwargs(args, Config)`` passes only what was given and the model stays the one
source of defaults and validation.
"""

from __future__ import annotations

import argparse
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

_SCALARS = (str, int, float, bool, Path)


def flag_name(field: str, flags: Mapping[str, str]) -> str:
    return flags.get(field, "--" + field.replace("_", "-"))


def _argument_type(annotation: Any, field: str) -> tuple[type, bool, list[Any] | None]:
    """(element type, is a list, choices) of ``X``, ``X | None``, ``list[X]`` or
    ``list[X] | None``, where ``X`` is a scalar or a ``Literal``."""
    if get_origin(annotation) in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        if len(options) == 1:
            return _argument_type(options[0], field)
    if get_origin(annotation) is list:
        element, nested, choices = _argument_type(get_args(annotation)[0], field)
        if not nested and element is not bool:
            return element, True, choices
    if get_origin(annotation) is Literal:
        choices = list(get_args(annotation))
        return type(choices[0]), False, choices
    if annotation in _SCALARS:
        return annotation, False, None
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
        element, is_list, choices = _argument_type(info.annotation, field)
        default = info.get_default(call_default_factory=True)
        shown = " ".join(map(str, default)) if isinstance(default, list) else default
        help_text = f"{info.description or field.replace('_', ' ')} (default: {shown})"
        name = flag_name(field, flags or {})
        if element is bool:
            parser.add_argument(
                name,
                dest=field,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=help_text.replace("%", "%%"),
            )
            continue
        parser.add_argument(
            name,
            dest=field,
            type=element,
            choices=choices,
            nargs="+" if is_list else None,
            default=argparse.SUPPRESS,
            help=help_text.replace("%", "%%"),
        )


def config_kwargs(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The fields of ``model`` given on the command line."""
    return {field: getattr(args, field) for field in model.model_fields if hasattr(args, field)}
