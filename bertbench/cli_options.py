"""A Typer command's options generated from a config dataclass, so that the class is the one place a setting
is declared (LitGPT's CLI does the same from its dataclasses with jsonargparse).

Each field becomes `--field-name` with the help, panel and default of its metadata (`finetune_settings.setting`);
a field without a default is a required option; list fields are written comma-separated on the command line
(`--seeds 1,2,3`) and parsed back by `parse_values`; fields marked `cli=False` stay out of the CLI.
"""
from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from typing import Annotated, Any, Callable, Optional

import typer

from bertbench.errors import BertbenchError


def _list_item(tp: Any) -> Optional[type]:
    """T for list[T] or Optional[list[T]], else None."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    return typing.get_args(tp)[0] if typing.get_origin(tp) is list else None


def cli_fields(cls, first: tuple[str, ...] = ()) -> list[dataclasses.Field]:
    """The fields that are options, the `first` ones leading (a command's own, before shared settings)."""
    fields = [f for f in dataclasses.fields(cls) if f.metadata.get("cli", True)]
    return sorted(fields, key=lambda f: (f.name not in first, first.index(f.name) if f.name in first else 0))


def options_from(cls, first: tuple[str, ...] = ()) -> Callable[[Callable], Callable]:
    """Decorate `def command(**values)` so that Typer sees one keyword option per field of `cls`."""
    hints = typing.get_type_hints(cls)

    def decorate(fn: Callable) -> Callable:
        params, annotations = [], {}
        for f in cli_fields(cls, first):
            tp = Optional[str] if _list_item(hints[f.name]) is not None else hints[f.name]
            option = typer.Option(
                "--" + f.name.replace("_", "-"), help=f.metadata.get("help") or None, rich_help_panel=f.metadata.get("panel"))
            default = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
            annotations[f.name] = Annotated[tp, option]
            params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=annotations[f.name]))
        fn.__signature__ = inspect.Signature(params, return_annotation=None)
        fn.__annotations__ = {**annotations, "return": None}
        return fn

    return decorate


def parse_values(cls, values: dict[str, Any]) -> dict[str, Any]:
    """The command line's values as the dataclass's types: comma-separated lists become lists."""
    hints = typing.get_type_hints(cls)
    out = {}
    for name, value in values.items():
        item = _list_item(hints[name])
        if item is not None and isinstance(value, str):
            try:
                value = [item(part.strip()) for part in value.split(",") if part.strip()]
            except ValueError:
                flag = "--" + name.replace("_", "-")
                raise BertbenchError(f"{flag} {values[name]!r}: expected comma-separated {item.__name__} values") from None
        out[name] = value
    return out
