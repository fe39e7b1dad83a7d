"""`bertbench report`: the paper numbers as data, golden markdown, the GLUE score, errors, the CLI.

Golden files: tests/golden/*. After an intended change, re-bless them with
    BERTBENCH_BLESS=1 pytest tests/test_report.py
and read the diff before committing.
"""
from __future__ import annotations

import copy
import statistics
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bertbench.errors import BertbenchError
from bertbench.reference import PAPER_NUMBERS_PATH, SPLITS, load_paper_numbers
from bertbench.report.build import build_report
from bertbench.report.long_rows import long_rows
from bertbench.report.model import GENERATED_MARKER, collect, fmt_stats, seed_stats
from bertbench.report.tables.ablations import table5
from bertbench.report.tables.main import main_table
from bertbench.report.render.markdown import render_markdown
from bertbench.report.labels import variant_label
from bertbench.results import RECORD_SUFFIX, LoadedRecord, load_records, record_filename, write_record

TESTS = Path(__file__).resolve().parent
RECORDS = TESTS / "fixtures" / "records" / "main"
GOLDEN = TESTS / "golden"
BLESS = os.environ.get("BERTBENCH_BLESS") == "1"


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if BLESS:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} is missing; run with BERTBENCH_BLESS=1 to create it"
    assert text == path.read_text(encoding="utf-8"), f"output differs from {path} (BERTBENCH_BLESS=1 to re-bless)"


# --- paper numbers --------------------------------------------------------------------------------


def test_paper_numbers_say_the_objective_in_todays_form():
    from bertbench.config import OBJECTIVES

    configs = [dict(n.config) for n in load_paper_numbers().numbers if "objective" in n.config]
    assert len(configs) == 20 and all(c["objective"] in OBJECTIVES and "nsp" not in c for c in configs)


def test_paper_numbers_load_and_keep_their_splits():
    paper = load_paper_numbers()
    assert {n.split for n in paper.numbers} <= set(SPLITS)
    assert all(n.source in paper.sources for n in paper.numbers)
    counts = {src: len(paper.find(source=src, include_uncertain=True)) for src in paper.sources}
    assert counts["BERT paper Table 1"] == 50 and counts["BERT paper Table 5"] == 20
    assert counts["BERT paper Table 6"] == 24 and counts["BERT paper Table 8"] == 18
    assert {n.split for n in paper.find(source="BERT paper Table 1")} == {"test"}
    assert {n.split for n in paper.find(source="BERT paper Table 5")} == {"dev"}
    (rte,) = paper.find(source="BERT paper Table 1", system="BERT-Base", task="rte")
    assert (rte.value, rte.metric, rte.split) == (66.4, "accuracy", "test")
    (swag,) = paper.find(system="BERT-Large", task="swag", split="test")
    assert swag.value == 86.3


def test_uncertain_numbers_are_flagged_and_left_out_by_default():
    paper = load_paper_numbers()
    (slqa,) = paper.find(system="SLQA+ (Single)", metric="exact_match", include_uncertain=True)
    assert slqa.uncertain and slqa.value == 71.4
    assert paper.find(system="SLQA+ (Single)", metric="exact_match") == []


@pytest.mark.parametrize("system", ["Pre-OpenAI SOTA", "BiLSTM+ELMo+Attn", "OpenAI GPT", "BERT-Base", "BERT-Large"])
def test_table1_average_is_the_mean_of_its_nine_scores(system):
    """Checks the transcription: Table 1's Average is the mean over 9 scores (MNLI-m and -mm) without WNLI."""
    paper = load_paper_numbers()
    values = [paper.find(source=paper.glue_source, system=system, task=t, metric=m)[0].value for t, m, _ in paper.glue_scores]
    (printed,) = paper.find(system=system, task="glue", metric="table1_average")
    assert len(values) == 9
    assert abs(sum(values) / 9 - printed.value) <= 0.1  # rounding of 9 inputs and the output (ELMo: 70.94)


def test_every_registry_task_has_a_paper_task():
    from tests.reference import load_tasks

    paper = load_paper_numbers()
    assert {name: paper.paper_task(name) for name in load_tasks() if paper.paper_task(name) is None} == {}


def _broken_yaml(tmp_path: Path, mutate) -> Path:
    data = yaml.safe_load(PAPER_NUMBERS_PATH.read_text(encoding="utf-8"))
    mutate(data)
    path = tmp_path / "paper.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["numbers"][0].update(split="validation"), "split 'validation' is not one of dev, test, heldout"),
        (lambda d: d["numbers"][0].update(task="mnli-m"), "task 'mnli-m' is not declared"),
        (lambda d: d["numbers"][0].pop("source"), "numbers[0]: missing source"),
        (lambda d: d["numbers"][0].update(value="84.6"), "is not a finite number"),
        (lambda d: d["numbers"][0].update(valeu=1), "unknown key(s) valeu"),
        (lambda d: d["numbers"].append(dict(d["numbers"][0])), "duplicate"),
        (lambda d: d["task_aliases"].update(foo="nope"), "task_aliases.foo"),
        (lambda d: d["numbers"][0].update(config={"objective": "mlm", "nsp": True}), "config.objective must be one of"),
        (lambda d: d["numbers"][0].update(config={"objective": "mlm_nsp"}), "config.objective must be one of"),
    ],
)
def test_paper_numbers_schema_check(tmp_path, mutate, message):
    with pytest.raises(BertbenchError) as err:
        load_paper_numbers(_broken_yaml(tmp_path, mutate))
    assert message in str(err.value) and "paper.yaml" in str(err.value)


# --- golden report ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fixture_records() -> list[LoadedRecord]:
    return load_records([RECORDS])


def test_golden_markdown(fixture_records):
    text = render_markdown(build_report(collect(fixture_records), title="fixture"))
    assert text.splitlines()[0] == GENERATED_MARKER
    _golden("report.md", text)


def test_markdown_is_deterministic_whatever_the_record_order(fixture_records):
    first = render_markdown(build_report(collect(fixture_records), title="fixture"))
    again = render_markdown(build_report(collect(list(reversed(fixture_records))), title="fixture"))
    assert first.encode() == again.encode()


# --- building blocks on small, hand-made sets -------------------------------------------------------------


def _template(fixture_records) -> dict:
    (rec,) = [r.data for r in fixture_records
              if r.data["task"] == "cola" and r.data["model"]["fingerprint"] == "sha256:aaaa0001"]
    return copy.deepcopy(rec)


def _make(template: dict, task: str, seed: int, metrics: dict, primary: str, **changes) -> LoadedRecord:
    rec = copy.deepcopy(template)
    rec.update(task=task, seed=seed, metrics=metrics, primary_metric=primary)
    for key, value in changes.items():
        section, _, field = key.partition("__")
        (rec[section] if field else rec).update({field or section: value})
    return LoadedRecord(Path(f"/records/{task}.{seed}.{len(json.dumps(changes))}{RECORD_SUFFIX}"), rec)


def _rows(table) -> dict[str, tuple[str, ...]]:
    return {row[0] + ("" if row[1] in ("v1", "–") else " " + row[1]): row for row in table.rows}


def test_fmt_stats():
    assert fmt_stats(None) == "–"
    assert fmt_stats(seed_stats([{"metrics": {"a": 55.25}, "seed": 1}], "a")) == "55.2 (n=1, no interval)"
    stats = seed_stats([{"metrics": {"a": v}, "seed": s} for s, v in enumerate([60.0, 50.0, 58.0, None])], "a")
    assert stats.n == 3 and stats.seeds == (0, 1, 2)
    assert fmt_stats(stats) == "56.0 [42.9, 69.1] (n=3)"  # 56 ± t(0.975, 2) · 5.29 / √3
    assert dict(stats.pairs) == {0: 60.0, 1: 50.0, 2: 58.0}


def test_pretraining_seeds_table_shows_each_seed_on_its_own(fixture_records):
    """A variant pre-trained twice gets a row per pre-training seed: its held-out numbers, and the GLUE score of
    its own fine-tuning records (mean over fine-tuning seeds, then over the main table's GLUE scores)."""
    from bertbench.report.tables.seeds import pretraining_seeds_table

    t = _template(fixture_records)

    def rec(task, seed, pretrain_seed, value, cross):
        r = _make(t, task, seed, {"accuracy": value}, "accuracy", pretrain_seed=pretrain_seed)
        r.data["model"]["pretraining"]["heldout"] = {"mlm_accuracy": 30.0 + pretrain_seed, "nsp_accuracy": 80.0,
                                                     "cross_segment_match": cross}
        return r

    first = [rec("rte", 1, 1, 60.0, 0.1), rec("rte", 2, 1, 62.0, 0.1), rec("sst2", 1, 1, 80.0, 0.1)]
    second = [rec("rte", 1, 2, 70.0, 7.0), rec("sst2", 1, 2, 90.0, 7.0), rec("sst2", 2, 2, 92.0, 7.0)]
    table = pretraining_seeds_table(collect(first + second))
    assert table.header[6] == "GLUE (2 of 8 tasks)"
    assert [row[1:] for row in table.rows] == [
        ("1", "3.3M", "31.0", "80.0", "0.1", "70.5", "3"),  # ((60 + 62) / 2 + 80) / 2
        ("2", "3.3M", "32.0", "80.0", "7.0", "80.5", "3"),  # (70 + (90 + 92) / 2) / 2
    ]
    assert pretraining_seeds_table(collect(first)) is None  # one pre-training seed: the main table says it all
    # the CSV says how many pre-training seeds are behind a cell (its mean and ci95 are then over their means)
    csv = {(r["column"], r["task"]): r for r in long_rows(collect(first + second)) if r["kind"] == "ours"}
    assert {key[1]: r["P"] for key, r in csv.items()} == {"rte": 2, "sst2": 2}
    assert csv[(first[0].data["model"]["size"] + " MLM+NSP", "rte")]["mean"] == pytest.approx((61.0 + 70.0) / 2)
    assert {r["P"] for r in long_rows(collect(first)) if r["kind"] == "ours"} == {1}
    # one basis per column: std is over the pre-training seeds' means, as mean and ci95 are; runs_* over every run
    rte = csv[(first[0].data["model"]["size"] + " MLM+NSP", "rte")]
    assert rte["std"] == pytest.approx(statistics.stdev([61.0, 70.0]))
    assert rte["runs_std"] == pytest.approx(statistics.stdev([60.0, 62.0, 70.0])) and rte["runs_min"] == 60.0


def test_a_variant_of_several_pretraining_seeds_shows_every_seed_in_provenance_and_protocol(fixture_records):
    """Provenance and the protocol table used to print pre-training seed 1's facts for a P-cell, unsaid: each
    pre-training seed's tokens, and the lr and selection score its own checkpoint chose, are all shown."""
    from bertbench.report.tables.protocol import protocol_table
    from bertbench.report.tables.provenance import provenance_table

    t = _template(fixture_records)
    sel = {"on": "train-slice", "rule": "r", "grid": [1e-4, 3e-4], "scores": {}, "heldout_size": 10}

    def rec(seed, pre, tokens, lr, score):
        finetune = {**t["finetune"], "grid": "heldout", "lr": lr,
                    "selection": {**sel, "selected_lr": lr, "score": score}}
        r = _make(t, "rte", seed, {"accuracy": 60.0 + seed}, "accuracy", pretrain_seed=pre, finetune=finetune)
        r.data["model"]["pretraining"]["tokens_seen"] = tokens
        return r

    data = collect([rec(1, 1, 3_000_000, 1e-4, 61.0), rec(2, 1, 3_000_000, 1e-4, 61.0),
                    rec(1, 2, 3_400_000, 3e-4, 64.0), rec(2, 2, 3_400_000, 3e-4, 64.0)])
    [row] = provenance_table(data).rows
    assert (row[3], row[9]) == ("3M–3.4M", "P 1, 2 × F 1, 2")
    assert any("not seed 1's alone" in note for note in provenance_table(data).notes)
    [cell] = protocol_table(data).rows
    assert (cell[5], cell[7]) == ("1e-4, 3e-4", "61.0–64.0")  # each pre-training seed's own choice
    assert any("each seed's checkpoint chose its own lr" in note for note in protocol_table(data).notes)
    from bertbench.report.render.terminal import short_table  # the terminal's legend says which cells are P-cells

    assert f"({data.variants[0].label} P=2) over their P means" in short_table(data).notes[0]


def test_glue_partial_coverage_label_and_same_task_paper_average(fixture_records):
    t = _template(fixture_records)
    recs = [_make(t, "rte", 1, {"accuracy": 60.0}, "accuracy"), _make(t, "sst2", 1, {"accuracy": 80.0}, "accuracy"),
            _make(t, "cola", 1, {"mcc": 10.0}, "mcc"),
            _make(t, "qnli_devsplit", 1, {"accuracy": 70.0}, "accuracy", split__eval_kind="devsplit")]
    table = main_table(collect(recs))
    glue = _rows(table)["GLUE (3 of 8 tasks)"]
    header = table.header
    assert glue[header.index("mini MLM+NSP")] == "50.0"  # (60 + 80 + 10) / 3: qnli_devsplit is not counted
    assert glue[header.index("BERT-Base")] == "70.7 (test, same 3)"  # (66.4 + 93.5 + 52.1) / 3
    assert "GLUE" not in _rows(table)  # never labelled as the full score


def test_glue_full_coverage_uses_the_printed_average(fixture_records):
    t = _template(fixture_records)
    scores = {"mnli": ("accuracy", 80.0), "mnli_mismatched": ("accuracy", 79.0), "qqp": ("f1", 70.0),
              "qnli": ("accuracy", 85.0), "sst2": ("accuracy", 90.0), "cola": ("mcc", 40.0),
              "stsb": ("spearman", 85.0), "mrpc": ("f1", 86.0), "rte": ("accuracy", 65.0)}
    recs = [_make(t, task, 1, {m: v, "accuracy": 1.0} if m != "accuracy" else {m: v}, m) for task, (m, v) in scores.items()]
    table = main_table(collect(recs))
    glue = _rows(table)["GLUE"]
    assert glue[table.header.index("mini MLM+NSP")] == f"{sum(v for _, v in scores.values()) / 9:.1f}"
    assert glue[table.header.index("BERT-Base")] == "79.6 (test)"
    # Turc et al. print no Table 1 average: (74.8+74.3+66.4+84.1+85.9+0.0+73.3+81.1+57.9) / 9 = 66.42
    assert glue[table.header.index("BERT-Mini (Turc et al.)")] == "66.4 (test, computed)"


def test_task_versions_are_never_averaged(fixture_records):
    t = _template(fixture_records)
    recs = [_make(t, "rte", 1, {"accuracy": 50.0}, "accuracy"), _make(t, "rte", 2, {"accuracy": 52.0}, "accuracy"),
            _make(t, "rte", 1, {"accuracy": 70.0}, "accuracy", task_version=2)]
    table = main_table(collect(recs))
    rows = _rows(table)
    col = table.header.index("mini MLM+NSP")
    assert rows["rte"][col] == "51.0 [38.3, 63.7] (n=2)"
    assert rows["rte v2"][col] == "70.0 (n=1, no interval)"
    assert any("separate rows, never averaged" in note for note in table.notes)


def test_two_checkpoints_with_one_label_are_two_columns(fixture_records):
    t = _template(fixture_records)
    recs = [_make(t, "rte", 1, {"accuracy": 50.0}, "accuracy"),
            _make(t, "rte", 1, {"accuracy": 60.0}, "accuracy", model__fingerprint="sha256:99990000")]
    header = main_table(collect(recs)).header
    assert "mini MLM+NSP [sha256:99990000]" in header and "mini MLM+NSP [sha256:aaaa0001]" in header


def test_duplicate_seed_is_an_error_naming_both_files(fixture_records):
    t = _template(fixture_records)
    a, b = _make(t, "rte", 1, {"accuracy": 50.0}, "accuracy"), _make(t, "rte", 1, {"accuracy": 51.0}, "accuracy")
    b = LoadedRecord(Path("/elsewhere/copy.record.json"), b.data)
    with pytest.raises(BertbenchError) as err:
        collect([a, b])
    assert str(a.path) in str(err.value) and str(b.path) in str(err.value)


def test_best_setting_is_chosen_and_marked(fixture_records):
    t = _template(fixture_records)
    recs = [_make(t, "rte", s, {"accuracy": 50.0 + s}, "accuracy") for s in (1, 2)]
    recs += [_make(t, "rte", s, {"accuracy": 60.0 + s}, "accuracy", finetune__lr=2e-5) for s in (1, 2)]
    table = main_table(collect(recs))
    assert _rows(table)["rte"][table.header.index("mini MLM+NSP")] == "61.5 [55.1, 67.9] (n=2) ‡"
    assert any(note.startswith("‡ best of several") for note in table.notes)


def test_devsplit_rows_mark_the_paper_number_as_not_comparable(fixture_records):
    t = _template(fixture_records)
    recs = [_make(t, "squad_v1_devsplit", 1, {"squad_em": 20.0, "squad_f1": 30.0}, "squad_f1",
                  split__eval_kind="devsplit")]
    table = main_table(collect(recs))
    row = _rows(table)["squad_v1_devsplit"]
    assert row[table.header.index("Split")] == "devsplit"
    assert row[table.header.index("BERT-Base")] == "88.5 (official dev; not comparable)"
    assert row[table.header.index("OpenAI GPT")] == "–"


def test_other_metric_is_labelled_and_missing_cells_are_dashes(fixture_records):
    t = _template(fixture_records)
    table = main_table(collect([_make(t, "mrpc", 1, {"accuracy": 70.0}, "accuracy")]))
    row = _rows(table)["mrpc"]
    assert row[table.header.index("BERT-Base")] == "88.9 (test, F1)"  # Table 1 reports MRPC F1
    assert row[table.header.index("BERT-Mini (Turc et al.)")] == "71.8 (test)"  # Turc reports both
    t5 = table5(collect([_make(t, "mrpc", 1, {"accuracy": 70.0}, "accuracy")]))
    ours = _rows(t5)["mini MLM+NSP"]
    assert ours == ("mini MLM+NSP", "–", "–", "70.0 (n=1, no interval)", "–", "–")


def test_uncertain_paper_numbers_are_never_shown(tmp_path, fixture_records):
    def flag(data):
        for n in data["numbers"]:
            if n["system"] == "BERT-Base" and n["task"] == "rte":
                n["uncertain"] = True

    paper = load_paper_numbers(_broken_yaml(tmp_path, flag))
    table = main_table(collect([_make(_template(fixture_records), "rte", 1, {"accuracy": 50.0}, "accuracy")], paper))
    assert _rows(table)["rte"][table.header.index("BERT-Base")] == "–"


def test_long_rows_hold_ours_and_the_papers(fixture_records):
    rows = long_rows(collect(fixture_records))
    ours = [r for r in rows if r["kind"] == "ours" and r["task"] == "cola" and r["metric"] == "mcc"
            and r["column"] == "mini MLM+NSP"]
    assert len(ours) == 1 and ours[0]["value"] == ours[0]["runs_median"] == 12.3
    assert ours[0]["model_fingerprint"] == "sha256:aaaa0001"
    assert ours[0]["ci95_low"] is None  # one seed: no interval in the CSV either
    (rte,) = [r for r in rows if r["kind"] == "ours" and r["task"] == "rte" and r["column"] == "mini random init"]
    assert rte["ci95_low"] < rte["mean"] < rte["ci95_high"] and rte["degenerate"] is False
    assert rte["P"] == 0 and ours[0]["P"] == 1  # random init pre-trains nothing; records without pretrain_seed: 1
    assert any(r["kind"] == "paper" and r["column"] == "BERT-Base" and r["task"] == "cola" and r["value"] == 52.1
               for r in rows)


# --- the command ---------------------------------------------------------------------------------------


def _cli(args: list[str], monkeypatch=None, registry: bool = True):
    from bertbench import cli
    from bertbench.report import run as report_run

    if not registry:  # the fixture holds an rte v2 record the real registry (rte v1) rejects
        monkeypatch.setattr(report_run, "_known_task_versions", lambda warn, tasks_dir=None: None)
    return CliRunner().invoke(cli.app, ["report", *args])


def test_cli_writes_golden_markdown_index_csv_json(tmp_path, monkeypatch):
    out = tmp_path / "leaderboards" / "fixture.md"
    (tmp_path / "leaderboards" / "notes.md").parent.mkdir(parents=True)
    (tmp_path / "leaderboards" / "notes.md").write_text("# hand-written, not listed\n")
    args = [str(RECORDS), "--out", str(out), "--csv", str(tmp_path / "r.csv"), "--json", str(tmp_path / "r.json"),
            "--index"]
    result = _cli(args, monkeypatch, registry=False)
    assert result.exit_code == 0, result.output
    _golden("report.md", out.read_text(encoding="utf-8"))
    _golden("README.md", (out.parent / "README.md").read_text(encoding="utf-8"))
    first = out.read_bytes()
    assert _cli(args, monkeypatch, registry=False).exit_code == 0
    assert out.read_bytes() == first  # re-running gives identical bytes
    import pandas as pd

    frame = pd.read_csv(tmp_path / "r.csv")
    assert set(frame["kind"]) == {"ours", "paper"} and frame["task_version"].dropna().astype(int).min() == 1
    records = json.loads((tmp_path / "r.json").read_text())
    assert len(records) == len(frame) and records[0]["kind"] == "ours"
    assert "mini MLM+NSP" in result.output  # the rich table on the terminal


def test_cli_leaves_a_hand_written_readme_alone(tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text("# mine\n")
    result = _cli([str(RECORDS), "--out", str(tmp_path / "r.md"), "--index"], monkeypatch, registry=False)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "README.md").read_text() == "# mine\n"
    assert "not overwriting" in result.output


def test_report_leaves_the_folders_index_alone_unless_asked(tmp_path, monkeypatch):
    """The README's example (`report results/ --out leaderboards/mine.md`) once added a line to the tracked,
    generated leaderboards/README.md: the index is regenerated with --index only (issue 25, item 5)."""
    board = tmp_path / "board"
    assert _cli([str(RECORDS), "--out", str(board / "first.md"), "--index"], monkeypatch, registry=False).exit_code == 0
    index = (board / "README.md").read_bytes()
    result = _cli([str(RECORDS), "--out", str(board / "mine.md")], monkeypatch, registry=False)
    assert result.exit_code == 0, result.output
    assert (board / "mine.md").is_file() and (board / "README.md").read_bytes() == index


def test_cli_plots_and_curve_notes(tmp_path, monkeypatch):
    out = tmp_path / "lb" / "fixture.md"
    result = _cli([str(RECORDS), "--out", str(out), "--plots", str(tmp_path / "lb" / "plots")], monkeypatch, registry=False)
    assert result.exit_code == 0, result.output
    pngs = sorted(p.name for p in (tmp_path / "lb" / "plots").iterdir())
    assert "pretraining_curves.png" in pngs and "rte.v1.dev.accuracy.png" in pngs
    assert all((tmp_path / "lb" / "plots" / p).read_bytes()[:4] == b"\x89PNG" for p in pngs)
    text = out.read_text()
    assert "![pre-training curves](plots/pretraining_curves.png)" in text
    assert "- mini MLM+NSP: pretrain_runs/mini-mlm-nsp/metrics.csv (5 eval_mlm_loss points)" in text
    assert "- mini MLM (no NSP): no curve: pretrain_runs/mini-mlm/metrics.csv not found" in text
    assert "![rte.v1.dev.accuracy](plots/rte.v1.dev.accuracy.png)" in text
    # Figure 5: the early and final checkpoints of the MLM+NSP and LTR runs, fine-tuned on SST-2
    assert "figure5.sst2.v1.dev.accuracy.png" in pngs
    assert "![figure 5 sst2.v1.dev.accuracy](plots/figure5.sst2.v1.dev.accuracy.png)" in text
    assert "no paper number is shown here" in text
    # a plot drawn again is the same bytes (the markdown's regeneration is checked by the golden CLI test)
    from bertbench.report.render.plots import plot_figure5, plot_task

    data = collect(load_records([RECORDS]))
    row = next(r for r in data.rows if r.task == "sst2")
    for plot, name in ((plot_figure5, "figure5.sst2.v1.dev.accuracy.png"), (plot_task, "sst2.v1.dev.accuracy.png")):
        assert plot(data, row, tmp_path / "again" / name)
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "lb" / "plots" / name).read_bytes(), name


def test_archived_records_keep_their_curve(tmp_path, fixture_records):
    """A run folder that is gone (an absolute run_dir on another machine): the metrics.csv kept with the
    committed records, at RECORDS/pretrain/NAME, draws the curve; without it there is none."""
    from bertbench.report.render.plots import find_metrics_csv

    rec = _template(fixture_records)
    rec["model"]["pretraining"]["run_dir"] = "/gone/elsewhere/runs/cpu-quick/pretrain/mlm_nsp-abc"
    write_record(tmp_path / "archive" / "results" / "mlm_nsp-abc" / record_filename(rec), rec)
    variant = collect(load_records([tmp_path / "archive"])).variants[0]
    assert find_metrics_csv(variant) is None
    kept = tmp_path / "archive" / "pretrain" / "mlm_nsp-abc" / "metrics.csv"
    kept.parent.mkdir(parents=True)
    kept.write_text("step,tokens,eval_mlm_loss\n1,10,7.0\n")
    assert find_metrics_csv(variant) == kept


def test_cli_malformed_metrics_csv_is_an_error(tmp_path, monkeypatch, fixture_records):
    rec = _template(fixture_records)
    rec["model"]["pretraining"]["run_dir"] = str(tmp_path / "run")
    write_record(tmp_path / "recs" / record_filename(rec), rec)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.csv").write_text("step,loss\n1,2.0\n")
    result = _cli([str(tmp_path / "recs"), "--plots", str(tmp_path / "plots")], monkeypatch, registry=False)
    assert result.exit_code == 2
    assert str(tmp_path / "run" / "metrics.csv") in result.output and "tokens" in result.output


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"schema_version": 1, "task": "rte",', "corrupt JSON"),
        (None, "primary metric 'mcc' is missing"),
        ("version", "unknown task version: 'cola' version 7"),
    ],
)
def test_cli_bad_record_exits_2_naming_the_file(tmp_path, fixture_records, content, message):
    path = tmp_path / "results" / "deep" / "bad.record.json"
    path.parent.mkdir(parents=True)
    rec = _template(fixture_records)
    if content is None:
        del rec["metrics"]["mcc"]
    elif content == "version":
        rec["task_version"] = 7  # checked against the real task registry (cola is version 1 there)
    path.write_text(content if content and content != "version" else json.dumps(rec))
    result = _cli([str(tmp_path / "results")])
    assert result.exit_code == 2, result.output
    assert str(path) in result.output and message in result.output
    assert "Traceback" not in result.output


def test_cli_with_the_real_registry_accepts_current_versions(tmp_path, fixture_records):
    rec = _template(fixture_records)
    write_record(tmp_path / record_filename(rec), rec)
    result = _cli([str(tmp_path)])
    assert result.exit_code == 0, result.output


def test_cli_usage_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _cli([str(empty)])
    assert result.exit_code == 2 and "no *.record.json files" in result.output
    result = _cli([str(RECORDS), "--out", str(tmp_path / "README.md")])
    assert result.exit_code == 2 and "README.md is the folder's generated index" in result.output
    result = _cli([str(tmp_path / "absent")])
    assert result.exit_code == 2 and "no such file or directory" in result.output


def _rows_on_one_line(text: str, table) -> None:
    """Every line fits 100 columns, and each row label stands on one line with all its cells (in every
    part the columns were split into): nothing wrapped."""
    import re

    from rich.cells import cell_len

    lines = text.splitlines()
    assert max(cell_len(line) for line in lines) <= 100, max(lines, key=cell_len)
    for i, label in enumerate(table.labels):
        on_label = [line for line in lines if re.match(rf"\s*{re.escape(label)}(\s{{2,}}|$)", line)]
        assert on_label, label
        shown = " ".join(line.strip()[len(label):] for line in on_label).split()
        assert shown == " ".join(cells[i] for _, cells in table.columns).split(), label


def test_terminal_table_fits_100_columns_and_nothing_wraps(fixture_records, monkeypatch):
    from rich.console import Console

    from bertbench.report.render.terminal import render_short, short_table

    table = short_table(collect(fixture_records))
    assert table.labels[-2:] == ("BERT-Tiny (Turc et al.)", "BERT-Mini (Turc et al.)")  # the paper's models of our sizes
    console = Console(width=100, record=True, file=open(os.devnull, "w"))
    for rich_table in render_short(table, 100):
        console.print(rich_table)
    _rows_on_one_line(console.export_text(), table)

    monkeypatch.setenv("COLUMNS", "100")  # the command, as a terminal (or a log) of 100 columns shows it
    result = _cli([str(RECORDS)], monkeypatch, registry=False)
    assert result.exit_code == 0, result.output
    _rows_on_one_line(result.output, table)
    assert "OpenAI GPT" not in result.output and "--wide" in result.output

    wide = _cli([str(RECORDS), "--wide"], monkeypatch, registry=False)  # the flag: every paper column and table
    assert wide.exit_code == 0 and "OpenAI GPT" in wide.output and "Provenance" in wide.output


def test_cli_import_stays_light():
    code = ("import sys, bertbench.cli, bertbench.commands.report, bertbench.report.build, bertbench.report.render.markdown, bertbench.report.run, bertbench.results\n"
            "heavy = [m for m in ('torch', 'pandas', 'matplotlib', 'lightning', 'transformers') if m in sys.modules]\n"
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_math_sanity_of_the_fixture_perplexity(fixture_records):
    """Table 6's LM (ppl) for our rows is exp(held-out MLM loss): 4.2 nats -> 66.69."""
    (table6,) = [t for t in build_report(collect(fixture_records)).tables if t.key == "table6"]
    rows = {row[0]: row for row in table6.rows}
    assert rows["mini MLM+NSP"][3] == f"{math.exp(4.2):.2f}" == "66.69"


def test_table6_perplexity_is_the_mean_loss_over_pretraining_seeds(fixture_records):
    """Two pre-training seeds of mini at held-out losses 4.0 and 4.4: the row shows exp(4.2), not one seed's (and
    the mean of their tokens seen)."""
    mini = [r for r in fixture_records if variant_label(r.data) == "mini MLM+NSP"]
    mini = [r for r in mini if r.data["model"]["fingerprint"] == mini[0].data["model"]["fingerprint"]]  # one checkpoint
    recs = []
    for seed, loss, tokens in ((1, 4.0, 10_000_000), (2, 4.4, 12_000_000)):
        for r in mini:
            data = copy.deepcopy(r.data)
            data["pretrain_seed"] = seed
            data["model"]["fingerprint"] = f"sha256:seed{seed}"
            data["model"]["pretraining"]["heldout"] = {"mlm_loss": loss}
            data["model"]["pretraining"]["tokens_seen"] = tokens
            recs.append(LoadedRecord(Path(f"/s{seed}/{r.path.name}"), data))
    (table6,) = [t for t in build_report(collect(recs)).tables if t.key == "table6"]
    (row,) = table6.rows[:1]
    assert row[0] == "mini MLM+NSP" and row[3] == f"{math.exp(4.2):.2f}" == "66.69"
    assert row[2] == "11M"  # tokens seen: the seeds' mean too
    assert len(collect(recs).variants) == 1  # one row for both seeds


def test_embed_shows_table6_beside_the_main_table_only_when_sizes_were_compared(fixture_records):
    """The fixture pre-trains tiny and mini: Table 6 is that study's question, so the README block shows it. A study
    of one size (cpu-hour's tiny variants) keeps its block to the main table and claims."""
    from bertbench.report.render.markdown import embed_block

    markers = "<!-- bertbench report: begin b -->\n<!-- bertbench report: end b -->\n"
    both = embed_block(markers, build_report(collect(fixture_records)), "b")
    assert "Ablation: model size (paper Table 6, dev):" in both and "| mini MLM+NSP | 4/256/4 |" in both and "| 66.69 |" in both
    assert "LM (ppl): exp of the mean held-out masked-LM loss" in both
    tiny = [r for r in fixture_records if r.data["model"]["size"] == "tiny"]
    assert "Table 6" not in embed_block(markers, build_report(collect(tiny)), "b")


def test_embed_puts_the_generated_main_table_between_markers(tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    readme.write_text("# Title\n\nbefore\n<!-- bertbench report: begin board -->\nstale\n<!-- bertbench report: end board -->\nafter\n")
    out = tmp_path / "lb" / "board.md"
    args = [str(RECORDS), "--out", str(out), "--embed", str(readme)]
    r = _cli(args, monkeypatch, registry=False)
    assert r.exit_code == 0, r.output
    text = readme.read_text()
    assert "stale" not in text and text.startswith("# Title\n\nbefore\n") and text.endswith("after\n")
    block = text.split("begin board -->\n", 1)[1].split("<!-- bertbench report: end", 1)[0]
    main_table = out.read_text().split("## Results\n\n", 1)[1].split("\n\n", 1)[0]
    assert main_table in block  # exactly the table the report generated
    again = _cli(args, monkeypatch, registry=False)
    assert again.exit_code == 0 and readme.read_text() == text  # idempotent
    readme.write_text("no markers here\n")
    bad = _cli(args, monkeypatch, registry=False)
    assert bad.exit_code == 2 and "markers" in bad.output


def test_degenerate_cells_are_marked(fixture_records):
    t = _template(fixture_records)
    recs = [_make(t, "sst2", 1, {"accuracy": 50.9}, "accuracy", extra={"degenerate": True}),
            _make(t, "sst2", 2, {"accuracy": 80.0}, "accuracy")]
    table = main_table(collect(recs))
    assert _rows(table)["sst2"][table.header.index("mini MLM+NSP")].endswith(" ⊘")
    assert any(note.startswith("⊘ degenerate") for note in table.notes)
    clean = main_table(collect(recs[1:]))
    assert "⊘" not in _rows(clean)["sst2"][clean.header.index("mini MLM+NSP")]


def test_figure5_table_lists_every_checkpoint_with_its_tokens(fixture_records):
    from bertbench.report.tables.figure5 import figure5_table

    table = figure5_table(collect(fixture_records))
    assert table.header == ("Variant", "Pre-training tokens", "sst2 (accuracy)")
    assert [row[:2] for row in table.rows] == [("mini MLM+NSP", "1,100,000"), ("mini MLM+NSP", "3,300,000"),
                                              ("mini LTR (causal)", "1,100,000"), ("mini LTR (causal)", "3,300,000")]
    assert table.rows[0][2] == "77.2 [73.4, 81.0] (n=2)"  # 83.5 - 6.0 with seeds' jitter 0.0 and -0.6
    assert "no paper number is shown" in table.notes[0] and "MNLI" in table.notes[0]  # the claim, in words


def test_checkpoints_of_one_run_are_a_series_not_columns(fixture_records):
    t = _template(fixture_records)
    early = {**t["model"], "fingerprint": "sha256:early", "pretraining": {**t["model"]["pretraining"], "tokens_seen": 1000}}
    recs = [_make(t, "sst2", s, {"accuracy": 70.0 + s}, "accuracy") for s in (1, 2)]
    recs += [_make(t, "sst2", s, {"accuracy": 60.0 + s}, "accuracy", model=early) for s in (1, 2)]
    data = collect(recs)
    assert [v.label for v in data.variants] == ["mini MLM+NSP"]
    assert data.variants[0].tokens_seen == t["model"]["pretraining"]["tokens_seen"]
    series = data.checkpoints["mini MLM+NSP"]
    assert [v.tokens_seen for v in series] == [1000, t["model"]["pretraining"]["tokens_seen"]]
    (row,) = data.rows
    assert seed_stats(data.cell(series[0], row).records, "accuracy").mean == 61.5
    assert seed_stats(data.cell(data.variants[0], row).records, "accuracy").mean == 71.5


def test_protocol_table_shows_the_choice_and_the_plateau(fixture_records):
    from bertbench.report.tables.protocol import protocol_table

    t = _template(fixture_records)
    selection = {"on": "train-slice", "rule": "r", "grid": [5e-5, 1e-4], "scores": {"5e-05": 60.0, "0.0001": 62.5},
                 "selected_lr": 1e-4, "score": 62.5, "heldout_size": 249}
    finetune = {**t["finetune"], "lr": 1e-4, "selection": selection, "max_train_examples": 20000}
    recs = [_make(t, "sst2", s, {"accuracy": 80.0}, "accuracy", finetune=finetune,
                  extra={"last_epoch_loss_drop": drop}) for s, drop in ((1, 0.01), (2, 0.08))]
    (row,) = protocol_table(collect(recs)).rows
    assert row[4:8] == ("5e-5, 1e-4", "1e-4", "train-slice", "62.5")  # one notation (was '5e-05, 0.0001')
    assert row[2].endswith("(cap 20,000)") and row[8] == "8.0% ▲"  # the worse seed, flagged as still falling
    assert row[3] == f"{t['finetune']['epochs']:g}"
    assert not any("early stopping" in note for note in protocol_table(collect(recs)).notes)
    # epoch selection: the cell says which epoch it reports, and a note says how it was chosen
    by_epoch = {**finetune, "epochs": 5, "selection": {**selection, "selected_epoch": 3}}
    recs = [_make(t, "sst2", s, {"accuracy": 80.0}, "accuracy", finetune=by_epoch) for s in (1, 2)]
    table = protocol_table(collect(recs))
    assert table.rows[0][3] == "3 of ≤ 5" and any("early stopping" in note for note in table.notes)


@pytest.mark.parametrize("preset", sorted(p.name for p in (Path(__file__).parents[1] / "leaderboards" / "records").iterdir()))
def test_committed_leaderboards_regenerate_byte_for_byte(tmp_path, monkeypatch, preset):
    """`make leaderboard` from the committed records gives the committed markdown, CSV and plots, byte for byte
    (a report change that would alter a committed leaderboard must regenerate it in the same commit). It reads
    the records alone: a data folder that is not there changes nothing."""
    monkeypatch.setenv("BERTBENCH_DATA_DIR", str(tmp_path / "no-data"))
    root = Path(__file__).parents[1] / "leaderboards"
    out = tmp_path / "leaderboards"
    out.mkdir()
    (out / "README.md").write_text("x")  # keep the index writer away from the comparison
    args = [str(root / "records" / preset), "--out", str(out / f"{preset}.md"),
            "--csv", str(out / f"{preset}.csv"), "--plots", str(out / "plots" / preset)]
    result = _cli(args)  # the real task registry: these are real records
    assert result.exit_code == 0, result.output
    assert (out / f"{preset}.md").read_bytes() == (root / f"{preset}.md").read_bytes()
    assert (out / f"{preset}.csv").read_bytes() == (root / f"{preset}.csv").read_bytes()
    committed = sorted(p.name for p in (root / "plots" / preset).iterdir())
    assert sorted(p.name for p in (out / "plots" / preset).iterdir()) == committed
    for name in committed:
        assert (out / "plots" / preset / name).read_bytes() == (root / "plots" / preset / name).read_bytes(), name
