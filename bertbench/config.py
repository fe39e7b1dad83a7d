"""Typed configuration: dataclasses for model, pre-training and fine-tuning, loaded from YAML recipes.

Unknown keys are errors with a did-you-mean hint; every run directory stores the resolved config
(`save_config`), so a run can always be reproduced from its own folder.
"""
from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from bertbench.errors import BertbenchError

# layers / hidden / heads of the released small BERTs (Turc et al.) and the paper's two models.
MODEL_SIZES: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}


@dataclass
class ModelConfig:
    """The encoder's shape. Field names follow the BERT paper; `hf_compat` maps them to transformers'."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    dropout: float = 0.1
    attention_dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    pad_token_id: int = 0
    causal: bool = False  # True: left-to-right attention (the paper's "LTR" baseline, GPT's bet)

    @classmethod
    def from_size(cls, size: str, **overrides: Any) -> "ModelConfig":
        if size not in MODEL_SIZES:
            from bertbench.errors import did_you_mean

            raise BertbenchError(did_you_mean(size, MODEL_SIZES, "model size"))
        layers, hidden, heads = MODEL_SIZES[size]
        base = dict(num_layers=layers, hidden_size=hidden, num_heads=heads, intermediate_size=4 * hidden)
        base.update(overrides)
        return cls(**base)

    def size_name(self) -> str:
        for name, (l, h, a) in MODEL_SIZES.items():
            if (l, h, a) == (self.num_layers, self.hidden_size, self.num_heads):
                return name
        return f"L{self.num_layers}-H{self.hidden_size}"

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_heads:
            raise BertbenchError(f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")


# ----------------------------------------------------------------------------------------------
# Generic dict <-> dataclass conversion with strict keys.


def _field_types(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _coerce(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        non_none = [a for a in args if a is not type(None)]
        return _coerce(value, non_none[0], where) if len(non_none) == 1 else value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise BertbenchError(f"{where}: expected a mapping, got {value!r}")
        return from_dict(tp, value, where)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise BertbenchError(f"{where}: expected a list, got {value!r}")
        inner = args[0] if args else Any
        return type(value)(_coerce(v, inner, f"{where}[{i}]") for i, v in enumerate(value)) if origin is list else tuple(
            _coerce(v, args[min(i, len(args) - 1)] if args and args[-1] is not Ellipsis else args[0], f"{where}[{i}]")
            for i, v in enumerate(value)
        )
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
        msgs = []
        for k in unknown:
            close = difflib.get_close_matches(k, names, n=1, cutoff=0.6)
            msgs.append(f"unknown key {k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise BertbenchError(f"{where}: " + "; ".join(msgs) + f". Known keys: {', '.join(sorted(names))}")
    hints = _field_types(cls)
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except TypeError as err:  # a required field missing
        raise BertbenchError(f"{where}: {err}") from None


def to_dict(obj) -> dict[str, Any]:
    return dataclasses.asdict(obj)


def apply_overrides(obj, overrides: list[str]):
    """`--set key=value` / `--set section.key=value`: YAML-parse the value, strict keys."""
    import yaml

    data = to_dict(obj)
    for item in overrides:
        if "=" not in item:
            raise BertbenchError(f"--set {item!r}: expected key=value")
        key, raw = item.split("=", 1)
        node = data
        parts = key.split(".")
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                raise BertbenchError(f"--set {item!r}: {p!r} is not a section")
            node = node[p]
        node[parts[-1]] = yaml.safe_load(raw)
    return from_dict(type(obj), data, "--set")


def load_yaml(path: Path) -> dict[str, Any]:
    import yaml

    path = Path(path)
    if not path.is_file():
        raise BertbenchError(f"{path}: no such file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise BertbenchError(f"{path}: not valid YAML: {err}") from None
    except UnicodeDecodeError:
        raise BertbenchError(f"{path}: not UTF-8 text") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise BertbenchError(f"{path}: expected a mapping at the top level")
    return data


def load_config(cls, path: Path):
    return from_dict(cls, load_yaml(path), str(path))


def save_config(obj, path: Path) -> None:
    """Write the resolved config as YAML (atomically: never a half-written file)."""
    import yaml

    from bertbench.io_utils import atomic_write_text

    atomic_write_text(Path(path), yaml.safe_dump(to_dict(obj), sort_keys=False))
