"""Command-line flags built from a pydantic config's fields.

``add_fields`` declares ``--field-name`` for each named field of a config: its type, choices
(a ``Literal``), ``nargs`` (a list) and help (the field's description and default) come from
the field, and a ``bool`` becomes ``--name/--no-name``. Every flag defaults to ``None``, so
``given`` returns only what the user set and the config supplies the rest: ``ac-train`` never
re-declares a setting or its default.
"""

from __future__ import annotations

import argparse
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

_PLAIN = (bool, int, float, str, Path)


def add_fields(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    config: type[BaseModel],
    names: Sequence[str],
    flags: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """``--<name>`` (underscores as dashes) for each of ``names``; ``flags`` gives a field
    other option strings instead (the first is the one help shows)."""
    for name in names:
        field = config.model_fields[name]
        kind, choices, many = _argument_type(name, field.annotation)
        options = list((flags or {}).get(name, [f"--{name.replace('_', '-')}"]))
        default = field.get_default(call_default_factory=True)
        shown = "" if default is PydanticUndefined else f" (default: {_shown(default)})"
        text = (field.description or "") + shown
        if kind is bool:
            parser.add_argument(
                *options, dest=name, action=argparse.BooleanOptionalAction, default=None, help=text
            )
            continue
        parser.add_argument(
            *options,
            dest=name,
            type=kind,
            choices=choices,
            nargs="+" if many else None,
            default=None,
            help=text.replace("%", "%%"),
        )


def given(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """The fields among ``names`` that the command line set."""
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def _argument_type(name: str, annotation: Any) -> tuple[type, list[Any] | None, bool]:
    """(argparse type, choices, whether a list) of a field's annotation, ``None`` dropped."""
    if get_origin(annotation) in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        if len(options) == 1:
            return _argument_type(name, options[0])
    elif get_origin(annotation) is Literal:
        choices = list(get_args(annotation))
        return type(choices[0]), choices, False
    elif get_origin(annotation) is list:
        (item,) = get_args(annotation)
        kind, item_choices, _ = _argument_type(name, item)
        return kind, item_choices, True
    elif annotation in _PLAIN:
        return annotation, None, False
    raise TypeError(f"{name}: no command-line flag for a field of type {annotation!r}")


def _shown(value: Any) -> str:
    return "none" if value is None else str(value)
