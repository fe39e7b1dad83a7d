"""Readers fuzzed with hypothesis: whatever bytes a data file holds, a reader returns examples or raises one
`BertbenchError` naming the file; never another exception (a traceback for the user)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bertbench.errors import BertbenchError

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Text that looks like the formats: their separators, quotes and labels mixed with anything.
pieces = st.sampled_from(["\t", "\n", "\r\n", " ", '"', "'", "0", "1", "5.0", "-1", "nan", "entailment", "not_entailment",
                          "B-PER", "I-ORG", "O", "NNP", "-DOCSTART-", "{", "}", "[", "]", ":", ",", "\ufeff", "é"])
format_like = st.lists(st.one_of(pieces, st.text(max_size=8)), max_size=60).map("".join)


def _raises_only_ours(read, path: Path) -> None:
    try:
        read()
    except BertbenchError as err:
        assert str(path.name) in str(err) or str(path.parent.name) in str(err) or "task" in str(err), str(err)


field = st.one_of(pieces.filter(lambda p: p not in ("\t", "\n", "\r\n")),
                  st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=8))


def rows_of(width: int):
    """Rows of about `width` fields (so a bad value reaches the column parsers), now and then a raw line."""
    row = st.lists(field, min_size=width - 1, max_size=width + 1).map("\t".join)
    return st.lists(st.one_of(row, row, row, format_like), max_size=12).map(lambda rows: "\n".join(rows) + "\n")


GLUE_HEADERS = {"rte": ("RTE", "index\tsentence1\tsentence2\tlabel"),
                "stsb": ("STS-B", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore")}


@FUZZ
@given(task_name=st.sampled_from(sorted(GLUE_HEADERS)), data=st.data())
def test_glue_tsv_reader(task_name, data):
    from bertbench.data.task_readers import read_split
    from tests.reference import get_task

    folder, header = GLUE_HEADERS[task_name]
    body = data.draw(rows_of(header.count("\t") + 1))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "glue" / folder / "train.tsv"
        path.parent.mkdir(parents=True)
        path.write_text(header + "\n" + body, encoding="utf-8")
        _raises_only_ours(lambda: read_split(get_task(task_name), "train", data_dir=Path(d), source="local"), path)


@FUZZ
@given(lines=st.lists(st.one_of(st.just(""), st.lists(field.filter(lambda f: f.strip() and " " not in f), min_size=3,
                                                       max_size=5).map(" ".join), format_like), max_size=30))
def test_conll_reader(lines):
    from bertbench.data.task_readers import read_split
    from tests.reference import get_task

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "conll2003" / "train.txt"
        path.parent.mkdir(parents=True)
        path.write_text("\n".join(lines), encoding="utf-8")
        _raises_only_ours(lambda: read_split(get_task("conll2003"), "train", data_dir=Path(d), source="local"), path)


json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-5, 10 ** 7), st.text(max_size=12)),
                           lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                   st.dictionaries(st.sampled_from(
                                                       ["data", "paragraphs", "context", "qas", "id", "question",
                                                        "answers", "text", "answer_start", "is_impossible", "title"]),
                                                       inner, max_size=5)), max_leaves=25)


@FUZZ
@given(obj=json_values)
def test_squad_reader(obj):
    from bertbench.data.task_readers import read_split
    from tests.reference import get_task

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "squad" / "dev-v1.1.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"version": "1.1", "data": obj}), encoding="utf-8")
        _raises_only_ours(lambda: read_split(get_task("squad_v1_devsplit"), "eval", data_dir=Path(d), source="local"), path)


@FUZZ
@given(body=st.one_of(format_like, st.binary(max_size=200).map(lambda b: b.decode("latin-1"))), suffix=st.sampled_from(
    [".txt", ".jsonl"]))
def test_corpus_reader(body, suffix):
    from bertbench.data.corpus import iter_documents

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"docs{suffix}"
        path.write_text(body, encoding="utf-8")
        _raises_only_ours(lambda: list(iter_documents([str(path)])), path)


@FUZZ
@given(blob=st.binary(max_size=300))
def test_corpus_reader_bytes(blob):
    from bertbench.data.corpus import iter_documents

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "docs.txt"
        path.write_bytes(blob)
        _raises_only_ours(lambda: list(iter_documents([str(path)])), path)


@FUZZ
@given(body=st.one_of(format_like, st.lists(st.sampled_from(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b",
                                                            "", " ", "a"]), max_size=12).map("\n".join)))
def test_vocab_reader(body):
    from bertbench.model.tokenizer import read_vocab_file

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "vocab.txt"
        path.write_text(body, encoding="utf-8")
        _raises_only_ours(lambda: read_vocab_file(path), path)


@pytest.fixture(scope="module")
def good_record() -> dict:
    from conftest import FIXTURES

    found = sorted(FIXTURES.rglob("*.record.json"))
    if not found:
        pytest.skip("no record fixture")
    return json.loads(found[0].read_text())


def _mutations(record: dict):
    """A record with one value somewhere replaced by an arbitrary JSON value."""
    paths = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                paths.append(path + (k,))
                walk(v, path + (k,))

    walk(record, ())
    return st.tuples(st.sampled_from(paths), json_values)


def test_record_reader(good_record):
    from bertbench.results import read_record

    @FUZZ
    @given(change=_mutations(good_record))
    def check(change):
        where, value = change
        record = json.loads(json.dumps(good_record))
        node = record
        for k in where[:-1]:
            node = node[k]
        node[where[-1]] = value
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "x.record.json"
            path.write_text(json.dumps(record), encoding="utf-8")
            _raises_only_ours(lambda: read_record(path), path)

    check()
