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
from collections import Counter
from typing import Annotated, Any, Callable, Optional

import typer

from bertbench.errors import BertbenchError
from bertbench.paths import TASKS_DIR_HELP

# `--tasks-dir` on every command that reads tasks (`finetune` has it from FinetuneRequest's field, same help).
TasksDirOption = Annotated[Optional[str], typer.Option("--tasks-dir", help=TASKS_DIR_HELP)]


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
            option = typer.Option(_flag(f.name), help=f.metadata.get("help") or None,
                                  rich_help_panel=f.metadata.get("panel"))
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
                raise BertbenchError(
                    f"{_flag(name)} {values[name]!r}: expected comma-separated {item.__name__} values") from None
        out[name] = value
    return out


# --- a nested config (PretrainConfig: top-level fields and the fields of its sections) -------------------


@dataclasses.dataclass(frozen=True)
class ConfigOption:
    """One option generated from one field: `param` the Python name Typer passes it as, `path` where its
    value goes in the config (("data", "mask_ratio")), `names` its flags (the first is the field's own)."""

    param: str
    path: tuple[str, ...]
    field: dataclasses.Field
    hint: Any
    names: tuple[str, ...]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _default_text(f: dataclasses.Field) -> str:
    value = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
    if isinstance(value, list):
        return "/".join(map(str, value)) if value else "none"
    if value is None or value == "":
        return "none"
    return str(value)


def config_options(cls) -> list[ConfigOption]:
    """An option for every field of `cls` and of its dataclass sections (`data.mask_ratio` → --mask-ratio;
    a section's field whose name is taken by another gets the section's prefix: `data.seed` → --data-seed).
    A field that cannot be one value on the command line must say cli=False: a new field is never skipped
    silently (TypeError at import)."""
    hints = typing.get_type_hints(cls)
    leaves: list[tuple[tuple[str, ...], dataclasses.Field, Any]] = []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            section_hints = typing.get_type_hints(hints[f.name])
            leaves += [((f.name, g.name), g, section_hints[g.name]) for g in dataclasses.fields(hints[f.name])]
        else:
            leaves.append(((f.name,), f, hints[f.name]))
    counts = Counter(path[-1] for path, _, _ in leaves)
    options = []
    for path, f, hint in leaves:
        if not f.metadata.get("cli", True):
            continue
        param = path[-1] if counts[path[-1]] == 1 or len(path) == 1 else "_".join(path)
        if not f.metadata.get("help"):
            raise TypeError(f"{cls.__name__}: field {'.'.join(path)} has no help text for its option")
        if _list_item(hint) not in (None, str) and f.metadata.get("parse") is None:
            raise TypeError(f"{cls.__name__}: field {'.'.join(path)} needs parse= or cli=False")
        options.append(ConfigOption(param, path, f, hint, (_flag(param), *f.metadata.get("flags", ()))))
    return options


def _typer_parameter(opt: ConfigOption) -> inspect.Parameter:
    meta = opt.field.metadata
    base = opt.hint
    if typing.get_origin(base) in (typing.Union, types.UnionType):
        base = next(a for a in typing.get_args(base) if a is not type(None))
    help_text = f"{meta['help']} (default: {_default_text(opt.field)})"
    if base is bool:  # an on/off pair: --whole-word-mask / --no-whole-word-mask
        names = ["/".join((name, "--no-" + name[2:])) for name in opt.names]
        option = typer.Option(*names, help=help_text, rich_help_panel=meta.get("panel"))
        tp: Any = Optional[bool]
    else:
        option = typer.Option(*opt.names, help=help_text, rich_help_panel=meta.get("panel"))
        tp = Optional[str] if meta.get("parse") else Optional[base]
    return inspect.Parameter(opt.param, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[tp, option])


def with_config_options(cls, own: Callable) -> Callable[[Callable], Callable]:
    """Decorate `def command(**values)`: Typer sees `own`'s parameters (the command's hand-written options)
    followed by one option per field of `cls` (`config_options`), each None unless given."""

    def decorate(fn: Callable) -> Callable:
        hints = typing.get_type_hints(own, include_extras=True)  # the Annotated options, not their strings
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints[p.name])
                  for p in inspect.signature(own).parameters.values()]
        params += [_typer_parameter(opt) for opt in config_options(cls)]
        fn.__signature__ = inspect.Signature(params, return_annotation=None)
        fn.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
        return fn

    return decorate


def config_overrides(cls, values: dict[str, Any]) -> dict[str, Any]:
    """The options given (not None) as a nested mapping of field values: {"max_steps": 20, "data":
    {"mask_ratio": 0.4}}; `parse` turns a field's string into its value."""
    out: dict[str, Any] = {}
    for opt in config_options(cls):
        value = values.get(opt.param)
        if value is None:
            continue
        parse = opt.field.metadata.get("parse")
        if parse is not None:
            value = parse(value)
        elif isinstance(value, tuple):
            value = list(value)
        node = out
        for part in opt.path[:-1]:
            node = node.setdefault(part, {})
        node[opt.path[-1]] = value
    return out


def replace_nested(obj, overrides: dict[str, Any]):
    """`obj` with `overrides` applied, section by section (each dataclass checks itself again)."""
    changes = {}
    for name, value in overrides.items():
        current = getattr(obj, name)
        changes[name] = replace_nested(current, value) if dataclasses.is_dataclass(current) else value
    return dataclasses.replace(obj, **changes)
