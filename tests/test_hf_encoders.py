"""Any Hugging Face encoder on the paper's tasks (issue 57): tiny random RoBERTa, ELECTRA, DistilBERT and DeBERTa-v2
folders (tests/hf_tiny.py: transformers' configs, tokenizers trained here on a slice of the shared corpus) are
fine-tuned a few steps on one task of every head type, their features follow their own tokenizers, their records
say what they are, and what cannot be fine-tuned is refused in one line."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from hf_tiny import ARCHITECTURES, corpus_lines, make_folder  # noqa: E402

transformers = pytest.importorskip("transformers")

from bertbench.cli import app  # noqa: E402
from bertbench.results import load_records  # noqa: E402

runner = CliRunner()
FIXTURE_DATA = Path(__file__).parent / "fixtures" / "tasks" / "data"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DATA = SHARED_DATA if (SHARED_DATA / "squad" / "dev-v1.1.json").is_file() else FIXTURE_DATA
# one task per head type: classification, regression, token classification, span QA (on the real data where it is
# here, the fixtures' copies elsewhere); multiple choice (SWAG) on the fixtures, the only copy here
REAL_TASKS = "sst2,stsb,conll2003,squad_v1_devsplit"
KINDS = {"roberta": "BPE (byte-level)", "electra": "WordPiece", "distilbert": "WordPiece", "deberta-v2": "Unigram"}
SEGMENTS = {"roberta": False, "electra": True, "distilbert": False, "deberta-v2": False}


def _invoke(*args):
    r = runner.invoke(app, list(map(str, args)))
    assert r.exit_code == 0, r.output + repr(r.exception)
    return r


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("hf-encoders")
    lines = corpus_lines()
    return {a: make_folder(work / f"{a}-tiny", a, lines) for a in ARCHITECTURES}


def _finetune(folder: Path, tasks: str, data: Path, out: Path):
    _invoke("finetune", "--model", folder, "--tasks", tasks, "--data-dir", data, "--max-steps", "2", "--seeds", "1",
            "--max-train-examples", "16", "--max-eval-examples", "8", "--batch-size", "8", "--out", out,
            "--precision", "32")


@pytest.fixture(scope="module")
def runs(folders, tmp_path_factory) -> dict[str, Path]:
    """RoBERTa on the real data (the fixtures' SWAG), the others on the fixtures alone: reading the real
    training files costs seconds a model, and the features of each tokenizer on the real data are tested below."""
    out = tmp_path_factory.mktemp("hf-runs")
    for arch, folder in folders.items():
        if arch == "roberta":
            _finetune(folder, REAL_TASKS, DATA, out / arch)
            _finetune(folder, "swag", FIXTURE_DATA, out / arch)
        else:
            _finetune(folder, f"{REAL_TASKS},swag", FIXTURE_DATA, out / arch)
    return {arch: out / arch for arch in folders}


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_head_type_fine_tunes_and_the_record_says_what_the_model_is(runs, arch):
    records = load_records([runs[arch]])
    assert sorted(r.data["task"] for r in records) == sorted([*REAL_TASKS.split(","), "swag"])
    for r in records:
        model = r.data["model"]
        ext = model["external"]
        assert model["pretraining"] is None and ext["format"] == "huggingface"
        assert ext["model_type"] == arch and ext["tokenizer"] == KINDS[arch] and ext["name"] == f"{arch}-tiny"
        assert ext["shape"]["layers"] == 2 and ext["shape"]["hidden"] == 128 and model["size"] == "tiny"
        assert r.data["finetune"]["steps"] == 2
        loss = r.data["extra"]["final_train_loss"]
        assert loss == loss and 0 < loss < 1e3  # trained: a finite loss
        assert r.data["metrics"][r.data["primary_metric"]] is not None


def _examples(task_name: str, data: Path, n: int):
    from bertbench.data.task_readers import read_split
    from reference import get_task

    task = get_task(task_name)
    return task, read_split(task, "eval", data, "local")[:n]


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_squad_windows_and_ner_labels_come_from_the_tokenizers_own_offsets_and_word_ids(folders, arch):
    from bertbench.data.features import build_features, qa_features
    from bertbench.model.hf_encoder import load_generic

    tok = load_generic(folders[arch]).tokenizer
    task, examples = _examples("squad_v1_devsplit", DATA, 20)
    features = qa_features(examples, tok, max_seq_len=96, doc_stride=32)  # windows overlap: every answer fits one
    answered = set()
    for f in features:
        assert ("token_type_ids" in f) == SEGMENTS[arch]  # segment ids only where the model has them
        assert f["input_ids"][0] == tok.fast.cls_token_id and f["input_ids"][-1] == tok.fast.sep_token_id
        if f["start_positions"]:
            ex = examples[f["example_index"]]
            s, e = f["offsets"][f["start_positions"]][0], f["offsets"][f["end_positions"]][1]
            # the gold span read back through the offsets holds the answer (a piece may carry a space or more)
            assert ex.answers[0].text.lower() in ex.context[s:e].lower()
            answered.add(f["example_index"])
    assert answered == set(range(len(examples)))  # every question's answer found in a window
    if arch == "roberta":  # RoBERTa's own pair layout: <s> question </s></s> paragraph </s>
        sep = tok.fast.sep_token_id
        ids = features[0]["input_ids"]
        assert any(ids[k] == ids[k + 1] == sep for k in range(len(ids) - 1))
    task, examples = _examples("conll2003", DATA, 20)
    for f in build_features(task, examples, tok, max_seq_len=64):
        ex = examples[f["example_index"]]
        labelled = [w for w in f["word_index"] if w >= 0]
        assert labelled == list(range(labelled[0], labelled[0] + len(labelled)))  # each word once, first piece
        assert [task.labels[f["labels"][k]] for k, w in enumerate(f["word_index"]) if w >= 0] == \
            [ex.tags[w] for w in labelled]
        assert ("token_type_ids" in f) == SEGMENTS[arch]
        if arch == "roberta":  # each word encoded as in running text, after a space ("Ġ"), as transformers does
            firsts = [tok.backend.id_to_token(f["input_ids"][k]) for k, w in enumerate(f["word_index"]) if w >= 0]
            assert all(p.startswith("Ġ") for p in firsts), firsts


def test_roberta_finetune_is_reported_beside_a_bertbench_variant_by_name_and_architecture(runs, tmp_path):
    ours = tmp_path / "ours"
    _ours_beside(ours, runs["roberta"])
    report = _invoke("report", runs["roberta"], ours, "--out", tmp_path / "board.md")
    label = "HF roberta-tiny (roberta), L2-H128"  # its name and architecture
    assert label in report.output and "tiny MLM+NSP" in report.output
    # the GLUE average stays one row (one terminal column) when the external model joins, even when it covers
    # fewer GLUE tasks than ours (here: SST-2 without STS-B)
    fewer = tmp_path / "fewer"
    shutil.copytree(runs["roberta"], fewer, ignore=shutil.ignore_patterns("stsb"))
    for results, board in ((runs["roberta"], "board.md"), (fewer, "fewer.md")):
        _invoke("report", results, ours, "--out", tmp_path / board)
        [glue] = [line for line in (tmp_path / board).read_text().splitlines() if line.startswith("| GLUE")]
        assert glue.startswith("| GLUE (2 of 8 tasks) |"), glue
    # its provenance note says what its folder states: the architecture and the tokenizer's kind among the rest
    assert "model_type roberta; tokenizer BPE (byte-level)" in (tmp_path / "board.md").read_text()
    # a claim names it by its name, and is judged (paired with our model of its size), not "not run"
    claim = _invoke("report", runs["roberta"], ours, "--out", tmp_path / "board2.md",
                    "--claim", "roberta-tiny − mlm+nsp on stsb > 0")
    [line] = [line for line in claim.output.splitlines() if line.strip().startswith("roberta-tiny − mlm+nsp")]
    assert "not run" not in line and "roberta-tiny − mlm+nsp on stsb" in line, line


def _ours_beside(out: Path, external_run: Path) -> None:
    """A bertbench MLM+NSP variant's records of the same tasks (the external run's records with our model block)."""
    from bertbench.results import write_record

    for r in load_records([external_run]):
        data = json.loads(json.dumps(r.data))
        data["model"] = {"source": "runs/tiny", "fingerprint": "sha256:00000000000000aa", "size": "tiny",
                         "pretraining": {"objective": "mlm+nsp", "mask_ratio": 0.15, "mask_procedure": [80, 10, 10],
                                         "whole_word_mask": False, "tokens_seen": 1000, "wall_seconds": 1.0,
                                         "data_fingerprint": None, "code_version": None, "hardware": None,
                                         "run_dir": None, "heldout": None}}
        write_record(out / data["task"] / Path(r.path).name, data)


def test_the_first_day_example_makes_a_folder_that_fine_tunes_as_the_page_says(tmp_path, monkeypatch):
    """docs/first-day.md's own-encoder example, run as written (its book from the shared corpus, or the fixture
    corpus where that is absent), then fine-tuned on SST-2 for two steps: a RoBERTa with a byte-level BPE."""
    from test_docs_examples import example

    code = example("python example: own HF encoder", "python")
    book = SHARED_DATA / "corpus" / "gutenberg" / "alice_in_wonderland.txt"
    if not book.is_file():
        book = next(p for p in sorted((Path(__file__).parent / "fixtures" / "corpus").rglob("*.txt")))
    code = code.replace('"../shared/data/corpus/gutenberg/alice_in_wonderland.txt"', repr(str(book)))
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/first-day.md", "exec"), {})
    _invoke("finetune", "--model", "roberta-tiny", "--tasks", "sst2", "--data-dir", DATA, "--max-steps", "2",
            "--seeds", "1", "--max-train-examples", "16", "--max-eval-examples", "8", "--out", "results/roberta-tiny")
    [rec] = load_records([tmp_path / "results" / "roberta-tiny"])
    ext = rec.data["model"]["external"]
    assert (ext["model_type"], ext["tokenizer"], ext["name"], rec.data["model"]["size"]) == \
        ("roberta", "BPE (byte-level)", "roberta-tiny", "tiny")
