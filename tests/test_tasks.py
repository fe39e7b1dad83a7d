"""Task files: every shipped YAML loads; strict validation names the file and key with did-you-mean hints;
the registry's names and groups; `bertbench tasks ls | validate`."""
from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.errors import BertbenchError
from bertbench.metrics import METRICS
from bertbench.tasks import (
    TASK_TYPES,
    collect_tasks,
    load_task_file,
    resolve_task_names,
)

from tests.reference import get_task, load_tasks  # noqa: E402 (test-only helpers)

FIXTURE_DATA = Path(__file__).resolve().parent / "fixtures" / "tasks" / "data"
GLUE = ["cola", "mnli", "mnli_mismatched", "mrpc", "qnli", "qqp", "rte", "sst2", "stsb", "wnli"]
ALL = sorted(GLUE + ["qnli_devsplit", "squad_v1", "squad_v2", "squad_v1_devsplit", "squad_v2_devsplit", "swag", "conll2003"])

TOY = """\
name: toy
version: 1
type: classification
description: a toy pair task
inputs: {text_a: s1, text_b: s2, label: label}
labels: [neg, pos]
metrics: [accuracy]
splits: {train: train, eval: dev}
local: {format: tsv, files: {train: toy/train.tsv, dev: toy/dev.tsv}}
hparams: {source: a test, batch_size: 2, epochs: 1, learning_rates: [1.0e-3], max_seq_len: 16}
seeds: [1]
"""


def write_task(folder: Path, text: str, name: str = "toy", family: str = "fam") -> Path:
    path = folder / family / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def load_error(path: Path) -> str:
    with pytest.raises(BertbenchError) as err:
        load_task_file(path, path.parent.parent)
    return str(err.value)


# --- the shipped task files --------------------------------------------------------------------


def test_every_shipped_task_file_loads_with_the_expected_names():
    tasks, problems = collect_tasks()
    assert problems == []
    assert sorted(tasks) == ALL


def test_shipped_tasks_are_consistent():
    for t in load_tasks().values():
        assert t.type in TASK_TYPES
        assert all(m in METRICS for m in t.metrics), t.name
        assert t.family in ("glue", "squad", "swag", "conll2003"), t.name
        assert t.seeds and t.hparams.learning_rates, t.name
        assert t.local is not None, t.name  # every task names its official files
        if t.name in ("rte", "mrpc", "stsb", "cola"):
            assert len(t.seeds) >= 5, t.name  # small, unstable tasks get several restarts
        if t.family == "glue":
            h = t.hparams
            assert (h.batch_size, h.epochs, h.max_seq_len) == (32, 3, 128)
            assert h.learning_rates == [5e-5, 4e-5, 3e-5, 2e-5]


def test_paper_hyper_parameters_of_squad_and_swag():
    v1, v2, swag = get_task("squad_v1").hparams, get_task("squad_v2").hparams, get_task("swag").hparams
    assert (v1.epochs, v1.learning_rates, v1.batch_size) == (3, [5e-5], 32)
    assert (v1.max_seq_len, v1.doc_stride, v1.max_query_len, v1.max_answer_len, v1.n_best) == (384, 128, 64, 30, 20)
    assert (v2.epochs, v2.learning_rates, v2.batch_size, v2.doc_stride) == (2, [5e-5], 48, 128)
    assert (swag.epochs, swag.learning_rates, swag.batch_size) == (3, [2e-5], 16)


def test_num_labels_is_derived_from_the_type():
    assert get_task("mnli").num_labels == 3
    assert get_task("stsb").num_labels == 1 and get_task("stsb").labels == []
    assert get_task("swag").num_labels == 4
    assert get_task("conll2003").num_labels == 9
    assert get_task("squad_v1").num_labels == 2


def test_include_inherits_and_overrides():
    mnli, mm = get_task("mnli"), get_task("mnli_mismatched")
    assert (mm.splits.train, mm.splits.eval, mm.splits.test) == ("train", "dev_mismatched", "test_mismatched")
    assert mm.labels == mnli.labels and mm.hub.columns == mnli.hub.columns and mm.hparams == mnli.hparams
    v2dev = get_task("squad_v2_devsplit")
    assert v2dev.hub is None  # `hub: null` removes the inherited source
    assert v2dev.local.files["dev"] == "squad/dev-v2.0-cs224n-half.json"
    assert v2dev.hparams.batch_size == 48 and v2dev.eval_kind == "devsplit"
    assert get_task("squad_v1_devsplit").devsplit.group_by == "title"
    assert get_task("qnli_devsplit").devsplit.group_by == "text_a"  # the question


def test_missing_local_files(tmp_path):
    rte = get_task("rte")
    assert rte.missing_local_files(FIXTURE_DATA) == []
    assert rte.missing_local_files(tmp_path) == [tmp_path / "glue/RTE/train.tsv", tmp_path / "glue/RTE/dev.tsv"]
    assert get_task("squad_v2_devsplit").missing_local_files(tmp_path) == [tmp_path / "squad/dev-v2.0-cs224n-half.json"]


# --- registry ----------------------------------------------------------------------------------


def test_get_task_misspelt_gives_did_you_mean():
    with pytest.raises(BertbenchError, match=r"Unknown task 'cloa'\. Did you mean: cola\?"):
        get_task("cloa")


def test_resolve_task_names():
    assert resolve_task_names("rte,stsb") == ["rte", "stsb"]
    assert sorted(resolve_task_names("glue")) == GLUE  # official GLUE only: no devsplit variant
    assert sorted(resolve_task_names("squad")) == ["squad_v1", "squad_v2"]
    assert sorted(resolve_task_names("devsplit")) == ["qnli_devsplit", "squad_v1_devsplit", "squad_v2_devsplit"]
    assert sorted(resolve_task_names("all")) == ALL
    assert resolve_task_names(" rte , rte,glue ")[0] == "rte" and len(resolve_task_names("rte,glue")) == len(GLUE)
    with pytest.raises(BertbenchError, match="Did you mean: glue"):
        resolve_task_names("glu")
    with pytest.raises(BertbenchError, match="no tasks selected"):
        resolve_task_names(" , ")


# --- strict validation -------------------------------------------------------------------------


def test_toy_task_is_valid(tmp_path):
    t = load_task_file(write_task(tmp_path, TOY), tmp_path)
    assert t.family == "fam" and t.num_labels == 2 and t.primary_metric == "accuracy"


def test_unknown_top_level_key_names_file_and_suggests(tmp_path):
    path = write_task(tmp_path, TOY.replace("labels: [neg, pos]", "lables: [neg, pos]"))
    msg = load_error(path)
    assert msg == (f"{path}:1: labels: a classification task needs at least two labels (got []); "
                   f"{path}:6: lables: unknown key (did you mean 'labels'?)")


def test_unknown_nested_key_names_its_path(tmp_path):
    path = write_task(tmp_path, TOY.replace("batch_size: 2", "batchsize: 2"))
    msg = load_error(path)
    assert msg == (f"{path}:10: hparams.batchsize: unknown key (did you mean 'batch_size'?); "
                   f"{path}:10: hparams.batch_size: missing: a required key")


def test_unknown_metric_suggests_the_registry_name(tmp_path):
    msg = load_error(write_task(tmp_path, TOY.replace("metrics: [accuracy]", "metrics: [acuracy]")))
    assert "Unknown metric 'acuracy'. Did you mean: accuracy?" in msg


def test_metric_that_does_not_fit_the_type(tmp_path):
    msg = load_error(write_task(tmp_path, TOY.replace("metrics: [accuracy]", "metrics: [squad_f1]")))
    assert "does not fit a classification task" in msg


def test_unknown_type(tmp_path):
    msg = load_error(write_task(tmp_path, TOY.replace("type: classification", "type: clasification")))
    assert "Unknown task type 'clasification'. Did you mean: classification" in msg


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ("labels: [neg, pos]", "labels: [pos]", "at least two labels"),
        ("labels: [neg, pos]", "labels: [neg, pos, neg]", "duplicates ['neg']"),
        ("type: classification", "type: regression", "a regression task has no label list"),
        ("name: toy", "name: other", "must match the file name"),
        ("seeds: [1]", "seeds: []", "at least one seed"),
        ("splits: {train: train, eval: dev}", "splits: {train: train, eval: validation}", "'validation' is not a split"),
        ("format: tsv", "format: tsvv", "Did you mean: tsv"),
        ("format: tsv", "format: squad_json", "cannot feed a classification task"),
        ("inputs: {text_a: s1, text_b: s2, label: label}", "inputs: {text_b: s2, label: label}", "needs columns for ['text_a']"),
        ("max_seq_len: 16}", "max_seq_len: 16, doc_stride: 8}", "hparams.doc_stride: applies to span_qa tasks only"),
        ("version: 1", "version: one", "expected an integer"),
    ],
)
def test_semantic_problems_name_the_file(tmp_path, old, new, expected):
    assert old in TOY
    path = write_task(tmp_path, TOY.replace(old, new))
    msg = load_error(path)
    assert str(path) in msg and expected in msg


def test_token_labels_must_be_iob2(tmp_path):
    text = (TOY.replace("type: classification", "type: token_classification")
            .replace("inputs: {text_a: s1, text_b: s2, label: label}", "inputs: {words: w, tags: t}")
            .replace("labels: [neg, pos]", "labels: [O, B-PER, PER, B-LOC]")
            .replace("metrics: [accuracy]", "metrics: [seqeval_f1]")
            .replace("format: tsv", "format: conll").replace("files:", "columns: [w, t], files:"))
    msg = load_error(write_task(tmp_path, text))
    assert "'PER' is not an IOB2 tag" in msg and "needs both B-LOC and I-LOC" in msg


def test_devsplit_needs_its_block_and_one_file(tmp_path):
    msg = load_error(write_task(tmp_path, TOY + "eval_kind: devsplit\n"))
    assert "give a devsplit block exactly when eval_kind is 'devsplit'" in msg
    text = TOY + "eval_kind: devsplit\ndevsplit: {group_by: question, eval_fraction: 1.5}\n"
    msg = load_error(write_task(tmp_path, text))
    assert "train and eval must name the same split" in msg and "expected a value in (0, 1)" in msg
    assert "Unknown devsplit.group_by for classification 'question'" in msg and "Available: text_a, text_b" in msg


def test_include_cycle_and_missing_include(tmp_path):
    a = write_task(tmp_path, "include: b.yaml\n", "a")
    write_task(tmp_path, "include: a.yaml\n", "b")
    assert "include: a cycle" in load_error(a)
    c = write_task(tmp_path, "include: nowhere.yaml\n", "c")
    assert "nowhere.yaml does not exist" in load_error(c)


def test_family_is_not_written_in_the_file(tmp_path):
    assert "set from the file's location" in load_error(write_task(tmp_path, TOY + "family: glue\n"))


def test_collect_reports_every_problem_of_every_file_at_once(tmp_path):
    """Several broken files: each problem one line `file:line: field: what is wrong`, a misspelt key hiding none of
    the file's other problems, a YAML syntax error one line with its position, an included file's own line."""
    write_task(tmp_path, TOY)
    bad1 = write_task(tmp_path, TOY.replace("name: toy", "name: bad1").replace("metrics: [accuracy]", "metrics: [acc]")
                      .replace("labels:", "lables:").replace("version: 1", "version: one")
                      .replace("description: a toy pair task\n", ""), "bad1")
    bad2 = write_task(tmp_path, TOY.replace("name: toy", "name: bad2").replace("[accuracy]", "[accuracy]\n bad: indent"),
                      "bad2")
    write_task(tmp_path, TOY.replace("batch_size: 2", "batch_size: 0").replace("max_seq_len: 16", "max_seq_len: 1"),
               "_base")  # a template: not a task, but its lines are named where a task inherits them
    bad3 = write_task(tmp_path, "include: _base.yaml\nname: bad3\nseeds: [1, x]\n", "bad3")
    tasks, problems = collect_tasks(tmp_path)
    assert "toy" in tasks and not {"bad1", "bad2", "bad3"} & set(tasks)
    base = tmp_path / "fam" / "_base.yaml"
    assert problems == [
        f"{bad1}:1: description: missing: a required key",
        f"{bad1}:1: labels: a classification task needs at least two labels (got [])",
        f"{bad1}:2: version: expected an integer, got 'one'",
        f"{bad1}:5: lables: unknown key (did you mean 'labels'?)",
        f"{bad1}:6: metrics: Unknown metric 'acc'. Did you mean: mcc, accuracy? Available: {', '.join(sorted(METRICS))}",
        f"{bad2}:8:2: not valid YAML: expected <block end>, but found '<block mapping start>' (while parsing a block "
        "mapping)",
        f"{bad3}:3: seeds[1]: expected an integer, got 'x'",
        f"{base}:10: hparams.batch_size: 0: expected an integer ≥ 1",
        f"{base}:10: hparams.max_seq_len: 1: expected an integer ≥ 8",
    ]
    text = "\n".join(problems)
    assert "__init__" not in text and "positional argument" not in text and "Traceback" not in text
    r = runner.invoke(app, ["tasks", "validate", "--tasks-dir", str(tmp_path)])
    assert r.exit_code == 2 and r.output.splitlines() == [*problems, f"{len(problems)} problem(s); {len(tasks)} task(s) valid"]


def test_duplicate_names_across_families(tmp_path):
    write_task(tmp_path, TOY, family="a")
    write_task(tmp_path, TOY, family="b")
    tasks, problems = collect_tasks(tmp_path)
    assert "toy" in tasks and problems == [f"{tmp_path / 'b' / 'toy.yaml'}: name: task 'toy' is defined twice, here "
                                           f"and in {tmp_path / 'a' / 'toy.yaml'}; rename one (a task name is its file name)"]


# --- CLI ---------------------------------------------------------------------------------------

runner = CliRunner()


def test_cli_tasks_ls_shows_presence_and_missing_files(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    r = runner.invoke(app, ["tasks", "ls", "--data-dir", str(FIXTURE_DATA)])
    assert r.exit_code == 0, r.output
    for name in ALL:
        assert name in r.output
    assert "missing" not in r.output and "present" in r.output
    r = runner.invoke(app, ["tasks", "ls", "--data-dir", str(tmp_path)])
    assert r.exit_code == 0
    assert "missing glue/RTE/train.tsv, glue/RTE/dev.tsv" in r.output
    assert "squad/dev-v2.0-cs224n-half.json" in r.output


def test_cli_tasks_validate(tmp_path):
    r = runner.invoke(app, ["tasks", "validate"])
    assert r.exit_code == 0 and f"ok: {len(ALL)} tasks valid" in r.output
    write_task(tmp_path, TOY.replace("metrics: [accuracy]", "metrics: [acuracy]"))
    write_task(tmp_path, TOY.replace("name: toy", "name: two").replace("labels:", "lables:"), "two")
    r = runner.invoke(app, ["tasks", "validate", "--tasks-dir", str(tmp_path)])
    assert r.exit_code == 2
    assert "Did you mean: accuracy" in r.output and "did you mean 'labels'" in r.output
    assert "3 problem(s)" in r.output  # two.yaml's misspelt key, and the labels it left out
