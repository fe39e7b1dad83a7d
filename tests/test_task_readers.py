"""Task readers: every local format on fixtures (including data absent from ../shared/data), malformed rows
named by file and line, the hub column layouts through local parquet files, devsplits, and the official
example counts on the shared data (integration)."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bertbench.data import task_readers
from bertbench.data.task_readers import (
    ChoiceExample,
    QAExample,
    TextExample,
    TokenExample,
    devsplit_side,
    iob1_to_iob2,
    read_split,
)
from bertbench.errors import BertbenchError
from bertbench.tasks import DevSplit

from tests.reference import get_task, load_tasks

FIXTURE_DATA = Path(__file__).resolve().parent / "fixtures" / "tasks" / "data"
EXAMPLE_TYPE = {"classification": TextExample, "regression": TextExample, "multiple_choice": ChoiceExample,
                "span_qa": QAExample, "token_classification": TokenExample}


def local(name: str, split: str, data_dir: Path = FIXTURE_DATA):
    return read_split(get_task(name), split, data_dir, source="local")


# --- every task, every split, from the fixtures ------------------------------------------------


@pytest.mark.parametrize("name", sorted(load_tasks()))
def test_every_task_reads_every_split_from_fixtures(name):
    task = get_task(name)
    for role in ("train", "eval", "test"):
        if getattr(task.splits, role) is None:
            continue
        examples = read_split(task, role, FIXTURE_DATA, source="local")
        assert examples, (name, role)
        assert all(isinstance(ex, EXAMPLE_TYPE[task.type]) for ex in examples)
        if role != "test" and task.type != "span_qa":
            assert all((ex.tags if task.type == "token_classification" else ex.label) is not None for ex in examples)


def test_cola_headerless_and_quotes_kept_as_text():
    train = local("cola", "train")
    assert [ex.label for ex in train] == [1, 0, 1, 0]  # labels ["0", "1"]: index = the digit
    assert train[2].text_a == 'She said "hello and left.'  # QUOTE_NONE: the quote does not swallow rows
    assert train[0].text_b is None and train[0].id == "train-0"
    assert len(local("cola", "eval")) == 2  # last line without a newline
    test = local("cola", "test")
    assert [(ex.id, ex.label) for ex in test] == [("0", None), ("1", None)]


def test_mrpc_byte_order_mark_and_columns():
    train = local("mrpc", "train")
    assert [ex.label for ex in train] == [1, 0, 1]
    assert train[0].text_b == '"Profits rose, the company said.'


def test_mnli_matched_and_mismatched():
    mnli, mm = get_task("mnli"), get_task("mnli_mismatched")
    train = read_split(mnli, "train", FIXTURE_DATA)
    assert [mnli.labels[ex.label] for ex in train] == ["entailment", "contradiction", "neutral"]
    assert train[2].text_a == 'The "old town" is small.'
    assert read_split(mnli, "eval", FIXTURE_DATA)[0].text_a == "The meeting was cancelled."
    assert read_split(mm, "eval", FIXTURE_DATA)[0].text_a == "Thank you for your gift."
    assert read_split(mm, "test", FIXTURE_DATA)[0].label is None
    assert read_split(mnli, "dev_mismatched", FIXTURE_DATA)[1].label == mnli.labels.index("neutral")


def test_qqp_stsb_qnli_wnli_layouts():
    qqp = local("qqp", "train")
    assert (qqp[0].id, qqp[0].label, qqp[2].text_a) == ("201", 1, 'What does "carpe diem" mean?')
    sts = local("stsb", "train")
    assert [ex.label for ex in sts] == [5.0, 0.5, 4.2]
    assert local("stsb", "test")[0].label is None
    qnli = local("qnli", "eval")
    assert qnli[0].text_a == "What is the capital of France?" and qnli[1].label == 1  # not_entailment
    assert [ex.label for ex in local("wnli", "train")] == [0, 1]


def test_squad_v1_keeps_all_dev_answers():
    dev = local("squad_v1", "eval")
    assert [ex.id for ex in dev] == ["d1", "d2", "d3", "d4"]
    assert [a.text for a in dev[0].answers] == ["O", "O", "symbol O"]
    for ex in dev:
        for a in ex.answers:
            assert ex.context[a.start:a.start + len(a.text)] == a.text
    train = local("squad_v1", "train")
    assert train[0].title == "Normans" and not any(ex.is_impossible for ex in train)


def test_squad_v2_unanswerable():
    train = local("squad_v2", "train")
    assert [(ex.id, ex.is_impossible, len(ex.answers)) for ex in train] == [("t1", False, 1), ("t2", True, 0)]
    dev = local("squad_v2", "eval")
    assert dev[1].is_impossible and dev[1].answers == []


def test_swag_csv():
    train = local("swag", "train")
    assert train[0] == ChoiceExample("5", "Someone opens the door.", "He",
                                     ["walks inside, smiling.", "eats the door.", "flies to the moon.", "sings, loudly, to a fish."], 0)
    assert train[1].endings[3] == 'reads a "book".' and train[1].label == 1
    assert local("swag", "test")[0].label is None


def test_conll_iob1_to_iob2_and_documents():
    train = local("conll2003", "train")
    assert [ex.words for ex in train][:2] == [["EU", "rejects", "German", "call", "."], ["Peter", "Blackburn"]]
    assert train[0].tags == ["B-ORG", "O", "B-MISC", "O", "O"]
    assert train[1].tags == ["B-PER", "I-PER"]
    assert train[3].tags == ["B-LOC", "B-LOC", "O", "B-LOC", "O"]  # I-LOC B-LOC O I-LOC in IOB1
    assert [(ex.doc_id, ex.sentence_index) for ex in train] == [("doc0", 0), ("doc0", 1), ("doc1", 0), ("doc1", 1)]


def test_iob1_to_iob2():
    assert iob1_to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG"]) == \
        ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-ORG"]
    iob2 = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-ORG"]
    assert iob1_to_iob2(iob2) == iob2  # idempotent: IOB2 comes back unchanged


def test_conll_reader_matches_the_datasets_conll_builder():
    """The packaged `conll` builder (no document ids, no line numbers) reads the same sentences."""
    from datasets import load_dataset

    path = FIXTURE_DATA / "conll2003" / "train.txt"
    ds = load_dataset("conll", data_files={"train": str(path)}, split="train",
                      column_names=["tokens", "pos_tags", "chunk_tags", "ner_tags"])
    ours = local("conll2003", "train")
    assert [ex.words for ex in ours] == ds["tokens"]
    assert [ex.tags for ex in ours] == [iob1_to_iob2(t) for t in ds["ner_tags"]]


# --- malformed rows: one error naming file and line (or record id) --------------------------------


def copy_task_data(tmp_path: Path, rel: str, text: str) -> Path:
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_tsv_wrong_field_count_names_line(tmp_path):
    path = copy_task_data(tmp_path, "glue/RTE/dev.tsv",
                          "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\n")
    with pytest.raises(BertbenchError, match=rf"{path}:3: expected 4 fields .* got 3"):
        local("rte", "eval", tmp_path)


def test_tsv_unknown_label_names_line(tmp_path):
    path = copy_task_data(tmp_path, "glue/RTE/dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailed\n")
    with pytest.raises(BertbenchError, match=rf"{path}:2: label 'entailed' is not one of .*entailment"):
        local("rte", "eval", tmp_path)


def test_missing_label_column_in_a_labelled_split(tmp_path):
    copy_task_data(tmp_path, "glue/RTE/dev.tsv", "index\tsentence1\tsentence2\n0\ta\tb\n")
    with pytest.raises(BertbenchError, match="has no label"):
        local("rte", "eval", tmp_path)


def test_missing_text_column(tmp_path):
    path = copy_task_data(tmp_path, "glue/RTE/dev.tsv", "index\tpremise\tsentence2\tlabel\n0\ta\tb\tentailment\n")
    with pytest.raises(BertbenchError, match=rf"{path}:2: no column 'sentence1'"):
        local("rte", "eval", tmp_path)


def test_stsb_bad_score(tmp_path):
    head = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    path = copy_task_data(tmp_path, "glue/STS-B/dev.tsv", head + "0\tg\tf\ty\t0\tn\tn\ta\tb\tfive\n")
    with pytest.raises(BertbenchError, match=rf"{path}:2: regression label 'five' is not a number"):
        local("stsb", "eval", tmp_path)


def test_squad_bad_json_names_line(tmp_path):
    path = copy_task_data(tmp_path, "squad/dev-v1.1.json", '{"version": "1.1",\n "data": [\n  {"title": }\n]}')
    with pytest.raises(BertbenchError, match=rf"{path}:3: not valid JSON"):
        local("squad_v1", "eval", tmp_path)


def squad_file(context: str, text: str, start: int) -> str:
    qa = {"id": "q9", "question": "?", "answers": [{"text": text, "answer_start": start}]}
    return json.dumps({"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": context, "qas": [qa]}]}]})


@pytest.mark.parametrize("text, start, expected", [
    ("cat", 40, "lies outside its context"),
    ("cat", -1, "lies outside its context"),
    ("cat", 4, r"does not match the context at offset 4 \(found 'sat'\)"),
])
def test_squad_answer_checked_against_context(tmp_path, text, start, expected):
    path = copy_task_data(tmp_path, "squad/dev-v1.1.json", squad_file("The sat cat.", text, start))
    with pytest.raises(BertbenchError, match=rf"{path} \(question id q9\): answer 'cat'.*{expected}"):
        local("squad_v1", "eval", tmp_path)


def test_squad_structure_errors(tmp_path):
    copy_task_data(tmp_path, "squad/dev-v1.1.json", json.dumps({"version": "1.1", "data": [{"title": "T"}]}))
    with pytest.raises(BertbenchError, match="article 0 \\(T\\): missing or malformed field 'paragraphs'"):
        local("squad_v1", "eval", tmp_path)
    copy_task_data(tmp_path, "squad/dev-v1.1.json", json.dumps([1, 2]))
    with pytest.raises(BertbenchError, match="not a SQuAD file"):
        local("squad_v1", "eval", tmp_path)


def test_squad_v1_question_without_answer(tmp_path):
    doc = {"version": "1.1", "data": [{"title": "T", "paragraphs": [
        {"context": "abc", "qas": [{"id": "q1", "question": "?", "answers": []}]}]}]}
    copy_task_data(tmp_path, "squad/dev-v1.1.json", json.dumps(doc))
    with pytest.raises(BertbenchError, match=r"question id q1\): no answer given"):
        local("squad_v1", "eval", tmp_path)


def test_conll_wrong_columns_and_unknown_tag(tmp_path):
    path = copy_task_data(tmp_path, "conll2003/valid.txt", "-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ\n")
    with pytest.raises(BertbenchError, match=rf"{path}:4: expected 4 columns"):
        local("conll2003", "eval", tmp_path)
    path = copy_task_data(tmp_path, "conll2003/valid.txt", "\nEU NNP I-NP I-ORG\nrejects VBZ I-VP I-FOO\n")
    with pytest.raises(BertbenchError, match=rf"{path}:2: tag 'B-FOO' is not one of"):
        local("conll2003", "eval", tmp_path)


def test_swag_bad_label_and_ragged_row(tmp_path):
    head = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
    path = copy_task_data(tmp_path, "swag/val.csv", head + '0,v,1,"A. B",A.,B,gold,e0,e1,e2,e3,7\n')
    with pytest.raises(BertbenchError, match=rf"{path}:2: label '7' is not one of"):
        local("swag", "eval", tmp_path)
    path = copy_task_data(tmp_path, "swag/val.csv", head + '0,v,1,"A. B",A.,B,gold,e0,e1,e2,e3,1\n1,v,2,x\n')
    with pytest.raises(BertbenchError, match=rf"{path}:3: expected 12 fields"):
        local("swag", "eval", tmp_path)


def test_local_only_with_missing_file_names_it(tmp_path):
    with pytest.raises(BertbenchError, match=rf"local data missing: {tmp_path}/glue/RTE/dev.tsv"):
        local("rte", "eval", tmp_path)


def test_unknown_split_suggests():
    with pytest.raises(BertbenchError, match="Did you mean: dev_matched"):
        read_split(get_task("mnli"), "dev_mached", FIXTURE_DATA)


# --- hub layouts, through local parquet files -----------------------------------------------------


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    """Replace the hub with parquet files written here: {(path, name, split): rows}."""
    import pandas as pd
    from datasets import load_dataset

    tables: dict[tuple, Path] = {}
    calls: list[tuple] = []

    def add(path: str, name, split: str, rows: list[dict]) -> None:
        f = tmp_path / f"hub-{len(tables)}.parquet"
        pd.DataFrame(rows).to_parquet(f)
        tables[(path, name, split)] = f

    def fake_load(task, hub_split):
        key = (task.hub.path, task.hub.name, hub_split)
        calls.append(key)
        if key not in tables:
            raise FileNotFoundError(f"no such hub split {key}")
        return load_dataset("parquet", data_files={"x": str(tables[key])}, split="x")

    monkeypatch.setattr(task_readers, "_load_hub_dataset", fake_load)
    add.calls = calls
    return add


def test_hub_glue_int_labels_map_to_the_local_label_order(tmp_path, fake_hub):
    mnli = get_task("mnli")
    fake_hub("nyu-mll/glue", "mnli", "validation_mismatched", [
        {"premise": "P0", "hypothesis": "H0", "label": 0, "idx": 0},  # hub 0 = entailment
        {"premise": "P1", "hypothesis": "H1", "label": 2, "idx": 1},  # hub 2 = contradiction
    ])
    ex = read_split(get_task("mnli_mismatched"), "eval", tmp_path)  # no local files: the hub serves
    assert ex == [TextExample("0", "P0", "H0", mnli.labels.index("entailment")),
                  TextExample("1", "P1", "H1", mnli.labels.index("contradiction"))]
    assert fake_hub.calls == [("nyu-mll/glue", "mnli", "validation_mismatched")]


def test_hub_test_labels_are_unlabelled(tmp_path, fake_hub):
    fake_hub("nyu-mll/glue", "stsb", "test", [{"sentence1": "a", "sentence2": "b", "label": -1.0, "idx": 0}])
    fake_hub("nyu-mll/glue", "stsb", "validation", [{"sentence1": "a", "sentence2": "b", "label": 3.8, "idx": 0}])
    assert read_split(get_task("stsb"), "test", tmp_path)[0].label is None
    assert read_split(get_task("stsb"), "eval", tmp_path)[0].label == pytest.approx(3.8)
    fake_hub("nyu-mll/glue", "rte", "test", [{"sentence1": "a", "sentence2": "b", "label": -1, "idx": 0}])
    assert read_split(get_task("rte"), "test", tmp_path)[0].label is None


def test_hub_bad_class_id(tmp_path, fake_hub):
    fake_hub("nyu-mll/glue", "rte", "validation", [{"sentence1": "a", "sentence2": "b", "label": 5, "idx": 0}])
    with pytest.raises(BertbenchError, match=r"nyu-mll/glue \(rte\) split validation row 0: class id 5 outside"):
        read_split(get_task("rte"), "eval", tmp_path)


def test_hub_squad_matches_local_examples(tmp_path, fake_hub):
    local_dev = local("squad_v1", "eval")
    rows = [{"id": ex.id, "title": ex.title, "context": ex.context, "question": ex.question,
             "answers": {"text": [a.text for a in ex.answers], "answer_start": [a.start for a in ex.answers]}}
            for ex in local_dev]
    fake_hub("rajpurkar/squad", "plain_text", "validation", rows)
    assert read_split(get_task("squad_v1"), "eval", tmp_path) == local_dev
    # v2 on the hub: no is_impossible column, an unanswerable question has empty answer lists
    v2 = local("squad_v2", "eval")
    rows = [{"id": ex.id, "title": ex.title, "context": ex.context, "question": ex.question,
             "answers": {"text": [a.text for a in ex.answers], "answer_start": [a.start for a in ex.answers]}} for ex in v2]
    fake_hub("rajpurkar/squad_v2", "squad_v2", "validation", rows)
    assert read_split(get_task("squad_v2"), "eval", tmp_path) == v2


def test_hub_squad_devsplit_divides_the_hub_dev_the_same_way(tmp_path, fake_hub):
    dev = local("squad_v1", "eval")
    rows = [{"id": ex.id, "title": ex.title, "context": ex.context, "question": ex.question,
             "answers": {"text": [a.text for a in ex.answers], "answer_start": [a.start for a in ex.answers]}} for ex in dev]
    fake_hub("rajpurkar/squad", "plain_text", "validation", rows)
    task = get_task("squad_v1_devsplit")
    for side in ("train", "eval"):
        assert read_split(task, side, tmp_path) == read_split(task, side, FIXTURE_DATA)


def test_hub_swag_and_conll(tmp_path, fake_hub):
    fake_hub("allenai/swag", "regular", "validation", [{
        "video-id": "v", "fold-ind": "7", "startphrase": "A. He", "sent1": "A.", "sent2": "He", "gold-source": "gold",
        "ending0": "e0", "ending1": "e1", "ending2": "e2", "ending3": "e3", "label": 3}])
    assert read_split(get_task("swag"), "eval", tmp_path) == [ChoiceExample("7", "A.", "He", ["e0", "e1", "e2", "e3"], 3)]
    conll = get_task("conll2003")
    fake_hub("eriktks/conll2003", "conll2003", "validation", [
        {"id": "0", "tokens": ["EU", "rejects", "German", "call"], "pos_tags": [22, 42, 16, 21],
         "chunk_tags": [11, 21, 11, 12], "ner_tags": [3, 0, 7, 0]}])
    ex = read_split(conll, "eval", tmp_path)
    assert ex == [TokenExample("0", ["EU", "rejects", "German", "call"], ["B-ORG", "O", "B-MISC", "O"], "", 0)]


def test_hub_failure_is_one_line_naming_the_local_files(tmp_path, fake_hub):
    with pytest.raises(BertbenchError) as err:
        read_split(get_task("qqp"), "train", tmp_path)
    msg = str(err.value)
    assert "\n" not in msg and "could not load nyu-mll/glue (qqp) split train from the hub (FileNotFoundError" in msg
    assert f"put the official file at: {tmp_path}/glue/QQP/train.tsv" in msg


def test_real_hub_offline_fails_fast_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(BertbenchError, match=rf"could not load allenai/swag \(regular\) split validation.*{tmp_path}/swag/val.csv"):
        read_split(get_task("swag"), "eval", tmp_path)


def test_local_files_win_and_nothing_touches_the_network():
    """With the local file present, the hub loader is never called and `datasets` is never imported."""
    code = (
        "import sys\n"
        "from bertbench.data import task_readers\n"
        "from bertbench.tasks import valid_tasks\n"
        "def boom(*a, **k): raise AssertionError('hub used')\n"
        "task_readers._load_hub_dataset = boom\n"
        f"ex = task_readers.read_split(valid_tasks()['mnli'], 'train', {str(FIXTURE_DATA)!r})\n"
        "assert len(ex) == 3\n"
        "assert 'datasets' not in sys.modules, 'datasets imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- devsplit ----------------------------------------------------------------------------------


def test_devsplit_side_is_deterministic_and_near_the_fraction():
    ds = DevSplit(group_by="title", eval_fraction=0.3)
    sides = [devsplit_side(f"article {i}", ds) for i in range(4000)]
    assert sides == [devsplit_side(f"article {i}", ds) for i in range(4000)]
    assert 0.27 < sides.count("eval") / len(sides) < 0.33
    other = [devsplit_side(f"article {i}", dataclasses.replace(ds, salt="another")) for i in range(4000)]
    assert other != sides  # the salt picks another split


@pytest.mark.parametrize("name, group", [("squad_v1_devsplit", "title"), ("qnli_devsplit", "text_a"),
                                          ("squad_v2_devsplit", "title")])
def test_devsplit_sides_partition_the_dev_file_by_group(name, group):
    task = get_task(name)
    train, ev = read_split(task, "train", FIXTURE_DATA), read_split(task, "eval", FIXTURE_DATA)
    whole = read_split(task, "dev", FIXTURE_DATA)
    assert sorted(ex.id for ex in train + ev) == sorted(ex.id for ex in whole)
    assert not {getattr(ex, group) for ex in train} & {getattr(ex, group) for ex in ev}


# --- the shared data: official counts (integration) ----------------------------------------------

COUNTS = [
    ("rte", "eval", 277), ("rte", "train", 2490), ("mrpc", "eval", 408), ("mrpc", "train", 3668),
    ("cola", "eval", 1043), ("cola", "train", 8551), ("stsb", "eval", 1500), ("stsb", "train", 5749),
    ("sst2", "eval", 872), ("sst2", "train", 67349), ("qnli", "eval", 5463), ("wnli", "eval", 71),
    ("wnli", "train", 635), ("squad_v1", "eval", 10570), ("squad_v2_devsplit", "dev", 6078),
    ("conll2003", "train", 14041), ("conll2003", "eval", 3250), ("conll2003", "test", 3453),
]


@pytest.mark.integration
@pytest.mark.parametrize("name, split, n", COUNTS)
def test_official_example_counts(shared_data, name, split, n):
    assert len(read_split(get_task(name), split, shared_data, source="local")) == n


@pytest.mark.integration
def test_shared_data_details(shared_data):
    cola = read_split(get_task("cola"), "train", shared_data, source="local")
    assert sum(ex.label == 1 for ex in cola) == 6023  # SOURCES.md: 6023 acceptable / 2528 not
    rte = read_split(get_task("rte"), "train", shared_data, source="local")
    assert sum(ex.label == 0 for ex in rte) == 1249  # entailment
    half = read_split(get_task("squad_v2_devsplit"), "dev", shared_data, source="local")
    assert sum(not ex.is_impossible for ex in half) == 2910
    conll = get_task("conll2003")
    for split, tokens, docs in (("train", 203621, 946), ("eval", 51362, 216), ("test", 46435, 231)):
        ex = read_split(conll, split, shared_data, source="local")
        assert sum(len(e.words) for e in ex) == tokens
        assert len({e.doc_id for e in ex}) == docs


@pytest.mark.integration
@pytest.mark.parametrize("name, group", [("squad_v1_devsplit", "title"), ("qnli_devsplit", "text_a"),
                                          ("squad_v2_devsplit", "title")])
def test_shared_devsplits_do_not_leak(shared_data, name, group):
    task = get_task(name)
    train, ev = read_split(task, "train", shared_data), read_split(task, "eval", shared_data)
    assert not {getattr(ex, group) for ex in train} & {getattr(ex, group) for ex in ev}
    assert len(train) + len(ev) == len(read_split(task, "dev", shared_data))
    print(f"{name}: {len(train)} train / {len(ev)} eval examples")


@pytest.mark.integration
def test_shared_conll_matches_the_datasets_builder(shared_data):
    from datasets import load_dataset

    path = shared_data / "conll2003" / "valid.txt"
    ds = load_dataset("conll", data_files={"validation": str(path)}, split="validation",
                      column_names=["tokens", "pos_tags", "chunk_tags", "ner_tags"])
    ours = read_split(get_task("conll2003"), "eval", shared_data, source="local")
    assert [ex.words for ex in ours] == ds["tokens"]


# --- data fingerprint ----------------------------------------------------------------------------


def test_data_fingerprint(tmp_path):
    import hashlib

    from bertbench.data.task_readers import data_fingerprint

    fp = data_fingerprint(get_task("rte"), "eval", FIXTURE_DATA)
    digest = hashlib.sha256((FIXTURE_DATA / "glue/RTE/dev.tsv").read_bytes()).hexdigest()
    assert fp == {"task": "rte", "version": 1, "split": "eval", "source_split": "dev",
                  "files": {"glue/RTE/dev.tsv": digest}}
    hub = data_fingerprint(get_task("mnli_mismatched"), "eval", tmp_path)["hub"]
    assert hub == {"path": "nyu-mll/glue", "name": "mnli", "revision": None, "split": "validation_mismatched"}
    dev = data_fingerprint(get_task("squad_v1_devsplit"), "train", FIXTURE_DATA)
    assert dev["devsplit"] == {"group_by": "title", "eval_fraction": 0.3, "salt": "bertbench-devsplit-v1"}
