"""`bertbench finetune` end to end on fixture files of every format: records, predictions files, skips."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.results import load_records

runner = CliRunner()
FIXTURE_DATA = Path(__file__).parent / "fixtures" / "tasks" / "data"
VOCAB = Path(__file__).parent / "fixtures" / "corpus" / "vocab.txt"
ALL_TYPES = "rte,stsb,mnli,qqp,swag,squad_v1,squad_v2,conll2003"
EXPECTED_FILES = {
    "rte": ".predictions.tsv", "stsb": ".predictions.tsv", "mnli": ".predictions.tsv", "qqp": ".predictions.tsv",
    "swag": ".predictions.tsv", "squad_v1": ".predictions.json", "squad_v2": ".predictions.json",
    "conll2003": ".predictions.conll",
}


def finetune(*args):
    r = runner.invoke(app, ["finetune", *args])
    assert r.exit_code == 0, r.output + repr(r.exception)
    return r


def test_every_task_type_end_to_end_on_fixtures(tmp_path):
    out = tmp_path / "out"
    r = finetune("--model", "random:tiny", "--tokenizer", str(VOCAB), "--tasks", ALL_TYPES, "--data-dir", str(FIXTURE_DATA),
                 "--max-steps", "3", "--seeds", "1", "--out", str(out), "--precision", "32")
    records = load_records([out])
    by_task = {rec.data["task"]: rec for rec in records}
    assert set(by_task) == set(EXPECTED_FILES), r.output
    for task, rec in by_task.items():
        data = rec.data
        assert data["model"]["pretraining"] is None  # the random-init control
        assert data["finetune"]["max_steps"] == 3 and data["finetune"]["steps"] <= 3
        assert data["metrics"][data["primary_metric"]] is not None
        pred = rec.path.parent / data["predictions_file"]
        assert pred.is_file() and pred.name.endswith(EXPECTED_FILES[task]), pred
        assert data["split"]["eval_size"] > 0
    v2 = by_task["squad_v2"].data
    assert {"squad_v2_f1", "best_f1", "best_f1_thresh"} <= set(v2["metrics"])
    assert any(f.endswith("null_odds.json") for f in v2["extra"]["other_files"])
    preds = json.loads((by_task["squad_v1"].path.parent / by_task["squad_v1"].data["predictions_file"]).read_text())
    assert len(preds) == by_task["squad_v1"].data["split"]["eval_size"]
    conll = (by_task["conll2003"].path.parent / by_task["conll2003"].data["predictions_file"]).read_text()
    assert len(conll.splitlines()[0].split()) == 3  # word, gold, predicted
    # per-example statistics the report resamples dev examples on: one per sentence / question, reproducing the metric
    from bertbench.report.model import per_example_stats

    for task, metric in (("conll2003", "seqeval_f1"), ("squad_v1", "squad_f1"), ("squad_v1", "squad_em")):
        stats = per_example_stats(by_task[task].data, metric)
        assert stats is not None and len(stats) == by_task[task].data["split"]["eval_size"], (task, metric)


def test_pretrained_checkpoint_source_carries_its_summary(tmp_path):
    from bertbench.model.checkpoint import save_checkpoint
    from bertbench.config import ModelConfig
    from bertbench.model.bert import BertForPreTraining
    from bertbench.model.tokenizer import WordPieceTokenizer

    tok = WordPieceTokenizer.from_vocab(VOCAB)
    torch.manual_seed(0)
    model = BertForPreTraining(ModelConfig(vocab_size=tok.vocab_size, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, causal=True))
    # an NSP head in the weights (no run config says otherwise); the records carry the summary's objective
    summary = {"objective": "clm", "tokens_seen": 1234, "wall_seconds": 5.0, "data_fingerprint": "abc",
               "code_version": "test", "hardware": "cpu", "run_dir": str(tmp_path), "heldout": {"clm_loss": 3.0}}
    save_checkpoint(tmp_path / "ckpt", model, tok, run_config={})
    (tmp_path / "ckpt" / "summary.json").write_text(json.dumps(summary))  # with a machine path in run_dir
    out = tmp_path / "out"
    finetune("--model", str(tmp_path / "ckpt"), "--tasks", "rte,conll2003", "--data-dir", str(FIXTURE_DATA),
             "--max-steps", "2", "--seeds", "1,2", "--out", str(out), "--precision", "32")
    records = load_records([out])
    assert len(records) == 4
    for rec in records:
        pre = rec.data["model"]["pretraining"]
        assert pre["objective"] == "clm" and pre["tokens_seen"] == 1234 and "nsp" not in pre
        assert json.loads(rec.path.read_text())["schema_version"] == 2
        # no machine path in the file: the run folder and the model keep their last parts only
        assert pre["run_dir"] == Path(*tmp_path.parts[-2:]).as_posix() and str(tmp_path) not in rec.path.read_text()
        assert rec.data["model"]["source"] == Path(*(tmp_path / "ckpt").parts[-3:]).as_posix()
        assert rec.data["model"]["fingerprint"].startswith("sha256:")
    assert sorted(r.data["seed"] for r in records if r.data["task"] == "rte") == [1, 2]


def test_group_skips_missing_data_and_names_the_file(tmp_path, monkeypatch):
    partial = tmp_path / "data"
    (partial / "glue").mkdir(parents=True)
    import shutil

    shutil.copytree(FIXTURE_DATA / "glue" / "RTE", partial / "glue" / "RTE")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    r = finetune("--model", "random:tiny", "--tokenizer", str(VOCAB), "--tasks", "glue", "--data-dir", str(partial),
                 "--max-steps", "1", "--seeds", "1", "--out", str(tmp_path / "out"), "--precision", "32")
    assert "skip mrpc: no local data" in r.output and str(partial / "glue" / "MRPC") in r.output
    assert "skip cola" in r.output
    assert len(load_records([tmp_path / "out"])) == 1
    r = runner.invoke(app, ["finetune", "--model", "random:tiny", "--tokenizer", str(VOCAB), "--tasks", "mrpc",
                            "--data-dir", str(partial), "--out", str(tmp_path / "o2")])
    assert r.exit_code == 2 and "no task ran" in r.output


def test_unknown_task_and_bad_model_are_clear_errors(tmp_path):
    r = runner.invoke(app, ["finetune", "--model", "random:tiny", "--tokenizer", str(VOCAB), "--tasks", "cloa",
                            "--data-dir", str(FIXTURE_DATA), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "cola" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["finetune", "--model", str(tmp_path / "nope"), "--tasks", "rte",
                            "--data-dir", str(FIXTURE_DATA), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "not found" in r.output
    r = runner.invoke(app, ["finetune", "--model", "random:tiny", "--tokenizer", str(VOCAB), "--tasks", "rte",
                            "--precision", "fp16", "--data-dir", str(FIXTURE_DATA), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "bf16-mixed, 32-true or auto" in r.output  # not a silent fp32 run labelled fp16


def test_malformed_rows_name_file_and_line(tmp_path):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(FIXTURE_DATA / "glue" / "RTE", data / "glue" / "RTE")
    train = data / "glue" / "RTE" / "train.tsv"
    lines = train.read_text().splitlines()
    lines[2] = lines[2].rsplit("\t", 1)[0] + "\tmaybe"  # a label not in the task's label list
    train.write_text("\n".join(lines) + "\n")
    r = runner.invoke(app, ["finetune", "--model", "random:tiny", "--tokenizer", str(VOCAB), "--tasks", "rte",
                            "--data-dir", str(data), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "train.tsv:3" in r.output and "maybe" in r.output, r.output


def test_fine_tuning_uses_the_papers_dropout_whatever_the_pre_training_used(tmp_path):
    """A CPU recipe pre-trains without dropout; its checkpoint says 0.0, and fine-tuning must still run at 0.1."""
    from bertbench.model.checkpoint import save_checkpoint
    from bertbench.config import PAPER_DROPOUT, ModelConfig
    from bertbench.model.bert import BertForPreTraining, Dropout
    from bertbench.model.tokenizer import WordPieceTokenizer
    from bertbench.training.finetune_run import resolve_model_source

    tok = WordPieceTokenizer.from_vocab(VOCAB)
    cfg = ModelConfig(vocab_size=tok.vocab_size, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                      dropout=0.0, attention_dropout=0.0)
    save_checkpoint(tmp_path / "ckpt", BertForPreTraining(cfg), tok, run_config={}, summary=None)
    source = resolve_model_source(str(tmp_path / "ckpt"), None, tmp_path)
    assert source.config.dropout == source.config.attention_dropout == PAPER_DROPOUT == 0.1
    encoder = source.backbone(seed=1)
    rates = {m.p for m in encoder.modules() if isinstance(m, Dropout)}
    assert rates == {PAPER_DROPOUT}
    assert all(layer.attn.attn_dropout == PAPER_DROPOUT for layer in encoder.layers)


def test_a_record_carries_the_pretrain_seed_of_its_checkpoint(tmp_path):
    """`finetune --model <our checkpoint>` reads the pre-training's seed from the checkpoint's own config;
    random init, and a checkpoint whose config names no seed, give null."""
    from bertbench.config import ModelConfig
    from bertbench.model.bert import BertForPreTraining
    from bertbench.model.checkpoint import save_checkpoint
    from bertbench.model.tokenizer import WordPieceTokenizer

    tok = WordPieceTokenizer.from_vocab(VOCAB)
    model = BertForPreTraining(ModelConfig(vocab_size=tok.vocab_size, hidden_size=32, num_layers=2, num_heads=2,
                                           intermediate_size=64, causal=True), nsp=False)  # clm trains no NSP head
    summary = {"objective": "clm", "tokens_seen": 10, "wall_seconds": 5.0, "data_fingerprint": "abc",
               "code_version": "test", "hardware": "cpu", "run_dir": "x", "heldout": {},
               "procedure_fingerprint": "sha256:0123456789abcdef"}
    got = {}
    for name, run_config in (("seeded", {"seed": 7, "objective": "clm"}), ("unknown", {"objective": "clm"})):
        save_checkpoint(tmp_path / name, model, tok, run_config=run_config)
        (tmp_path / name / "summary.json").write_text(json.dumps(summary))  # a pre-training's summary beside it
        finetune("--model", str(tmp_path / name), "--tasks", "rte", "--data-dir", str(FIXTURE_DATA), "--max-steps", "1",
                 "--seeds", "1", "--out", str(tmp_path / f"out-{name}"), "--precision", "32")
        records = load_records([tmp_path / f"out-{name}"])
        got[name] = [rec.data.get("pretrain_seed") for rec in records]
        # and the procedure its seeds share (results.pretraining_procedure)
        assert [rec.data["model"]["pretraining"]["procedure_fingerprint"] for rec in records] \
            == [summary["procedure_fingerprint"]]
    finetune("--model", "random:tiny", "--tokenizer", str(VOCAB), "--tasks", "rte", "--data-dir", str(FIXTURE_DATA),
             "--max-steps", "1", "--seeds", "1", "--out", str(tmp_path / "out-random"), "--precision", "32")
    got["random"] = [rec.data.get("pretrain_seed") for rec in load_records([tmp_path / "out-random"])]
    assert got == {"seeded": [7], "unknown": [None], "random": [None]}


def test_records_carry_per_example_predictions_the_report_can_join(tmp_path):
    # The multi-bootstrap recomputes each record's metric from its per-example predictions and gold: a record
    # whose stored predictions do not reproduce its own metric would make every interval wrong.
    from tests.reference import metric_on_examples

    out = tmp_path / "out"
    finetune("--model", "random:tiny", "--tokenizer", str(VOCAB), "--tasks", "rte,stsb,mnli", "--data-dir",
             str(FIXTURE_DATA), "--max-steps", "3", "--seeds", "1", "--out", str(out), "--precision", "32")
    by_task = {rec.data["task"]: rec.data for rec in load_records([out])}
    for task, data in by_task.items():
        extra = data["extra"]
        assert isinstance(extra["near_constant"], bool)
        if data["task_type"] == "regression":
            preds = [float(x) for x in extra["example_predictions"].split()]
            gold = [float(x) for x in extra["example_gold"].split()]
            metrics = ("pearson", "spearman")
        else:
            preds, gold = [int(c) for c in extra["example_predictions"]], [int(c) for c in extra["example_gold"]]
            metrics = ("accuracy",)
            assert "example_correct" not in extra  # read by no report (committed records keep it; reading works)
        assert len(preds) == len(gold) == data["split"]["eval_size"], task
        for metric in metrics:
            got = float(metric_on_examples(metric, [preds], gold)[0])
            assert got == pytest.approx(data["metrics"][metric], abs=0.01 if data["task_type"] == "regression" else 1e-9)


def test_without_network_a_task_without_local_data_is_skipped_at_once_not_tried_on_the_hub(tmp_path, monkeypatch):
    """A machine whose hub host does not resolve: `--source auto` skips the task with a line naming the file
    and why the hub was not asked, without calling the hub (whose client retried for ~25 s a task before the
    skip); the task beside it runs. Where the name resolves, the hub is asked as before."""
    import shutil
    import socket

    from bertbench.data import task_readers

    data = tmp_path / "data"
    shutil.copytree(FIXTURE_DATA / "glue" / "RTE", data / "glue" / "RTE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    asked = []

    def hub(task, split):
        asked.append(task.name)
        raise ConnectionError("no hub in tests")

    def no_dns(host, *args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(task_readers, "_load_hub_dataset", hub)
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)  # (bertbench.runtime.hub asks it)
    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):  # none: the name is resolved here
        monkeypatch.delenv(proxy, raising=False)
    args = ["--model", "random:tiny", "--tokenizer", str(VOCAB), "--data-dir", str(data), "--max-steps", "1",
            "--seeds", "1", "--precision", "32"]
    r = finetune(*args, "--tasks", "mrpc,rte", "--out", str(tmp_path / "o"))
    assert f"skip mrpc: no local data (looked for {data / 'glue' / 'MRPC'}" in r.output
    assert "the hub is out of reach (huggingface.co does not resolve: Name or service not known)" in r.output
    assert asked == [] and len(load_records([tmp_path / "o"])) == 1  # rte ran
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.0.2.1", 443))])
    r = runner.invoke(app, ["finetune", *args, "--tasks", "mrpc", "--out", str(tmp_path / "o2")])
    assert asked == ["mrpc"] and r.exit_code != 0 and "could not load" in r.output  # a reachable hub is asked


def test_a_task_skipped_for_its_train_file_names_its_devsplit_variant(tmp_path):
    """Issue 25 item 14: `--tasks glue` said `skip qnli: no local data` and left out qnli_devsplit unsaid."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(FIXTURE_DATA / "glue" / "QNLI", data / "glue" / "QNLI")
    (data / "glue" / "QNLI" / "train.tsv").unlink()
    r = runner.invoke(app, ["finetune", "--model", "random:tiny", "--tokenizer", str(VOCAB), "--tasks", "qnli",
                            "--data-dir", str(data), "--max-steps", "1", "--seeds", "1", "--out", str(tmp_path / "o")])
    assert "skip qnli: no local data" in r.output
    assert "qnli_devsplit (trained and evaluated on a split of the dev file) can run: add it to --tasks" in r.output
    both = runner.invoke(app, ["finetune", "--model", "random:tiny", "--tokenizer", str(VOCAB), "--tasks",
                               "qnli,qnli_devsplit", "--data-dir", str(data), "--max-steps", "1", "--seeds", "1",
                               "--out", str(tmp_path / "o2"), "--precision", "32"])
    assert both.exit_code == 0, both.output
    assert "skip qnli: no local data" in both.output and "can run" not in both.output  # asked for already
