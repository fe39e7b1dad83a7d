"""The papers' numbers as data: `paper_numbers.yaml`, loaded into typed records and schema-checked.

Every number carries its system, task, metric, split (`dev` / `test` exactly as the source marks it;
`heldout` for Table 6's perplexity) and source. Uncertain ([U]) numbers are flagged and `find()`
leaves them out unless asked, so a report never shows one unmarked.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Optional

from bertbench.config import OBJECTIVES, model_shape
from bertbench.config_files import load_yaml
from bertbench.errors import BertbenchError

PAPER_NUMBERS_PATH = Path(__file__).resolve().parent / "paper_numbers.yaml"
SCHEMA = 1
SPLITS = ("dev", "test", "heldout")

_TOP_KEYS = {"schema", "sources", "tasks", "metrics", "task_aliases", "metric_aliases", "main_table_sources",
             "columns", "turc_sizes", "turc_source", "glue_score", "numbers"}
_NUMBER_REQUIRED = {"source", "system", "task", "metric", "split", "value"}
_NUMBER_OPTIONAL = {"uncertain", "note", "config"}


@dataclass(frozen=True)
class PaperNumber:
    """One number as a paper prints it, on the paper's 0-100 scale (perplexity as is)."""

    source: str
    system: str
    task: str
    metric: str
    split: str
    value: float
    uncertain: bool = False
    note: Optional[str] = None
    config: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class PaperColumn:
    """A paper column of the main table: its name, the system names that fill it, and the bertbench model
    size of the same shape (None for systems of another architecture)."""

    name: str
    systems: tuple[str, ...]
    size: Optional[str] = None


@dataclass(frozen=True)
class PaperNumbers:
    numbers: tuple[PaperNumber, ...]
    sources: Mapping[str, str]
    tasks: Mapping[str, str]  # paper task key -> display name, in report row order
    metrics: Mapping[str, str]  # paper metric key -> display name
    task_aliases: Mapping[str, str]  # bertbench task name -> paper task key
    metric_aliases: Mapping[str, str]  # record metric name -> paper metric key
    main_table_sources: tuple[str, ...]
    columns: tuple[PaperColumn, ...]
    turc_sizes: Mapping[str, str]  # bertbench size -> Turc et al. system
    turc_source: str
    glue_source: str
    glue_scores: tuple[tuple[str, str, str], ...]  # (paper task, paper metric, GLUE task) averaged by Table 1

    def paper_task(self, task: str) -> Optional[str]:
        """The paper task a bertbench task sits beside, or None when the papers have no such task."""
        key = self.task_aliases.get(task, task)
        return key if key in self.tasks else None

    def paper_metric(self, metric: str) -> str:
        return self.metric_aliases.get(metric, metric)

    def find(self, *, source: Optional[str] = None, system: Optional[str] = None, task: Optional[str] = None,
             metric: Optional[str] = None, split: Optional[str] = None, include_uncertain: bool = False
             ) -> list[PaperNumber]:
        """Numbers matching every given field, in file order; uncertain ones only on request."""
        wanted = {"source": source, "system": system, "task": task, "metric": metric, "split": split}
        return [n for n in self.numbers if (include_uncertain or not n.uncertain)
                and all(v is None or getattr(n, k) == v for k, v in wanted.items())]


def load_paper_numbers(path: Optional[Path] = None) -> PaperNumbers:
    """Load and check the reference numbers (the packaged file by default; cached)."""
    return _load(Path(path) if path is not None else PAPER_NUMBERS_PATH)


@functools.lru_cache(maxsize=4)
def _load(path: Path) -> PaperNumbers:
    data = load_yaml(path)
    problems: list[str] = []
    result = _parse(data, problems)
    if problems:
        shown = "\n  ".join(problems[:20]) + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        raise BertbenchError(f"{path}: {len(problems)} problem(s) in the reference numbers:\n  {shown}")
    assert result is not None
    return result


def _mapping(data: Any, key: str, problems: list[str]) -> dict:
    value = data.get(key)
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        problems.append(f"{key}: expected a mapping with string keys")
        return {}
    return value


def _parse(data: Any, problems: list[str]) -> Optional[PaperNumbers]:
    """Collect every problem (LitGPT style: report them all at once) and build the result."""
    if not isinstance(data, dict):
        problems.append("expected a mapping at the top level")
        return None
    unknown, missing = set(data) - _TOP_KEYS, _TOP_KEYS - set(data)
    if unknown:
        problems.append(f"unknown top-level key(s): {', '.join(sorted(unknown))}")
    if missing:
        problems.append(f"missing top-level key(s): {', '.join(sorted(missing))}")
        return None
    if data["schema"] != SCHEMA:
        problems.append(f"schema {data['schema']!r} is not {SCHEMA}")
    sources, tasks, metrics, task_aliases, metric_aliases, turc_sizes = (
        _mapping(data, key, problems) for key in ("sources", "tasks", "metrics", "task_aliases", "metric_aliases",
                                                   "turc_sizes"))
    for key, aliases, declared, what in (("task_aliases", task_aliases, tasks, "task"),
                                         ("metric_aliases", metric_aliases, metrics, "metric")):
        problems += [f"{key}.{alias}: {target!r} is not a declared {what}" for alias, target in aliases.items()
                     if target not in declared]

    numbers = _numbers(data, sources, tasks, metrics, problems)
    main_sources = tuple(data["main_table_sources"]) if isinstance(data["main_table_sources"], list) else ()
    for src in main_sources:
        if src not in sources:
            problems.append(f"main_table_sources: {src!r} is not a declared source")
    columns = _columns(data, numbers, main_sources, problems)
    turc_source = data["turc_source"]
    if turc_source not in sources:
        problems.append(f"turc_source: {turc_source!r} is not a declared source")
    for size, system in turc_sizes.items():
        if not any(n.system == system and n.source == turc_source for n in numbers):
            problems.append(f"turc_sizes.{size}: no number for system {system!r}")

    glue = data["glue_score"] if isinstance(data["glue_score"], dict) else {}
    glue_scores = _glue_scores(glue, sources, tasks, metrics, problems)

    return PaperNumbers(numbers=tuple(numbers), sources=MappingProxyType(dict(sources)),
                        tasks=MappingProxyType(dict(tasks)), metrics=MappingProxyType(dict(metrics)),
                        task_aliases=MappingProxyType(dict(task_aliases)),
                        metric_aliases=MappingProxyType(dict(metric_aliases)), main_table_sources=main_sources,
                        columns=tuple(columns), turc_sizes=MappingProxyType(dict(turc_sizes)),
                        turc_source=str(turc_source), glue_source=str(glue.get("source")),
                        glue_scores=tuple(glue_scores))


def _numbers(data: dict, sources: dict, tasks: dict, metrics: dict, problems: list[str]) -> list[PaperNumber]:
    """`numbers:`, each checked (`_parse_number`), no entry twice."""
    numbers: list[PaperNumber] = []
    seen: set[tuple] = set()
    raw_numbers = data["numbers"] if isinstance(data["numbers"], list) else []
    if not raw_numbers:
        problems.append("numbers: expected a non-empty list")
    for i, raw in enumerate(raw_numbers):
        number = _parse_number(raw, f"numbers[{i}]", sources, tasks, metrics, problems)
        if number is None:
            continue
        key = (number.source, number.system, number.task, number.metric, number.split,
               tuple(sorted(number.config.items())))
        if key in seen:
            problems.append(f"numbers[{i}]: duplicate of an earlier entry {key[:5]}")
        seen.add(key)
        numbers.append(number)
    return numbers


def _columns(data: dict, numbers: list[PaperNumber], main_sources: tuple, problems: list[str]) -> list[PaperColumn]:
    """`columns:`, each naming systems that a main-table source has numbers for, and a model size if any."""
    columns: list[PaperColumn] = []
    for i, col in enumerate(data["columns"] if isinstance(data["columns"], list) else []):
        if (not isinstance(col, dict) or not {"name", "systems"} <= set(col) <= {"name", "systems", "size"}
                or not isinstance(col["systems"], list)):
            problems.append(f"columns[{i}]: expected {{name: ..., systems: [...]}} and optionally size: ...")
            continue
        systems = tuple(col["systems"])
        if not any(n.system in systems and n.source in main_sources for n in numbers):
            problems.append(f"columns[{i}]: no number of a main-table source has system {systems}")
        if "size" in col:
            try:
                model_shape(col["size"])
            except BertbenchError as e:
                problems.append(f"columns[{i}]: {e}")
        columns.append(PaperColumn(str(col["name"]), systems, col.get("size")))
    return columns


def _glue_scores(glue: dict, sources: dict, tasks: dict, metrics: dict, problems: list[str]) -> list[tuple[str, str, str]]:
    """`glue_score.scores:` [declared task, declared metric, GLUE task] each, from a declared source."""
    glue_scores: list[tuple[str, str, str]] = []
    for item in glue.get("scores") or []:
        if not (isinstance(item, list) and len(item) == 3 and item[0] in tasks and item[1] in metrics):
            problems.append(f"glue_score.scores: {item!r} is not [declared task, declared metric, GLUE task]")
            continue
        glue_scores.append((item[0], item[1], str(item[2])))
    if glue.get("source") not in sources:
        problems.append(f"glue_score.source: {glue.get('source')!r} is not a declared source")
    if not glue_scores:
        problems.append("glue_score.scores: expected a non-empty list")
    return glue_scores


def _parse_number(raw: Any, where: str, sources: dict, tasks: dict, metrics: dict, problems: list[str]
                  ) -> Optional[PaperNumber]:
    if not isinstance(raw, dict):
        problems.append(f"{where}: expected a mapping")
        return None
    before = len(problems)
    missing = _NUMBER_REQUIRED - set(raw)
    unknown = set(raw) - _NUMBER_REQUIRED - _NUMBER_OPTIONAL
    if missing:
        problems.append(f"{where}: missing {', '.join(sorted(missing))}")
        return None
    if unknown:
        problems.append(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    for key, declared in (("source", sources), ("task", tasks), ("metric", metrics)):
        if raw[key] not in declared:
            problems.append(f"{where}: {key} {raw[key]!r} is not declared under `{key}s`")
    if raw["split"] not in SPLITS:
        problems.append(f"{where}: split {raw['split']!r} is not one of {', '.join(SPLITS)}")
    if not isinstance(raw["system"], str) or not raw["system"]:
        problems.append(f"{where}: system must be a non-empty string")
    value = raw["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        problems.append(f"{where}: value {value!r} is not a finite number")
    if not isinstance(raw.get("uncertain", False), bool):
        problems.append(f"{where}: uncertain must be true or false")
    if not isinstance(raw.get("note", ""), str):
        problems.append(f"{where}: note must be a string")
    config = raw.get("config", {})
    if not isinstance(config, dict):
        problems.append(f"{where}: config must be a mapping")
    elif "nsp" in config or ("objective" in config and config["objective"] not in OBJECTIVES):
        # the config's form is ours (config.OBJECTIVES), not the one before the objective said everything
        problems.append(f"{where}: config.objective must be one of {', '.join(OBJECTIVES)} (no nsp key), "
                        f"got {dict(config)}")
    if len(problems) > before:
        return None
    return PaperNumber(source=raw["source"], system=raw["system"], task=raw["task"], metric=raw["metric"],
                       split=raw["split"], value=float(value), uncertain=raw.get("uncertain", False),
                       note=raw.get("note"), config=MappingProxyType(dict(raw.get("config", {}))))


__all__ = ["PAPER_NUMBERS_PATH", "PaperColumn", "PaperNumber", "PaperNumbers", "SPLITS", "load_paper_numbers"]
