"""Result records: the hand-off between fine-tuning and `bertbench report`. Their format (schema version 2),
every key and the rules a writer must know: docs/records.md.

One writer, one reader, for each output of a run: a result record is `ResultRecord`, written only by
`write_record` (grid points that lost a selection too, as `*.grid.json`) and read only by `read_record`
(`load_records` reads through it); a pre-training summary is `PretrainSummary`, written only by
`write_summary` and read only by `read_summary`. Each refuses an older format in one line naming the commit
that reads it (FORMATS_COMMIT). Neither file holds an absolute path (`portable_path`). A new top-level key is a
field of `ResultRecord` and an entry of `_TOP` or `_TOP_OPTIONAL` (a test checks that the two agree).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, TypedDict, Union

from bertbench.config import OBJECTIVES, is_masked
from bertbench.errors import BertbenchError, did_you_mean
from bertbench.runtime import provenance as prov
from bertbench.runtime.files import atomic_write_json

SCHEMA_VERSION = 2
# The last commit that reads the older formats (version-1 records, summaries with `nsp` or `*_std` held-out keys):
# an older file is refused with this name, to read it with that commit.
FORMATS_COMMIT = "37ba1e8"  # a commit, not a tag: a tag would not travel with a clone of main
RECORD_SUFFIX = ".record.json"
GRID_SUFFIX = ".grid.json"  # a grid point that lost the selection: kept for inspection, never reported
EVAL_KINDS = ("dev", "devsplit", "test")


class FinetuneInfo(TypedDict, total=False):
    """`finetune`: the first seven keys are required (`_FINETUNE`), the rest are what `bertbench finetune` writes."""

    lr: float
    epochs: Optional[float]
    batch_size: int
    max_seq_len: int
    max_steps: Optional[int]
    max_train_examples: Optional[int]
    precision: str
    max_eval_examples: Optional[int]
    approach: str  # "fine-tuning" | "feature-based"
    grid: str  # "none" | "heldout" | "paper"
    steps: int  # optimiser steps of the model the record scores
    epochs_trained: float  # those steps in epochs: below `epochs` where --max-steps cut the run short
    warmup_fraction: float
    weight_decay: float
    batching: str  # "length-grouped" | "random"
    selected_epoch: int  # with epoch selection only
    steps_trained: int  # with epoch selection only: every epoch's steps
    selection: dict[str, Any]  # with a grid only: how the lr (and epoch) was chosen


# A record in its file form (`ResultRecord.to_json()`, validated): what readers, the report first, work with.
Record = dict[str, Any]


@dataclass(frozen=True)
class LoadedRecord:
    """A validated record and the file it came from (for error messages and provenance)."""

    path: Path
    data: Record


@dataclass
class ResultRecord:
    """One result record as `bertbench finetune` makes it (its writer, reader and keys: the module docstring)."""

    task: str
    task_version: int
    task_type: str
    split: dict[str, Any]  # its keys and their kinds: _SPLIT (docs/records.md)
    metrics: dict[str, Optional[float]]
    primary_metric: str
    model: dict[str, Any]  # _MODEL, _MODEL_OPTIONAL; model.pretraining: _PRETRAINING; model.external: _EXTERNAL
    finetune: FinetuneInfo
    seed: int
    wall_seconds: Optional[float]
    code_version: str
    library_versions: dict[str, str]
    hardware: Optional[str]
    date: str
    predictions_file: Optional[str] = None
    extra: dict[str, Any] = field(default_factory=dict)
    pretrain_seed: Optional[int] = None
    # A pre-registered study's run: {"sha256": of its pre-registration, "registered_at": when it was written}
    # (bertbench.registration); None (absent) outside one.
    preregistration: Optional[dict[str, str]] = None
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        """The record as its file holds it (`pretrain_seed` and `preregistration` only when known)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for key in ("pretrain_seed", "preregistration"):
            if out[key] is None:
                del out[key]
        return out


def _without_machine_paths(obj: dict) -> dict:
    """The record's paths as `portable_path` keeps them: model.source, pretraining.run_dir and .external, and
    an external model's name_or_path."""
    model = obj.get("model")
    if not isinstance(model, dict):
        return obj
    model = dict(model)
    if isinstance(model.get("source"), str):
        model["source"] = portable_path(model["source"], keep=3)
    if isinstance(model.get("pretraining"), dict):
        pre = dict(model["pretraining"])
        for key in ("run_dir", "external"):
            if isinstance(pre.get(key), str):
                pre[key] = portable_path(pre[key])
        model["pretraining"] = pre
    external = model.get("external")
    if isinstance(external, dict) and isinstance(external.get("name_or_path"), str):
        model["external"] = {**external, "name_or_path": portable_path(external["name_or_path"])}
    return {**obj, "model": model}


def portable_path(path: Optional[str], keep: int = 2) -> Optional[str]:
    """A path as a record or summary keeps it: never absolute (that would name this machine's folders). A
    relative path stays; an absolute one keeps its last `keep` parts, e.g. a study's `pretrain/NAME`, which is
    where the report looks for a run's curves above the records (report.render.plots.find_metrics_csv)."""
    if path is None:
        return None
    p = Path(path)
    return p.as_posix() if not p.is_absolute() else Path(*p.parts[-keep:]).as_posix()


# --- validation -----------------------------------------------------------------------------------

_STR, _INT, _NUM, _BOOL, _DICT = "a string", "an integer", "a number", "true/false", "a mapping"
_TYPES = {_STR: str, _INT: int, _NUM: (int, float), _BOOL: bool, _DICT: dict}
_TOP = {  # key -> (kind, nullable)
    "schema_version": (_INT, False), "task": (_STR, False), "task_version": (_INT, False),
    "task_type": (_STR, False), "split": (_DICT, False), "metrics": (_DICT, False),
    "primary_metric": (_STR, False), "model": (_DICT, False), "finetune": (_DICT, False),
    "seed": (_INT, False), "wall_seconds": (_NUM, True), "code_version": (_STR, False),
    "library_versions": (_DICT, False), "hardware": (_STR, True), "date": (_STR, False),
    "predictions_file": (_STR, True),
}
_TOP_OPTIONAL = {"extra": (_DICT, False), "pretrain_seed": (_INT, True), "preregistration": (_DICT, False)}
_SPLIT = {"train": (_STR, False), "eval": (_STR, False), "eval_kind": (_STR, False),
          "train_size": (_INT, False), "eval_size": (_INT, False)}
_MODEL = {"source": (_STR, False), "fingerprint": (_STR, False), "size": (_STR, False), "pretraining": (_DICT, True)}
_MODEL_OPTIONAL = {"external": (_DICT, False)}
_EXTERNAL = {"format": (_STR, False), "name": (_STR, False), "name_or_path": (_STR, True),
             "architectures": (None, True), "transformers_version": (_STR, True), "shape": (_DICT, False),
             "weights_file": (_STR, True)}
_EXTERNAL_OPTIONAL = {"model_type": (_STR, True), "tokenizer": (_STR, True)}  # architecture, tokenizer kind (issue 57)
_EXTERNAL_SHAPE = {"layers": (_INT, False), "hidden": (_INT, False), "heads": (_INT, False),
                   "intermediate": (_INT, False), "vocab": (_INT, False), "max_position": (_INT, False)}
_FINETUNE = {"lr": (_NUM, False), "epochs": (_NUM, True), "batch_size": (_INT, False), "max_seq_len": (_INT, False),
             "max_steps": (_INT, True), "max_train_examples": (_INT, True), "precision": (_STR, False)}
_PRETRAINING = {"objective": (_STR, False), "mask_ratio": (_NUM, True),
                "mask_procedure": (None, True), "whole_word_mask": (_BOOL, True), "tokens_seen": (_INT, True),
                "wall_seconds": (_NUM, True), "data_fingerprint": (_STR, True), "code_version": (_STR, True),
                "hardware": (_STR, True), "run_dir": (_STR, True), "heldout": (_DICT, True)}


def _is(value: Any, kind: Optional[str]) -> bool:
    if kind is None:
        return True
    if isinstance(value, bool) and kind in (_INT, _NUM):  # an int to Python, never to a record
        return False
    return isinstance(value, _TYPES[kind]) and (kind != _NUM or math.isfinite(value))


def _check_section(obj: dict, spec: dict, prefix: str, problems: list[str], *, strict: bool,
                   optional: Optional[dict] = None) -> None:
    optional = optional or {}
    for key, (kind, nullable) in spec.items():
        if key not in obj:
            problems.append(f"missing required key '{prefix}{key}'")
        elif obj[key] is None:
            if not nullable:
                problems.append(f"{prefix}{key} is null")
        elif not _is(obj[key], kind):
            problems.append(f"{prefix}{key} must be {kind}, got {obj[key]!r}")
    for key, (kind, nullable) in optional.items():
        if key in obj and not (obj[key] is None and nullable) and not _is(obj[key], kind):
            problems.append(f"{prefix}{key} must be {kind}, got {obj[key]!r}")
    if strict:
        known = set(spec) | set(optional)
        for key in sorted(set(obj) - known):
            hint = did_you_mean(key, known, "key").split(" Available:")[0]
            problems.append(f"{prefix.rstrip('.') or 'record'}: {hint}")


def mask_procedure(pretraining: Optional[Mapping[str, Any]]) -> Optional[tuple[float, float, float]]:
    """(MASK, SAME, RND) in percent, from a list in Table 8's order, fractions, or a mapping; None if unset."""
    if not pretraining or pretraining.get("mask_procedure") is None:
        return None
    raw = pretraining["mask_procedure"]
    if isinstance(raw, Mapping):
        if set(raw) != {"mask", "same", "random"}:
            raise ValueError(f"mask_procedure mapping needs exactly the keys mask, same, random; got {sorted(raw)}")
        raw = [raw["mask"], raw["same"], raw["random"]]
    if not isinstance(raw, (list, tuple)) or len(raw) != 3 or not all(_is(v, _NUM) and v >= 0 for v in raw):
        raise ValueError(f"mask_procedure must be three non-negative numbers [MASK, SAME, RND], got {raw!r}")
    values = [float(v) for v in raw]
    if abs(sum(values) - 1.0) < 1e-6:  # fractions: 0.8 / 0.1 / 0.1
        values = [100.0 * v for v in values]
    if abs(sum(values) - 100.0) > 0.5:
        raise ValueError(f"mask_procedure {raw!r} does not add up to 100%")
    return (values[0], values[1], values[2])


def _check_pretraining(pre: dict, problems: list[str]) -> None:
    _check_section(pre, _PRETRAINING, "model.pretraining.", problems, strict=False)
    objective = pre.get("objective")
    if isinstance(objective, str) and objective not in OBJECTIVES:
        problems.append(f"model.pretraining.objective {objective!r} is not one of {', '.join(OBJECTIVES)}")
    if isinstance(pre.get("nsp"), bool):  # a version-1 key: version 2 says it in the objective
        problems.append(f"model.pretraining.nsp is not a version-{SCHEMA_VERSION} key (the objective says whether NSP "
                        f"was trained: one of {', '.join(OBJECTIVES)})")
    if isinstance(objective, str) and is_masked(objective):
        for key in ("mask_ratio", "mask_procedure", "whole_word_mask"):
            if pre.get(key) is None and key in pre:
                problems.append(f"model.pretraining.{key} is null, but an mlm model needs it")
        ratio = pre.get("mask_ratio")
        if _is(ratio, _NUM) and not 0.0 < ratio <= 1.0:
            problems.append(f"model.pretraining.mask_ratio {ratio!r} is not a fraction in (0, 1]")
    try:
        mask_procedure(pre)
    except ValueError as err:
        problems.append(f"model.pretraining.{err}")
    heldout = pre.get("heldout")
    if isinstance(heldout, dict):
        for key, value in heldout.items():
            if value is not None and not _is(value, _NUM):
                problems.append(f"model.pretraining.heldout.{key} must be a finite number or null, got {value!r}")


def _check_external(model: dict, problems: list[str]) -> None:
    """`model.external`: the folder's own facts, and no pre-training block beside them (it would be invented)."""
    external = model["external"]
    _check_section(external, _EXTERNAL, "model.external.", problems, strict=True, optional=_EXTERNAL_OPTIONAL)
    if isinstance(external.get("shape"), dict):
        _check_section(external["shape"], _EXTERNAL_SHAPE, "model.external.shape.", problems, strict=True)
    if model.get("pretraining") is not None:
        problems.append("model.pretraining must be null beside model.external (nothing is known of how an external "
                        "model was trained)")


def validate_record(obj: Any, where: str = "record", known_task_versions: Optional[Mapping[str, int]] = None) -> Record:
    """Check a record against the schema; every problem is listed in one `BertbenchError` naming `where`.
    An older version is one line naming the commit that still reads it (FORMATS_COMMIT)."""
    if not isinstance(obj, dict):
        raise BertbenchError(f"{where}: a result record must be a JSON object, got {type(obj).__name__}")
    version = obj.get("schema_version")
    if version != SCHEMA_VERSION:
        if "schema_version" not in obj:
            raise BertbenchError(f"{where}: not a result record (no schema_version)")
        newer = _is(version, _INT) and version > SCHEMA_VERSION
        older = _is(version, _INT) and version < SCHEMA_VERSION
        hint = ("written by a newer bertbench; upgrade bertbench" if newer else
                f"an older format: read it with `git checkout {FORMATS_COMMIT}`" if older else "not a version this bertbench reads")
        raise BertbenchError(f"{where}: unknown record schema_version {version!r} ({hint}; this one reads {SCHEMA_VERSION})")
    problems: list[str] = []
    _check_section(obj, _TOP, "", problems, strict=True, optional=_TOP_OPTIONAL)
    if isinstance(obj.get("split"), dict):
        _check_section(obj["split"], _SPLIT, "split.", problems, strict=True)
        kind = obj["split"].get("eval_kind")
        if isinstance(kind, str) and kind not in EVAL_KINDS:
            problems.append(f"split.eval_kind {kind!r} is not one of {', '.join(EVAL_KINDS)}")
    if isinstance(obj.get("model"), dict):
        _check_section(obj["model"], _MODEL, "model.", problems, strict=True, optional=_MODEL_OPTIONAL)
        if isinstance(obj["model"].get("pretraining"), dict):
            _check_pretraining(obj["model"]["pretraining"], problems)
        if isinstance(obj["model"].get("external"), dict):
            _check_external(obj["model"], problems)
    if isinstance(obj.get("finetune"), dict):
        _check_section(obj["finetune"], _FINETUNE, "finetune.", problems, strict=False)
    metrics = obj.get("metrics")
    if isinstance(metrics, dict):
        if not metrics:
            problems.append("metrics is empty")
        for name, value in metrics.items():
            if value is not None and not _is(value, _NUM):
                problems.append(f"metric {name!r} must be a finite number or null, got {value!r}")
        primary = obj.get("primary_metric")
        if isinstance(primary, str):
            if primary not in metrics:
                have = ", ".join(sorted(metrics)) or "none"
                problems.append(f"primary metric {primary!r} is missing from metrics ({have})")
            elif metrics[primary] is None:
                problems.append(f"primary metric {primary!r} is null")
    if problems:
        raise BertbenchError(f"{where}: invalid result record: " + "; ".join(problems))

    if known_task_versions is not None:
        task, task_version = obj["task"], obj["task_version"]
        own = (obj.get("extra") or {}).get("task_definition")  # a task of the user's own, as it was fine-tuned
        if task not in known_task_versions and isinstance(own, dict) and own.get("version") == task_version:
            return obj  # type: ignore[return-value]
        if task not in known_task_versions:
            raise BertbenchError(f"{where}: {did_you_mean(task, known_task_versions, 'task')} (a task of your own: "
                                 "give its folder with --tasks-dir)")
        if known_task_versions[task] != task_version:
            raise BertbenchError(f"{where}: unknown task version: {task!r} version {task_version} in the record, but the "
                                 f"task registry has version {known_task_versions[task]}; re-run the fine-tuning or "
                                 "report with the code that wrote it")
    return obj  # type: ignore[return-value]


# --- reading and writing --------------------------------------------------------------------------


def write_record(path: Path, record: Union[ResultRecord, Mapping[str, Any]]) -> Path:
    """The one writer of result records (and of the grid points that lost a selection, `*.grid.json`, which
    the report does not read): validate, then write atomically (a reader never sees half a record). A mapping
    is taken in its file form (tests, fixtures); an old version is written in today's form. Returns the path."""
    path = Path(path)
    if not path.name.endswith((RECORD_SUFFIX, GRID_SUFFIX)):
        raise BertbenchError(f"{path}: a result record's file name must end with {RECORD_SUFFIX} (reports look for it)")
    obj = _without_machine_paths(record.to_json() if isinstance(record, ResultRecord) else dict(record))
    atomic_write_json(path, validate_record(obj, str(path)))
    return path


def read_record(path: Path, known_task_versions: Optional[Mapping[str, int]] = None) -> Record:
    """Read and validate one record; any problem is a `BertbenchError` naming the file."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise BertbenchError(f"{path}: no such result record") from None
    except OSError as err:
        raise BertbenchError(f"{path}: cannot read: {err.strerror}") from None
    except UnicodeDecodeError:
        raise BertbenchError(f"{path}: not UTF-8 text (corrupt result record)") from None
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        raise BertbenchError(f"{path}: corrupt JSON at line {err.lineno} column {err.colno}: {err.msg}") from None
    except ValueError as err:
        raise BertbenchError(f"{path}: {err}") from None
    return validate_record(obj, str(path), known_task_versions)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON; an undefined metric is written as null")


def load_records(dirs: Iterable[Union[str, Path]], known_task_versions: Optional[Mapping[str, int]] = None
                 ) -> list[LoadedRecord]:
    """Every `*.record.json` under the given folders (recursively) or given as files, sorted by path; a missing
    path or any invalid record raises one `BertbenchError` that names every bad file."""
    files: dict[Path, Path] = {}
    for entry in dirs:
        entry = Path(entry)
        if entry.is_dir():
            found = [p for p in entry.rglob(f"*{RECORD_SUFFIX}") if p.is_file()]
        elif entry.is_file():
            if not entry.name.endswith(RECORD_SUFFIX):
                raise BertbenchError(f"{entry}: not a result record (the name does not end with {RECORD_SUFFIX})")
            found = [entry]
        else:
            raise BertbenchError(f"{entry}: no such file or directory")
        for path in found:
            files.setdefault(path.resolve(), path)
    records: list[LoadedRecord] = []
    errors: list[str] = []
    for path in sorted(files.values(), key=lambda p: p.as_posix()):
        try:
            records.append(LoadedRecord(path, read_record(path, known_task_versions)))
        except BertbenchError as err:
            errors.append(str(err))
    if len(errors) == 1:
        raise BertbenchError(errors[0])
    if errors:
        raise BertbenchError(f"{len(errors)} bad result records:\n  " + "\n  ".join(errors))
    return records


# --- keys ----------------------------------------------------------------------------------------------


# What makes two pre-trainings the same procedure, whatever their seed: what they optimised, how, and for how
# many steps; a record from a newer run adds procedure_fingerprint, which covers every other setting (lr,
# schedule, phases, batches, the model's shape). Not tokens_seen nor data_fingerprint: both follow from the seed
# (the pairs and masks it draws), and not where, when or how fast they ran.
_PROCEDURE_KEYS = ("objective", "mask_ratio", "mask_procedure", "whole_word_mask", "full_sentences", "steps",
                   "precision")


def pretraining_procedure(record: Record) -> str:
    """A key shared by the records of models pre-trained by one procedure with different seeds."""
    pre = record["model"]["pretraining"] or {}
    keys = {k: pre.get(k) for k in _PROCEDURE_KEYS}
    if pre.get("budget_seconds") is not None:  # minutes on the clock ended it: its steps are an outcome, like tokens
        keys.update(steps=None, budget_seconds=pre["budget_seconds"])
    if pre.get("procedure_fingerprint") is not None:  # every other setting (lr, phases, shape …); older records lack it
        keys["procedure_fingerprint"] = pre["procedure_fingerprint"]
    identity = json.dumps([record["model"]["size"], keys], sort_keys=True)
    return "procedure:" + hashlib.sha256(identity.encode()).hexdigest()[:16]


def record_filename(record: Record) -> str:
    """A file name unique per (model, task, version, eval split, setting, seed), e.g.
    'rte.dev.seed1.3f2a9c01.record.json' (the hash covers what the readable part leaves out)."""
    identity = json.dumps([record["model"]["fingerprint"], record["task_version"], record["split"]["eval"],
                           record["split"]["eval_kind"], record["finetune"]], sort_keys=True)
    digest = hashlib.sha256(identity.encode()).hexdigest()[:8]
    return f"{record['task']}.{record['split']['eval']}.seed{record['seed']}.{digest}{RECORD_SUFFIX}"


# --- pre-training summaries (summary.json) ---------------------------------------------------------------

# What only a finished run's summary holds; a Figure 5 snapshot's (`snapshot: true`) has none of them.
_FINAL_ONLY = ("batch_size", "loss_tokens", "schedule", "preprocessing_seconds", "tokens_per_second",
               "final_train_loss", "data", "library_versions", "step")


@dataclass
class PretrainSummary:
    """`summary.json` of a pre-training run, of its checkpoint folder and of each Figure 5 snapshot: what the
    model is (objective, masking, shape, data, code, hardware) and what the run reached (steps, tokens,
    held-out scores). Its writer and reader: the module docstring (`read_summary` drops unknown keys). None: unknown."""

    objective: str
    full_sentences: Optional[bool] = None
    mask_ratio: Optional[float] = None
    mask_procedure: Optional[list[float]] = None
    whole_word_mask: Optional[bool] = None
    masking: Optional[str] = None
    model_size: Optional[str] = None
    model_config: Optional[dict[str, Any]] = None
    procedure_fingerprint: Optional[str] = None  # seeds of one procedure share it (pretrain_run.procedure_fingerprint)
    parameters: Optional[int] = None
    max_seq_len: Optional[int] = None
    data_fingerprint: Optional[str] = None
    precision: Optional[str] = None
    code_version: Optional[str] = None
    hardware: Optional[str] = None
    run_dir: Optional[str] = None  # the run folder's last two parts (portable_path), e.g. pretrain/mlm_nsp-ab12
    steps: Optional[int] = None
    tokens_seen: Optional[int] = None
    wall_seconds: Optional[float] = None
    heldout: Optional[dict[str, Optional[float]]] = None
    date: Optional[str] = None
    batch_size: Optional[int] = None
    loss_tokens: Optional[int] = None
    schedule: Optional[dict[str, Any]] = None
    preprocessing_seconds: Optional[float] = None
    tokens_per_second: Optional[float] = None
    final_train_loss: Optional[float] = None
    data: Optional[dict[str, Any]] = None  # the data's statistics; `cache` is the cache folder's name only
    library_versions: Optional[dict[str, str]] = None
    step: Optional[dict[str, Any]] = None  # the training step taken and why (training.step.TrainingStep.summary)
    snapshot: bool = False  # a Figure 5 snapshot's summary (mid-run), not the run's

    def to_json(self) -> dict[str, Any]:
        """The file's content: no machine path (`run_dir` as `portable_path` keeps it, `data.cache` as the cache
        folder's name, which is its content key); a snapshot's without the finished run's keys."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["run_dir"] = portable_path(out["run_dir"])
        if isinstance(out["data"], dict) and isinstance(out["data"].get("cache"), str):
            out["data"] = {**out["data"], "cache": Path(out["data"]["cache"]).name}
        for key in (_FINAL_ONLY if self.snapshot else ("snapshot",)):
            del out[key]
        if out.get("step") is None:  # written by runs since the step choice was recorded; older ones lack it
            out.pop("step", None)
        return out

    @property
    def budget_seconds(self) -> Optional[float]:
        """The training-time budget that ended the run (schedule kind 'wall-clock'); None when a step count did."""
        schedule = self.schedule or {}
        return schedule.get("budget_seconds") if schedule.get("kind") == "wall-clock" else None

    @property
    def steps_budget(self) -> Optional[dict[str, Any]]:
        """The time budget a study converted into this run's steps (studies.budget); None when none did."""
        return (self.schedule or {}).get("steps_budget")

    def pretraining_info(self) -> dict[str, Any]:
        """The `model.pretraining` block a fine-tuning record copies from this summary (keys it lacks: null)."""
        return {key: getattr(self, key) for key in PRETRAINING_KEYS}


# The summary's keys a fine-tuning record copies into `model.pretraining`.
PRETRAINING_KEYS = ("objective", "mask_ratio", "mask_procedure", "whole_word_mask", "tokens_seen", "wall_seconds",
                    "data_fingerprint", "code_version", "hardware", "run_dir", "heldout", "precision", "steps",
                    "full_sentences", "budget_seconds", "procedure_fingerprint", "steps_budget")


def write_summary(path: Path, summary: PretrainSummary) -> Path:
    """The one writer of `summary.json` files: atomically (a finished run is one whose summary.json exists)."""
    atomic_write_json(Path(path), summary.to_json())
    return Path(path)


def read_summary(path: Path) -> PretrainSummary:
    """The one reader of `summary.json` files; a bad file, or one in an older form, is one line naming it."""
    path = Path(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise BertbenchError(f"{path}: cannot read the pre-training summary ({err.strerror or err})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BertbenchError(f"{path}: not a pre-training summary (corrupt JSON: {err})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("objective"), str):
        raise BertbenchError(f"{path}: not a pre-training summary (no objective)")
    heldout = obj.get("heldout") if isinstance(obj.get("heldout"), dict) else {}
    if "nsp" in obj or any(key.endswith("_std") for key in heldout):
        raise BertbenchError(f"{path}: a pre-training summary in an older format (`nsp`, or held-out keys named "
                             f"`*_std`); read it with `git checkout {FORMATS_COMMIT}`")
    if obj["objective"] not in OBJECTIVES:
        raise BertbenchError(f"{path}: objective {obj['objective']!r} is not one of {', '.join(OBJECTIVES)}")
    known = {f.name for f in dataclasses.fields(PretrainSummary)}
    return PretrainSummary(**{k: v for k, v in obj.items() if k in known})


# --- provenance ---------------------------------------------------------------------------------------

# Metric libraries matter to a number too (scores are computed with them); bertbench.runtime.provenance lists
# the training stack.
_METRIC_LIBRARIES = ("scikit-learn", "scipy", "seqeval")


def provenance() -> dict[str, Any]:
    """The record's provenance keys: code_version, library_versions, hardware, date (UTC, ISO 8601)."""
    versions = {**prov.library_versions(), **prov.installed_versions(_METRIC_LIBRARIES)}
    stamp = os.environ.get(PREREGISTRATION_ENV)
    return {"code_version": prov.code_version(), "library_versions": versions, "hardware": prov.hardware(),
            "date": prov.now_iso(), **({"preregistration": json.loads(stamp)} if stamp else {})}


# Set by a pre-registered study's fine-tuning stage (bertbench.studies.plan) to its pre-registration's
# {"sha256", "registered_at"} as JSON: every record the stage writes carries it.
PREREGISTRATION_ENV = "BERTBENCH_PREREGISTRATION"


__all__ = ["EVAL_KINDS", "FORMATS_COMMIT", "GRID_SUFFIX", "LoadedRecord", "PREREGISTRATION_ENV", "PretrainSummary",
           "RECORD_SUFFIX", "Record", "ResultRecord", "portable_path", "read_summary", "write_summary",
           "SCHEMA_VERSION", "load_records", "mask_procedure", "pretraining_procedure", "provenance", "read_record",
           "record_filename", "validate_record", "write_record"]
