"""Task data → examples: local files in the official layouts (GLUE tsv, SQuAD json, SWAG csv, CoNLL
columns) or a parquet-backed hub dataset, mapped through one code path per task type.

Every source is first read as rows (dicts); the task's `inputs` (local) or `hub.columns` (hub) say
which row column feeds which example field. Local files win whenever present, and then nothing
touches the network (`datasets` is not even imported). A malformed row is one `BertbenchError` naming
the file and line (or the record id).

Devsplit tasks divide one dev file by group (SQuAD: article title, QNLI: question): a group goes to
the evaluation side when a hash of (salt, group key) falls below `eval_fraction`, so the split is
deterministic, needs no state, and no group is on both sides.
"""
from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from bertbench.errors import BertbenchError
from bertbench.tasks import Columns, DevSplit, TaskSpec

Row = tuple[str, dict[str, Any]]  # (where: "file:line" or a record id, the row)


@dataclass
class TextExample:
    """Classification / regression: one text or a pair."""

    id: str
    text_a: str
    text_b: Optional[str]
    label: Union[int, float, None]  # index into task.labels; a float for regression; None when unlabelled


@dataclass
class ChoiceExample:
    """Multiple choice: each choice is the pair (context, prefix + " " + ending)."""

    id: str
    context: str
    prefix: str
    endings: list[str]
    label: Optional[int]


@dataclass
class Answer:
    text: str
    start: int  # character offset into the context


@dataclass
class QAExample:
    """Extractive QA: all gold answers kept (the dev files have several); the first one is trained on."""

    id: str
    title: str
    context: str
    question: str
    answers: list[Answer]
    is_impossible: bool = False


@dataclass
class TokenExample:
    """Token classification: one sentence of words with IOB2 tags, and where it sits in its document."""

    id: str
    words: list[str]
    tags: Optional[list[str]]
    doc_id: str = ""
    sentence_index: int = 0  # position of the sentence in its document


Example = Union[TextExample, ChoiceExample, QAExample, TokenExample]


# ------------------------------------------------------------------------------------------------
# Local files -> rows.


def _delimited_rows(path: Path, delimiter: str, quoting: int, header: Optional[list[str]]) -> Iterator[Row]:
    """Rows of a tsv/csv file as dicts; `header` given = the file has none. Wrong field counts are errors."""
    with open(path, encoding="utf-8-sig", newline="") as fh:  # utf-8-sig: MRPC's files start with a byte-order mark
        reader = csv.reader(fh, delimiter=delimiter, quoting=quoting)
        start = 1
        try:
            if header is None:
                header = next(reader, None)
                if header is None:
                    raise BertbenchError(f"{path}: empty file (expected a header row)")
                start = reader.line_num + 1
            for fields in reader:
                if not fields:
                    start = reader.line_num + 1
                    continue
                if len(fields) != len(header):
                    raise BertbenchError(
                        f"{path}:{start}: expected {len(header)} fields ({', '.join(header)}), got {len(fields)}"
                    )
                yield f"{path}:{start}", dict(zip(header, fields))
                start = reader.line_num + 1
        except csv.Error as err:
            raise BertbenchError(f"{path}:{reader.line_num}: {err}") from None
        except UnicodeDecodeError:
            raise BertbenchError(f"{path}: not UTF-8 text") from None


def _squad_rows(path: Path) -> Iterator[Row]:
    """The official SQuAD JSON flattened to one row per question, in the hub's layout."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as err:
        raise BertbenchError(f"{path}:{err.lineno}: not valid JSON: {err.msg} (column {err.colno})") from None
    except UnicodeDecodeError:
        raise BertbenchError(f"{path}: not UTF-8 text") from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise BertbenchError(f"{path}: not a SQuAD file (expected {{'version': ..., 'data': [articles]}})")
    for a_i, article in enumerate(data["data"]):
        try:
            title = article["title"]
            for para in article["paragraphs"]:
                for qa in para["qas"]:
                    answers = qa.get("answers", [])
                    row = {"id": qa["id"], "title": title, "context": para["context"], "question": qa["question"],
                           "answers": {"text": [x["text"] for x in answers],
                                       "answer_start": [x["answer_start"] for x in answers]},
                           "is_impossible": qa.get("is_impossible", False)}  # v1.1 files: every question answerable
                    yield f"{path} (question id {qa['id']})", row
        except (KeyError, TypeError) as err:
            raise BertbenchError(f"{path}: article {a_i} ({article.get('title', '?') if isinstance(article, dict) else '?'}): "
                                 f"missing or malformed field {err}") from None


def _conll_rows(path: Path, columns: list[str]) -> Iterator[Row]:
    """CoNLL columns: one token per line, a blank line between sentences, `-DOCSTART-` between documents.

    Each row is a sentence: {column: [values]}, plus doc_id (document number in the file, from 0) and
    sentence_index (its position in that document), for optional document context.
    """
    doc, sent_in_doc, doc_has_sentences = 0, 0, False
    current: dict[str, list[str]] = {c: [] for c in columns}
    first_line = 0

    def flush() -> Optional[Row]:
        nonlocal current, sent_in_doc, doc_has_sentences
        if not current[columns[0]]:
            return None
        row = dict(current, doc_id=f"doc{doc}", sentence_index=sent_in_doc)
        current = {c: [] for c in columns}
        sent_in_doc += 1
        doc_has_sentences = True
        return f"{path}:{first_line}", row

    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                parts = line.split()
                if not parts:
                    if (row := flush()) is not None:
                        yield row
                    continue
                if parts[0] == "-DOCSTART-":
                    if (row := flush()) is not None:
                        yield row
                    if doc_has_sentences:
                        doc, sent_in_doc, doc_has_sentences = doc + 1, 0, False
                    continue
                if len(parts) != len(columns):
                    raise BertbenchError(f"{path}:{lineno}: expected {len(columns)} columns ({', '.join(columns)}), got {len(parts)}")
                if not current[columns[0]]:
                    first_line = lineno
                for c, v in zip(columns, parts):
                    current[c].append(v)
    except UnicodeDecodeError:
        raise BertbenchError(f"{path}: not UTF-8 text") from None
    if (row := flush()) is not None:
        yield row


def _local_rows(task: TaskSpec, name: str, path: Path) -> Iterator[Row]:
    local = task.local
    assert local is not None
    header = list(local.columns) if name in local.headerless else None
    if local.format == "tsv":
        return _delimited_rows(path, "\t", csv.QUOTE_NONE, header)  # GLUE: quotes are plain text
    if local.format == "csv":
        return _delimited_rows(path, ",", csv.QUOTE_MINIMAL, header)
    if local.format == "squad_json":
        return _squad_rows(path)
    if local.format == "conll":
        return _conll_rows(path, list(local.columns))
    raise BertbenchError(f"{task.path}: unknown local format {local.format!r}")


# ------------------------------------------------------------------------------------------------
# Rows -> examples (one path per task type, shared by local files and the hub).


def iob1_to_iob2(tags: list[str]) -> list[str]:
    """IOB1 (I- opens an entity unless it follows the same type) -> IOB2 (every entity opens with B-).
    Idempotent: IOB2 input comes back unchanged."""
    out: list[str] = []
    prev = "O"
    for tag in tags:
        if tag.startswith("I-") and (prev == "O" or prev[2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
        prev = tag
    return out


def _class_name(raw: Any, hub_labels: Optional[list[str]], where: str) -> Optional[str]:
    if raw is None:
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw == -1:  # the hub's mark for a hidden (test) label
            return None
        if hub_labels is None:
            return str(raw)
        if not 0 <= raw < len(hub_labels):
            raise BertbenchError(f"{where}: class id {raw} outside the hub's {len(hub_labels)} labels {hub_labels}")
        return hub_labels[raw]
    return str(raw)


def _label_index(task: TaskSpec, raw: Any, hub_labels: Optional[list[str]], where: str) -> Optional[int]:
    name = _class_name(raw, hub_labels, where)
    if name is None:
        return None
    try:
        return task.labels.index(name)
    except ValueError:
        raise BertbenchError(f"{where}: label {name!r} is not one of the task's labels {task.labels}") from None


def _regression_label(raw: Any, where: str, from_hub: bool, scale: Optional[list[float]] = None) -> Optional[float]:
    if raw is None:
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise BertbenchError(f"{where}: regression label {raw!r} is not a number") from None
    if value != value:
        raise BertbenchError(f"{where}: regression label is NaN")
    if from_hub and value == -1.0:  # the hub's hidden test label
        return None
    if scale is not None and not scale[0] <= value <= scale[1]:
        raise BertbenchError(f"{where}: regression label {raw!r} is outside the task's scale {scale[0]:g}-{scale[1]:g}")
    return value


def _get(row: dict[str, Any], col: Optional[str], where: str, what: str) -> Any:
    if col is None:
        return None
    if col not in row:
        raise BertbenchError(f"{where}: no column {col!r} for {what} (columns: {', '.join(map(str, row))})")
    return row[col]


def _text(row: dict[str, Any], col: Optional[str], where: str, what: str) -> Optional[str]:
    value = _get(row, col, where, what)
    if value is not None and not isinstance(value, str):
        raise BertbenchError(f"{where}: {what} ({col!r}) is not text: {value!r}")
    return value


def _check_answer(context: str, text: str, start: Any, where: str) -> Answer:
    if not isinstance(start, int) or isinstance(start, bool) or not isinstance(text, str):
        raise BertbenchError(f"{where}: malformed answer {text!r} at {start!r}")
    if not (0 <= start and start + len(text) <= len(context)):
        raise BertbenchError(f"{where}: answer {text!r} at offset {start} lies outside its context ({len(context)} characters)")
    if context[start:start + len(text)] != text:
        found = context[start:start + len(text)]
        raise BertbenchError(f"{where}: answer {text!r} does not match the context at offset {start} (found {found!r})")
    return Answer(text, start)


def rows_to_examples(task: TaskSpec, rows: Iterable[Row], columns: Columns, hub_labels: Optional[list[str]] = None,
                     split: str = "", from_hub: bool = False) -> list[Example]:
    """Map rows to the task type's examples via `columns`; every value is checked, errors name the row."""
    out: list[Example] = []
    label_col = columns.label
    for n, (where, row) in enumerate(rows):
        rid = row.get(columns.id) if columns.id is not None else None
        ex_id = str(rid) if rid is not None else f"{split or 'row'}-{n}"
        raw = row[label_col] if label_col is not None and label_col in row else None
        if task.type in ("classification", "regression"):
            a = _text(row, columns.text_a, where, "text_a")
            b = _text(row, columns.text_b, where, "text_b")
            label = (_regression_label(raw, where, from_hub, task.label_range) if task.type == "regression"
                     else _label_index(task, raw, hub_labels, where))
            out.append(TextExample(ex_id, a, b, label))
        elif task.type == "multiple_choice":
            endings = [_text(row, c, where, f"ending {i}") for i, c in enumerate(columns.endings or [])]
            out.append(ChoiceExample(ex_id, _text(row, columns.context, where, "context"),
                                     _text(row, columns.prefix, where, "prefix") or "", endings,
                                     _label_index(task, raw, hub_labels, where)))
        elif task.type == "span_qa":
            context = _text(row, columns.context, where, "context")
            ans = _get(row, columns.answers, where, "answers")
            if not isinstance(ans, dict) or len(ans.get("text", ())) != len(ans.get("answer_start", ())):
                raise BertbenchError(f"{where}: answers must be {{'text': [...], 'answer_start': [...]}} of equal length, got {ans!r}")
            answers = [_check_answer(context, t, s, where) for t, s in zip(list(ans["text"]), list(ans["answer_start"]))]
            impossible = bool(row["is_impossible"]) if "is_impossible" in row else not answers
            if impossible and answers:
                raise BertbenchError(f"{where}: marked unanswerable but has answers {[a.text for a in answers]}")
            if not impossible and not answers:
                raise BertbenchError(f"{where}: no answer given (and not marked unanswerable)")
            out.append(QAExample(ex_id, _text(row, columns.title, where, "title") or "", context,
                                 _text(row, columns.question, where, "question"), answers, impossible))
        elif task.type == "token_classification":
            words = list(_get(row, columns.words, where, "words"))
            tags = None
            if columns.tags is not None and columns.tags in row:
                raw_tags = [_class_name(t, hub_labels, where) for t in row[columns.tags]]
                if len(raw_tags) != len(words):
                    raise BertbenchError(f"{where}: {len(words)} words but {len(raw_tags)} tags")
                tags = iob1_to_iob2(raw_tags)  # CoNLL-2003 files are IOB1; idempotent on IOB2 (the hub)
                for t in tags:
                    if t not in task.labels:
                        raise BertbenchError(f"{where}: tag {t!r} is not one of the task's labels {task.labels}")
            out.append(TokenExample(ex_id, words, tags, str(row.get("doc_id", "")), int(row.get("sentence_index", n))))
        else:  # pragma: no cover - task types are validated at load
            raise BertbenchError(f"{task.path}: no reader for task type {task.type!r}")
    if task.type == "span_qa":
        seen: set[str] = set()
        for ex in out:
            if ex.id in seen:
                raise BertbenchError(f"{split}: duplicate question id {ex.id!r}")
            seen.add(ex.id)
    return out


# ------------------------------------------------------------------------------------------------
# Devsplit.


def devsplit_side(key: str, devsplit: DevSplit) -> str:
    """'eval' or 'train' for a group key: sha256(salt, key) as a number in [0, 1) against eval_fraction."""
    digest = hashlib.sha256(f"{devsplit.salt}\x00{key}".encode("utf-8")).digest()
    return "eval" if int.from_bytes(digest[:8], "big") / 2**64 < devsplit.eval_fraction else "train"


def _devsplit_filter(task: TaskSpec, examples: list[Example], side: str) -> list[Example]:
    assert task.devsplit is not None
    return [ex for ex in examples if devsplit_side(str(getattr(ex, task.devsplit.group_by)), task.devsplit) == side]


# ------------------------------------------------------------------------------------------------
# Hub.


def _load_hub_dataset(task: TaskSpec, hub_split: str):
    """One split of the task's hub dataset (tests replace this with local parquet files)."""
    from datasets import load_dataset

    hub = task.hub
    assert hub is not None
    return load_dataset(hub.path, hub.name, split=hub_split, revision=hub.revision)


def _hub_rows(task: TaskSpec, source: str, local_paths: list[Path]) -> Iterator[Row]:
    hub = task.hub
    assert hub is not None
    if source not in hub.splits:
        raise BertbenchError(f"task {task.name!r}: split {source!r} has no hub counterpart (hub splits: {', '.join(hub.splits)})")
    hub_split = hub.splits[source]
    label = f"{hub.path}" + (f" ({hub.name})" if hub.name else "") + f" split {hub_split}"
    try:
        ds = _load_hub_dataset(task, hub_split)
    except Exception as err:  # any failure of the hub (offline, missing, renamed) -> one clear line
        msg = str(err).strip().splitlines()[0] if str(err).strip() else ""
        offline = ", ".join(str(p) for p in local_paths) or "(no local file is defined for this split)"
        raise BertbenchError(f"could not load {label} from the hub ({type(err).__name__}: {msg}); "
                             f"to run without the hub, put the official file at: {offline}") from None
    for i, row in enumerate(ds):
        yield f"{label} row {i}", row


# ------------------------------------------------------------------------------------------------
# Entry points.


SOURCES = ("auto", "local", "hub")  # where task data is read from: local files first, only local, only the hub


def check_source(source: str, name: str = "source") -> None:
    if source not in SOURCES:
        raise BertbenchError(f"{name} {source!r}: expected {', '.join(SOURCES[:-1])} or {SOURCES[-1]}")


def read_split(task: TaskSpec, split: str, data_dir: Optional[Path] = None, source: str = "auto") -> list[Example]:
    """Examples of one split: a role (train/eval/test) or a source split name (e.g. "dev_mismatched").

    source: "auto" (local files when present, else the hub), "local" or "hub". For a devsplit task
    the train and eval roles are the two sides of the divided dev file; a source split name reads the
    whole file. Train and eval examples must be labelled.
    """
    check_source(source)
    data_dir, name, paths, local_ok = _local_files(task, split, data_dir)
    if source == "local" or (source == "auto" and (local_ok or task.hub is None)):
        if not local_ok:
            what = ", ".join(str(p) for p in paths) or f"(task {task.name!r} defines no local file for split {name!r})"
            hint = "" if task.hub is None else " (or allow the hub: source='auto')"
            raise BertbenchError(f"task {task.name!r} split {name!r}: local data missing: {what}{hint}")
        rows = (r for p in paths for r in _local_rows(task, name, p))
        examples = rows_to_examples(task, rows, task.inputs, None, name)
        if not examples:  # a header-only file: fine-tuning would wait for batches that never come
            raise BertbenchError(f"{', '.join(map(str, paths))}: no examples for split {name!r} (the file holds none)")
    else:
        if task.hub is None:
            raise BertbenchError(f"task {task.name!r} has no hub source")
        examples = rows_to_examples(task, _hub_rows(task, name, paths), task.hub.columns, task.hub.labels, name, from_hub=True)
    if task.devsplit is not None and split in ("train", "eval"):
        examples = _devsplit_filter(task, examples, split)
    if split in ("train", "eval") or (split != "test" and name in (task.splits.train, task.splits.eval)):
        _require_labels(task, examples, name)
    return examples


def _require_labels(task: TaskSpec, examples: list[Example], name: str) -> None:
    if task.type == "span_qa":
        return
    for ex in examples:
        missing = ex.tags is None if isinstance(ex, TokenExample) else ex.label is None
        if missing:
            raise BertbenchError(f"task {task.name!r} split {name!r}: example {ex.id!r} has no label "
                                 f"(is the label column {task.inputs.label or task.inputs.tags!r} missing?)")


def _local_files(task: TaskSpec, split: str, data_dir: Optional[Path]) -> tuple[Path, str, list[Path], bool]:
    """(the data folder, the split's source name, its local files, whether every one of them is there)."""
    from bertbench.paths import default_data_dir

    data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
    name = task.source_split(split)
    paths = task.local_files(data_dir, name)
    return data_dir, name, paths, bool(paths) and all(p.is_file() for p in paths)


def _file_name(path: Path, data_dir: Path, spelt: str) -> str:
    """A data file as a record names it: relative to the data folder, else as the task's YAML writes it."""
    try:
        return str(path.relative_to(data_dir))
    except ValueError:  # an absolute path elsewhere, or one beside the task's YAML file
        return spelt


def data_fingerprint(task: TaskSpec, split: str, data_dir: Optional[Path] = None) -> dict[str, Any]:
    """What a split's examples depend on, for result records: local file digests, or the hub coordinates."""
    data_dir, name, paths, local_ok = _local_files(task, split, data_dir)
    out: dict[str, Any] = {"task": task.name, "version": task.version, "split": split, "source_split": name}
    if local_ok:
        out["files"] = {_file_name(p, data_dir, task.local.files[name]): hashlib.sha256(p.read_bytes()).hexdigest()
                         for p in paths}
    elif task.hub is not None:
        out["hub"] = {"path": task.hub.path, "name": task.hub.name, "revision": task.hub.revision,
                      "split": task.hub.splits.get(name)}
    if task.devsplit is not None and split in ("train", "eval"):
        out["devsplit"] = {"group_by": task.devsplit.group_by, "eval_fraction": task.devsplit.eval_fraction,
                           "salt": task.devsplit.salt}
    return out
