"""Config files: YAML read strictly into dataclasses, and every problem of a file said with its line.

`load_config` reads a recipe (or any YAML) into a config dataclass; `from_dict` builds one from a mapping and stops
at the first problem (the --set path, JSON files); `shape_problems` lists every problem of a mapping at once, and
`key_lines` / `line_of` find the line that wrote each field (task files, recipes). Unknown keys come with a
did-you-mean hint.
"""
from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from pathlib import Path
from typing import Any

from bertbench.errors import BertbenchError, unknown_key

Where = dict[tuple[str, ...], tuple[Path, int]]  # key path in the merged mapping -> (file, line) that set it
Problem = tuple[str, str]  # (field, e.g. "hparams.batch_size"; what is wrong with it)


def coerce_value(value: Any, tp: Any, where: str) -> Any:
    """`value` as type `tp` (nested dataclasses built by `from_dict`); else one error "{where}: expected …"."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        non_none = [a for a in args if a is not type(None)]
        return coerce_value(value, non_none[0], where) if len(non_none) == 1 else value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise BertbenchError(f"{where}: expected a mapping, got {value!r}")
        return from_dict(tp, value, where)
    if origin is list:  # (no config field is a tuple)
        if not isinstance(value, (list, tuple)):
            raise BertbenchError(f"{where}: expected a list, got {value!r}")
        return type(value)(coerce_value(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise BertbenchError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise BertbenchError(f"{where}: expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise BertbenchError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BertbenchError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise BertbenchError(f"{where}: expected a string, got {value!r}")
        return value
    return value


def from_dict(cls, data: dict[str, Any], where: str = "config"):
    """Build dataclass `cls` from `data`; unknown keys raise with a did-you-mean hint."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = [k for k in data if k not in names]
    if unknown:
        msgs = [unknown_key(k, names) for k in unknown]
        raise BertbenchError(f"{where}: " + "; ".join(msgs) + f". Known keys: {', '.join(sorted(names))}")
    hints = typing.get_type_hints(cls)
    kwargs = {k: coerce_value(v, hints[k], f"{where}.{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except TypeError as err:  # a required field missing
        raise BertbenchError(f"{where}: {err}") from None


def deep_merge(base: dict, over: dict) -> dict:
    """`base` with `over`'s keys on top; a mapping over a mapping merges key by key, anything else replaces."""
    out = dict(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _yaml_loader():
    """SafeLoader that reads 5e-5 as a float (YAML 1.1, and so PyYAML, wants 5.0e-5)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$"),
        list("-+0123456789."),
    )
    return Loader


def yaml_error_line(path: Path, err: Exception) -> str:
    """A YAML syntax error as one line with its position ("file:7:3: not valid YAML: expected <block end>, but
    found '-' (while parsing a block mapping)"), not PyYAML's several-line dump with the text quoted."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    at = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    problem = getattr(err, "problem", None)
    if problem is None:
        return f"{at}: not valid YAML: {' '.join(str(err).split())}"
    context = getattr(err, "context", None)
    return f"{at}: not valid YAML: {problem}" + (f" ({context})" if context else "")


def load_yaml(path: Path) -> dict[str, Any]:
    import yaml

    path = Path(path)
    if not path.is_file():
        raise BertbenchError(f"{path}: no such file")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_yaml_loader())  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as err:
        raise BertbenchError(yaml_error_line(path, err)) from None
    except UnicodeDecodeError:
        raise BertbenchError(f"{path}: not UTF-8 text") from None
    if data is None:  # an empty file: defaults everywhere is never what was meant
        raise BertbenchError(f"{path}: empty file (expected a mapping of settings)")
    if not isinstance(data, dict):
        raise BertbenchError(f"{path}: expected a mapping at the top level")
    return data


def load_config(cls, path: Path):
    """A config file as `cls`; every unknown key, missing key and wrong value in it at once (`check_file`)."""
    data = load_yaml(path)
    check_file(cls, data, Path(path))
    return from_dict(cls, data, str(path))


def check_file(cls, data: dict[str, Any], path: Path, prefix: str = "") -> None:
    """Raise one error listing every problem of `data` (read from `path`; at `prefix` in it, "finetune." say) as
    `cls`, each `file:line: field: what is wrong` (as a task file's), in the file's order; a key `path` does not
    write is said at its nearest parent."""
    if problems := shape_problems(cls, data, prefix):
        where = key_lines(path)
        located = sorted((line_of(where, f, path)[1], f, what) for f, what in problems)
        raise BertbenchError("; ".join(f"{path}:{line}: {f}: {what}" for line, f, what in located))


def key_lines(path: Path) -> Where:
    """The line of every mapping key in a YAML file, by key path, and of every list item (`phases[1]`) under a
    key (the file has parsed already)."""
    import yaml

    where: Where = {}

    def walk(node, prefix: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    where[(*prefix, str(key.value))] = (path, key.start_mark.line + 1)
                    walk(value, (*prefix, str(key.value)))
        elif isinstance(node, yaml.SequenceNode) and prefix:
            for i, item in enumerate(node.value):
                where[(*prefix[:-1], f"{prefix[-1]}[{i}]")] = (path, item.start_mark.line + 1)
                walk(item, (*prefix[:-1], f"{prefix[-1]}[{i}]"))

    walk(yaml.compose(path.read_text(encoding="utf-8"), Loader=_yaml_loader()), ())
    return where


def shape_problems(cls, data: dict[str, Any], prefix: str = "", skip: tuple[str, ...] = ()) -> list[Problem]:
    """Every unknown key, missing required key and value of the wrong type in `data` for dataclass `cls`, at
    every level (not only the first one found, as `from_dict` stops at). `skip`: fields the caller says apart."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in skip}
    hints = typing.get_type_hints(cls)
    p: list[Problem] = []
    for key in data:
        if key not in fields and key not in skip:
            close = difflib.get_close_matches(str(key), sorted(fields), n=1, cutoff=0.6)
            p.append((f"{prefix}{key}", f"unknown key (did you mean {close[0]!r}?)" if close
                      else f"unknown key (known: {', '.join(sorted(fields))})"))
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                p.append((f"{prefix}{name}", "missing: a required key"))
            continue
        value, tp = data[name], hints[name]
        inner = [a for a in typing.get_args(tp) if a is not type(None)]  # list[X] or Optional[X]: X
        of_sections = len(inner) == 1 and dataclasses.is_dataclass(inner[0])
        if typing.get_origin(tp) is list:
            if of_sections and isinstance(value, list):  # a list of sections (a recipe's phases): item by item
                for i, item in enumerate(value):
                    p += (shape_problems(inner[0], item, f"{prefix}{name}[{i}].") if isinstance(item, dict)
                          else [(f"{prefix}{name}[{i}]", f"expected a mapping, got {item!r}")])
                continue
            of_sections = False  # not a list: coerce_value says so below
        section = tp if dataclasses.is_dataclass(tp) else inner[0] if of_sections else None
        if section is not None:
            if value is None and section is not tp:
                continue  # an optional section left out (`hub: null` removes an inherited one)
            if not isinstance(value, dict):
                p.append((f"{prefix}{name}", f"expected a mapping, got {value!r}"))
            else:
                p += shape_problems(section, value, f"{prefix}{name}.")
            continue
        try:
            coerce_value(value, tp, f"{prefix}{name}")
        except BertbenchError as err:
            field_, _, what = str(err).partition(": ")
            p.append((field_, what))
    return p


def line_of(where: Where, field_: str, path: Path) -> tuple[Path, int]:
    """The file and line that set `field_` ("hparams.learning_rates[1]"), or its nearest written parent; a key
    written nowhere (a missing one) is said at the top of `path`."""
    # the list item's own line first ("phases[1]"), else the list's
    for parts in (tuple(field_.split(".")), tuple(re.sub(r"\[\d+\]", "", field_).split("."))):
        for n in range(len(parts), 0, -1):
            if parts[:n] in where:
                return where[parts[:n]]
    return path, 1
