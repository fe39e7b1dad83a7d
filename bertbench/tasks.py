"""Fine-tuning tasks as data: `TaskSpec` (one YAML file in tasks/<family>/) and the registry over them.

What a task file holds, `include:` and the "_" templates: tasks/README.md. A task's family is its folder name.

Tasks are read from several folders together (`paths.task_folders`): `--tasks-dir`, $BERTBENCH_TASKS_DIR and the
project's tasks/, so a researcher's own task runs and is reported beside the paper's; a name that two files
define is an error naming both.

Loading is strict and lists every problem of a file at once, each as `file:line: field: what is wrong`:
unknown or missing keys and values of the wrong type at every level, then (once the shape is sound) unknown
metrics, an unknown type, bad label lists and the like, with did-you-mean hints. `bertbench tasks validate`
reports every file's; a command that runs tasks (`resolve_task_names`) fails on a bad file only when that task
(or its family, or `all`) is asked for, so one malformed custom file never blocks the shipped tasks beside it.

A local data file (`local.files`) is read from the data folder (`glue/RTE/train.tsv`), from an absolute path,
or, written `./…` or `../…`, relative to the task's YAML file: a custom task's data need not lie in a shared,
read-only data folder.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from bertbench.config import MIN_SEQ_LEN
from bertbench.config_files import Problem, Where, coerce_value, deep_merge, key_lines, line_of, load_yaml, shape_problems
from bertbench.errors import BertbenchError, did_you_mean
from bertbench.paths import TASKS_DIR, TASKS_DIR_VARIABLE, task_folders

TASK_TYPES = ("classification", "regression", "multiple_choice", "span_qa", "token_classification")
EVAL_KINDS = ("dev", "devsplit")  # dev: the official dev split; devsplit: a dev file divided by group
# local format -> the task types it can feed
LOCAL_FORMATS = {
    "tsv": ("classification", "regression"),  # GLUE tsv, read with quoting off (csv.QUOTE_NONE)
    "csv": ("multiple_choice",),  # SWAG csv, standard quoting
    "squad_json": ("span_qa",),  # the official SQuAD v1.1 / v2.0 JSON
    "conll": ("token_classification",),  # whitespace columns, blank line between sentences, -DOCSTART-
}
# example fields each task type needs from its columns
REQUIRED_COLUMNS = {
    "classification": ("text_a", "label"),
    "regression": ("text_a", "label"),
    "multiple_choice": ("context", "endings", "label"),
    "span_qa": ("id", "title", "context", "question", "answers"),
    "token_classification": ("words", "tags"),
}
# example fields a devsplit may group by, per type
GROUP_FIELDS = {
    "classification": ("text_a", "text_b"),
    "regression": ("text_a", "text_b"),
    "multiple_choice": ("context",),
    "span_qa": ("title", "context", "question"),
    "token_classification": ("doc_id",),
}
# metrics that fit a task type; a registry metric in none of these sets is allowed anywhere (new ones)
METRICS_FOR_TYPE = {
    "classification": {"accuracy", "f1", "mcc"},
    "regression": {"pearson", "spearman"},
    "multiple_choice": {"accuracy"},
    "span_qa": {"squad_em", "squad_f1", "squad_v2_em", "squad_v2_f1"},
    "token_classification": {"seqeval_f1", "seqeval_f1_strict", "seqeval_precision", "seqeval_recall"},
}
SPLIT_ROLES = ("train", "eval", "test")


@dataclass
class Columns:
    """Which source column feeds which example field; unused fields stay null."""

    id: Optional[str] = None
    text_a: Optional[str] = None  # classification / regression: first segment
    text_b: Optional[str] = None  # second segment of a pair task
    label: Optional[str] = None
    context: Optional[str] = None  # multiple choice: shared first segment; span QA: the paragraph
    prefix: Optional[str] = None  # multiple choice: start of every ending (SWAG sent2)
    endings: Optional[list[str]] = None  # multiple choice: one column per choice
    title: Optional[str] = None  # span QA: article title
    question: Optional[str] = None
    answers: Optional[str] = None  # span QA: {"text": [...], "answer_start": [...]}
    words: Optional[str] = None  # token classification: the words of a sentence
    tags: Optional[str] = None  # token classification: one tag per word


@dataclass
class Splits:
    """The task's roles -> source split names (keys of `local.files` and `hub.splits`)."""

    eval: str
    train: Optional[str] = None
    test: Optional[str] = None  # unlabelled in GLUE; null where no test split is public


@dataclass
class LocalSource:
    """Files under the data dir, in the official distribution layout."""

    format: str
    files: dict[str, str]  # source split name -> path relative to the data dir
    headerless: list[str] = field(default_factory=list)  # tsv/csv splits whose file has no header (CoLA)
    columns: list[str] = field(default_factory=list)  # names for headerless files; conll column names


@dataclass
class HubSource:
    """A parquet-backed dataset on the Hugging Face hub, for users with internet."""

    path: str
    splits: dict[str, str]  # source split name -> hub split name
    columns: Columns
    name: Optional[str] = None  # the dataset config
    revision: Optional[str] = None  # e.g. refs/convert/parquet for a script dataset's parquet export
    labels: Optional[list[str]] = None  # class id -> task label, where the hub stores labels as ints


@dataclass
class DevSplit:
    """Divide one dev file into fine-tune/evaluate halves by group, so no group is on both sides."""

    group_by: str  # example field: SQuAD "title" (the article), QNLI "text_a" (the question)
    eval_fraction: float  # share of *groups* on the evaluation side (by hash, so only roughly of examples)
    salt: str = "bertbench-devsplit-v1"  # part of the hashed key; changing it makes another split


@dataclass
class HParams:
    """The paper's fine-tuning hyper-parameters (or, where it gives none, the named source's)."""

    source: str  # where these numbers come from
    batch_size: int
    epochs: float
    learning_rates: list[float]  # the grid; the paper picks the best on dev
    max_seq_len: int
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    doc_stride: Optional[int] = None  # span QA: step between window starts (google-research/bert semantics)
    max_query_len: Optional[int] = None  # span QA: question tokens kept
    max_answer_len: Optional[int] = None  # span QA: longest predicted answer, in tokens
    n_best: Optional[int] = None  # span QA: start/end candidates per window


@dataclass
class TaskSpec:
    name: str
    version: int
    type: str
    description: str
    inputs: Columns  # local columns (tsv/csv headers, flattened SQuAD/CoNLL rows) -> example fields
    metrics: list[str]  # primary first
    splits: Splits
    hparams: HParams
    seeds: list[int]
    eval_kind: str = "dev"
    labels: list[str] = field(default_factory=list)
    label_range: Optional[list[float]] = None  # regression: the scale's two ends (STS-B: 0, 5); outside is an error
    local: Optional[LocalSource] = None
    hub: Optional[HubSource] = None
    devsplit: Optional[DevSplit] = None
    family: str = ""  # set from the folder, not from YAML
    path: str = ""  # the file this task was loaded from

    @property
    def primary_metric(self) -> str:
        return self.metrics[0]

    @property
    def num_labels(self) -> int:
        """Classifier outputs: classes, choices or tags; 1 for regression; 2 (start, end) for span QA."""
        if self.type == "regression":
            return 1
        if self.type == "span_qa":
            return 2
        return len(self.labels)

    def source_split(self, split: str) -> str:
        """A role (train/eval/test) or a source split name -> the source split name."""
        if split in SPLIT_ROLES:
            name = getattr(self.splits, split)
            if name is None:
                raise BertbenchError(f"task {self.name!r} has no {split} split")
            return name
        known = set(self.local.files if self.local else ()) | set(self.hub.splits if self.hub else ())
        if split not in known:
            raise BertbenchError(did_you_mean(split, set(SPLIT_ROLES) | known, f"split of task {self.name!r}"))
        return split

    def local_files(self, data_dir: Path, split: str) -> list[Path]:
        """Files that serve `split` (a role or source name); [] without a local source. Each is read from
        `data_dir`, or as written when absolute, or beside the task's YAML file when written ./… or ../…."""
        if self.local is None:
            return []
        spelt = self.local.files.get(self.source_split(split))
        if spelt is None:
            return []
        return [Path(self.path).parent / spelt if beside_yaml(spelt) else Path(data_dir) / spelt]  # absolute: itself

    def missing_local_files(self, data_dir: Path, roles: tuple[str, ...] = ("train", "eval")) -> list[Path]:
        """Local files needed for fine-tuning and evaluation that are absent from `data_dir`."""
        if self.local is None:
            return []
        out: list[Path] = []
        for role in roles:
            if getattr(self.splits, role) is None:
                continue
            for f in self.local_files(data_dir, role) or [Path(data_dir) / f"<no local file for {role}>"]:
                if not f.is_file() and f not in out:
                    out.append(f)
        return out


# ------------------------------------------------------------------------------------------------
# Loading one file: include, strict keys, semantic checks.


def beside_yaml(path: str) -> bool:
    """A local file written ./… or ../…: relative to the task's YAML file, not to the data folder."""
    return path.startswith(("./", "../"))




class TaskFileError(BertbenchError):
    """Every problem of one task file, each a line `file:line: field: what is wrong`."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__("; ".join(lines))


def _read_with_includes(path: Path, seen: tuple[Path, ...] = ()) -> tuple[dict[str, Any], Where]:
    """The file's mapping over those it includes, and where each key was set (the including file wins)."""
    path = path.resolve()
    if path in seen:
        raise TaskFileError([f"{seen[0]}: include: a cycle: {' -> '.join(str(p) for p in (*seen, path))}"])
    try:
        data = load_yaml(path)  # a syntax error is one line with its position
    except BertbenchError as err:
        raise TaskFileError([str(err)]) from None
    where = key_lines(path)
    inc = data.pop("include", None)
    if inc is None:
        return data, where
    at = f"{path}:{where[('include',)][1]}: include"
    if not isinstance(inc, str):
        raise TaskFileError([f"{at}: expected a file path relative to this file, got {inc!r}"])
    target = path.parent / inc
    if not target.is_file():
        raise TaskFileError([f"{at}: {target} does not exist"])
    base, base_where = _read_with_includes(target, (*seen, path))
    return deep_merge(base, data), {**base_where, **where}


def _problems(t: TaskSpec, sound: set[str]) -> list[Problem]:
    """Every semantic problem of a task, from its `sound` fields (those `_shape_problems` found no fault in): a
    check runs when every field it reads is sound, so one misspelt key does not hide the rest of the file's."""
    p: list[Problem] = []
    if "type" in sound and t.type not in TASK_TYPES:
        return [("type", did_you_mean(t.type, TASK_TYPES, "task type"))]  # the rest depends on the type
    if "eval_kind" in sound and t.eval_kind not in EVAL_KINDS:
        p.append(("eval_kind", did_you_mean(t.eval_kind, EVAL_KINDS, "eval_kind")))
    if "version" in sound and t.version < 0:
        p.append(("version", f"{t.version}: expected a non-negative integer"))
    for check, reads in _CHECKS:
        if sound.issuperset(reads):
            p += check(t)
    return p


def _label_problems(t: TaskSpec) -> list[Problem]:
    p: list[Problem] = []
    if t.type in ("regression", "span_qa"):
        if t.labels:
            p.append(("labels", f"a {t.type} task has no label list (got {t.labels})"))
    elif len(t.labels) < 2:
        p.append(("labels", f"a {t.type} task needs at least two labels (got {t.labels})"))
    if len(set(t.labels)) != len(t.labels):
        dupes = sorted({x for x in t.labels if t.labels.count(x) > 1})
        p.append(("labels", f"duplicates {dupes}"))
    if t.label_range is not None and (t.type != "regression" or len(t.label_range) != 2
                                      or not t.label_range[0] < t.label_range[1]):
        p.append(("label_range", f"{t.label_range}: a regression task's [low, high], low < high"))
    if t.type == "multiple_choice" and t.labels != [str(i) for i in range(len(t.labels))]:
        p.append(("labels", f"multiple-choice labels are the choice numbers '0'..'{len(t.labels) - 1}', got {t.labels}"))
    if t.type == "token_classification" and t.labels:
        if "O" not in t.labels:
            p.append(("labels", "a token-classification label list needs 'O'"))
        for lab in t.labels:
            if lab != "O" and not (lab[:2] in ("B-", "I-") and len(lab) > 2):
                p.append(("labels", f"{lab!r} is not an IOB2 tag (O, B-X, I-X)"))
        types = {lab[2:] for lab in t.labels if lab != "O"}
        for ty in sorted(types):
            if f"B-{ty}" not in t.labels or f"I-{ty}" not in t.labels:
                p.append(("labels", f"entity type {ty!r} needs both B-{ty} and I-{ty}"))
    return p


def _metric_problems(t: TaskSpec) -> list[Problem]:
    from bertbench.metrics import METRICS

    p: list[Problem] = []
    if not t.metrics:
        p.append(("metrics", "at least one metric (the primary one first)"))
    known = set(METRICS)
    typed = set().union(*METRICS_FOR_TYPE.values())
    for m in t.metrics:
        if m not in known:
            p.append(("metrics", did_you_mean(m, known, "metric")))
        elif m in typed and m not in METRICS_FOR_TYPE[t.type]:
            p.append(("metrics", f"{m!r} does not fit a {t.type} task (use one of {sorted(METRICS_FOR_TYPE[t.type])})"))
    return p


def _column_problems(t: TaskSpec) -> list[Problem]:
    p: list[Problem] = []
    need = REQUIRED_COLUMNS[t.type]
    for name, cols in (("inputs", t.inputs), ("hub.columns", t.hub.columns if t.hub else None)):
        if cols is None:
            continue
        missing = [c for c in need if getattr(cols, c) is None and not (c == "id" and name == "inputs")]
        if missing:
            p.append((name, f"a {t.type} task needs columns for {missing}"))
    if t.type == "multiple_choice" and t.inputs.endings and len(t.inputs.endings) != len(t.labels):
        p.append(("inputs.endings", f"{len(t.inputs.endings)} ending columns for {len(t.labels)} labels"))
    return p


def _source_problems(t: TaskSpec) -> list[Problem]:
    p: list[Problem] = []
    if t.local is None and t.hub is None:
        p.append(("local", "a task needs a local source, a hub source, or both"))
    if t.local is not None:
        if t.local.format not in LOCAL_FORMATS:
            p.append(("local.format", did_you_mean(t.local.format, LOCAL_FORMATS, "local format")))
        elif t.type not in LOCAL_FORMATS[t.local.format]:
            p.append(("local.format", f"{t.local.format!r} cannot feed a {t.type} task"))
        for s in t.local.headerless:
            if s not in t.local.files:
                p.append(("local.headerless", f"{s!r} is not a split in local.files"))
        if t.local.headerless and not t.local.columns:
            p.append(("local.columns", "headerless files need column names"))
        if t.local.format == "conll" and len(t.local.columns) < 2:
            p.append(("local.columns", "name the conll columns (e.g. [tokens, pos_tags, chunk_tags, ner_tags])"))
        for split, f in t.local.files.items():
            if not (Path(f).is_absolute() or beside_yaml(f)) and ".." in Path(f).parts:
                p.append((f"local.files.{split}", f"{f!r}: write a path inside the data folder (glue/RTE/train.tsv), "
                          "an absolute path, or one relative to this YAML file starting ./ or ../"))
    if t.hub is not None and t.hub.labels is not None and t.type in ("classification", "token_classification"):
        strange = [x for x in t.hub.labels if x not in t.labels]
        if strange:
            p.append(("hub.labels", f"{strange} are not in labels {t.labels}"))
    for role in SPLIT_ROLES:
        name = getattr(t.splits, role)
        if name is None:
            continue
        sources = [s for s in (t.local and t.local.files, t.hub and t.hub.splits) if s]
        if not any(name in s for s in sources):
            p.append((f"splits.{role}", f"{name!r} is not a split of any source"))
    if t.splits.train is None and t.eval_kind != "devsplit":
        p.append(("splits.train", "a task needs a training split"))
    return p


def _devsplit_problems(t: TaskSpec) -> list[Problem]:
    p: list[Problem] = []
    if (t.devsplit is not None) != (t.eval_kind == "devsplit"):
        p.append(("devsplit", "give a devsplit block exactly when eval_kind is 'devsplit'"))
    if t.devsplit is not None:
        if t.splits.train != t.splits.eval:
            p.append(("splits", f"a devsplit divides one file, so train and eval must name the same split "
                      f"(got {t.splits.train!r} and {t.splits.eval!r})"))
        if not 0.0 < t.devsplit.eval_fraction < 1.0:
            p.append(("devsplit.eval_fraction", f"{t.devsplit.eval_fraction}: expected a value in (0, 1)"))
        if t.devsplit.group_by not in GROUP_FIELDS[t.type]:
            p.append(("devsplit.group_by",
                      did_you_mean(t.devsplit.group_by, GROUP_FIELDS[t.type], f"devsplit.group_by for {t.type}")))
    return p


def _hparam_problems(t: TaskSpec) -> list[Problem]:
    p: list[Problem] = []
    h = t.hparams
    for key, bad, expected in (("batch_size", h.batch_size < 1, "an integer ≥ 1"), ("epochs", h.epochs <= 0, "> 0"),
                               ("max_seq_len", h.max_seq_len < MIN_SEQ_LEN, f"an integer ≥ {MIN_SEQ_LEN}")):
        if bad:
            p.append((f"hparams.{key}", f"{getattr(h, key)}: expected {expected}"))
    if not h.learning_rates or any(lr <= 0 for lr in h.learning_rates):
        p.append(("hparams.learning_rates", f"{h.learning_rates}: expected one or more positive learning rates"))
    qa_fields = ("doc_stride", "max_query_len", "max_answer_len", "n_best")
    if t.type == "span_qa":
        lacking = [f for f in qa_fields if getattr(h, f) is None]
        if lacking:
            p.append(("hparams", f"a span_qa task needs {lacking}"))
        elif h.max_query_len + 3 >= h.max_seq_len:
            p.append(("hparams.max_query_len", f"{h.max_query_len} leaves no room for the document in {h.max_seq_len}"))
    else:
        for f in qa_fields:
            if getattr(h, f) is not None:
                p.append((f"hparams.{f}", "applies to span_qa tasks only"))
    return p


def _seed_problems(t: TaskSpec) -> list[Problem]:
    return [("seeds", "at least one seed")] if not t.seeds else []


# The fields each semantic check reads (`_problems` runs it when all are sound).
_CHECKS = (
    (_label_problems, ("type", "labels", "label_range")),
    (_metric_problems, ("type", "metrics")),
    (_column_problems, ("type", "inputs", "hub", "labels")),
    (_source_problems, ("type", "local", "hub", "splits", "eval_kind", "labels")),
    (_devsplit_problems, ("type", "devsplit", "eval_kind", "splits")),
    (_hparam_problems, ("type", "hparams")),
    (_seed_problems, ("seeds",)),
)


def _typed_task(data: dict[str, Any], shape: list[Problem]) -> tuple[TaskSpec, set[str]]:
    """The task built from `data`, and the names of its sound fields. With `shape` problems it is a partial
    task (only its sound fields set) that only the checks of those fields read."""
    faulty = {field_.split(".")[0].split("[")[0] for field_, _ in shape}
    hints = typing.get_type_hints(TaskSpec)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(TaskSpec):
        if f.name in faulty or f.name in ("family", "path"):
            continue
        if f.name in data:
            values[f.name] = coerce_value(data[f.name], hints[f.name], f.name)  # sound: cannot fail
        elif f.default is not dataclasses.MISSING:
            values[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            values[f.name] = f.default_factory()
    if not shape:
        return TaskSpec(**values), set(values)
    task = TaskSpec.__new__(TaskSpec)
    task.__dict__.update(values)
    return task, set(values)


def load_task_file(path: Path, tasks_dir: Optional[Path] = None) -> TaskSpec:
    """Load and validate one task file; every problem in it is listed in one `TaskFileError`, each as
    `file:line: field: what is wrong` (the file and line that wrote the field, an included one too)."""
    path = Path(path)
    data, where = _read_with_includes(path)
    problems: list[Problem] = [(k, "is set from the file's location, not written in it") for k in ("family", "path")
                               if k in data]
    problems += shape_problems(TaskSpec, data, skip=("family", "path"))  # said apart above
    task, sound = _typed_task(data, problems)
    if "name" in sound and task.name != path.stem:
        problems.append(("name", f"{task.name!r} must match the file name {path.stem!r}"))
    problems += _problems(task, sound)
    if problems:
        located = [(*line_of(where, field_, path.resolve()), field_, what) for field_, what in problems]
        located.sort(key=lambda x: (x[0] != path.resolve(), str(x[0]), x[1]))  # the file's own first, in its order
        raise TaskFileError([f"{_shown(file, path)}:{line}: {field_}: {what}" for file, line, field_, what in located])
    try:
        rel = path.resolve().relative_to(Path(tasks_dir or TASKS_DIR).resolve())
        task.family = rel.parts[0] if len(rel.parts) > 1 else ""
    except ValueError:
        task.family = path.parent.name
    task.path = str(path)
    return task


def _shown(file: Path, path: Path) -> str:
    """`file` as the user would recognise it: the task file as they named it, an included one by its path."""
    return str(path) if file == path.resolve() else str(file)


def _scan_tasks(folders: tuple[Path, ...]) -> tuple[dict[str, TaskSpec], list[tuple[Path, list[str]]]]:
    """(tasks by name, (file, its problem lines) for every bad file) over all `folders` together; a name that two
    files define is a problem of the second, naming the first."""
    tasks: dict[str, TaskSpec] = {}
    problems: list[tuple[Path, list[str]]] = []
    for folder in folders:
        for f in sorted(p for p in Path(folder).rglob("*.yaml") if not p.name.startswith("_")):  # not templates
            try:
                t = load_task_file(f, folder)
            except TaskFileError as err:
                problems.append((f, err.lines))
                continue
            if t.name in tasks:
                problems.append((f, [f"{f}: name: task {t.name!r} is defined twice, here and in {tasks[t.name].path}; "
                                     "rename one (a task name is its file name)"]))
                continue
            tasks[t.name] = t
    return tasks, problems


def collect_tasks(tasks_dir: Union[str, Path, None] = None) -> tuple[dict[str, TaskSpec], list[str]]:
    """(tasks by name, every problem found, a line each) over `task_folders(tasks_dir)` — for `tasks validate`,
    which reports all at once."""
    tasks, problems = _scan_tasks(task_folders(tasks_dir))
    return tasks, [line for _, lines in problems for line in lines]


@dataclass
class TaskRegistry:
    """The valid tasks of the task folders, and their bad files by the task name each would define (its file
    name) and by family: a bad file is an error only when its task is asked for (`resolve_task_names`)."""

    tasks: dict[str, TaskSpec]
    broken: dict[str, str]  # task name (the file's stem) -> the file's problems
    broken_families: dict[str, list[str]]  # family folder -> its bad files' task names
    folders: tuple[Path, ...]

    def where(self) -> str:
        """Where tasks were looked for, and how to add a folder: the end of an unknown task's error."""
        return (f"tasks are read from {', '.join(map(str, self.folders))}; for a task of your own, add its folder "
                f"with --tasks-dir (or ${TASKS_DIR_VARIABLE})")


@functools.lru_cache(maxsize=8)
def _registry_cached(folders: tuple[Path, ...]) -> TaskRegistry:
    tasks, problems = _scan_tasks(folders)
    broken: dict[str, str] = {}
    families: dict[str, list[str]] = {}
    for f, lines in problems:
        broken[f.stem] = "; ".join(lines)
        tasks.pop(f.stem, None)  # a name defined twice: asking for it is an error, not a guess which one
        root = next(folder for folder in folders if f.resolve().is_relative_to(folder))
        rel = f.resolve().relative_to(root)
        families.setdefault(rel.parts[0] if len(rel.parts) > 1 else "", []).append(f.stem)
    return TaskRegistry(tasks, broken, families, folders)


def task_registry(tasks_dir: Union[str, Path, None] = None) -> TaskRegistry:
    """The registry of `task_folders(tasks_dir)`: the given folders, $BERTBENCH_TASKS_DIR's and the project's
    tasks/ together; a copy callers may change."""
    return copy.deepcopy(_registry_cached(task_folders(tasks_dir)))


def valid_tasks(tasks_dir: Union[str, Path, None] = None) -> dict[str, TaskSpec]:
    """Every task that loads, by name; bad files are left out (for lookups by a name already run: reports)."""
    return task_registry(tasks_dir).tasks


def task_versions(tasks_dir: Union[str, Path, None] = None) -> dict[str, int]:
    """{task: version} of every task that loads: what a result record's task is checked against."""
    return {name: spec.version for name, spec in valid_tasks(tasks_dir).items()}


def task_groups(tasks: dict[str, TaskSpec]) -> dict[str, list[str]]:
    """Group names -> task names: each family's official tasks (eval_kind 'dev', so `glue` is the
    official GLUE tasks and never a devsplit variant), `devsplit` (every devsplit variant) and `all`."""
    groups: dict[str, list[str]] = {}
    for t in tasks.values():
        if t.family and t.eval_kind == "dev":
            groups.setdefault(t.family, []).append(t.name)
        if t.eval_kind == "devsplit":
            groups.setdefault("devsplit", []).append(t.name)
    groups["all"] = list(tasks)
    return groups


def resolve_task_names(spec: str, tasks_dir: Union[str, Path, None] = None) -> list[str]:
    """'rte,stsb' | 'glue' | 'all' | a mix ('glue,squad_v1_devsplit') -> task names, in order, no repeats. A bad
    task file is an error here only when its task, its family or 'all' is asked for."""
    reg = task_registry(tasks_dir)
    tasks, groups = reg.tasks, task_groups(reg.tasks)
    out: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        bad = [item] if item in reg.broken else list(reg.broken) if item == "all" else reg.broken_families.get(item, [])
        if bad:
            validate = " ".join(["bertbench tasks validate", *(["--tasks-dir", str(tasks_dir)] if tasks_dir else [])])
            raise BertbenchError("; ".join(reg.broken[name] for name in bad) + f" (`{validate}` lists every problem)")
        if item in tasks:
            names = [item]
        elif item in groups:
            names = groups[item]
        else:
            raise BertbenchError(f"{did_you_mean(item, set(tasks) | set(groups), 'task or task group')} ({reg.where()})")
        out.extend(n for n in names if n not in out)
    if not out:
        raise BertbenchError(f"no tasks selected by {spec!r}")
    return out
