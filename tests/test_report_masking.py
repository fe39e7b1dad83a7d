"""The masking-ratio table and plot: MLM+NSP variants of one size at several masking ratios, GLUE-5 each, and
each ratio minus the paper's 15%, by the report's one estimator."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from bertbench.report.build import build_report
from bertbench.report.model import collect
from bertbench.claims import load_claims
from bertbench.report.claims import evaluate
from bertbench.report.tables.masking import masking_ratio_table, ratio_series
from bertbench.results import LoadedRecord, load_records

RECORDS = Path(__file__).resolve().parent / "fixtures" / "records" / "main"
GLUE5 = {"sst2", "cola", "stsb", "mrpc", "rte"}


def _copy_as(tmp_path: Path, ratio: float, shift: float, procedure=(80, 10, 10)) -> list[LoadedRecord]:
    """mini MLM+NSP's GLUE-5 dev records as another pre-training at `ratio`: every score + `shift`, seeds only
    (no per-example predictions, so the shift is the whole difference)."""
    out = []
    for r in load_records([RECORDS / "mini-mlm-nsp"]):
        if r.data["task"] not in GLUE5 or r.data["split"]["eval_kind"] != "dev":
            continue
        rec = copy.deepcopy(r.data)
        pre = rec["model"]["pretraining"]
        pre.update(mask_ratio=ratio, mask_procedure=list(procedure))
        rec["model"]["fingerprint"] = f"sha256:mask{ratio}{procedure}"
        rec["metrics"] = {k: v + shift for k, v in rec["metrics"].items()}
        rec["extra"] = {}
        out.append(LoadedRecord(tmp_path / f"{ratio}.{r.path.name}", json.loads(json.dumps(rec))))
    return out


@pytest.fixture
def data(tmp_path):
    base = [r for r in load_records([RECORDS / "mini-mlm-nsp"])]
    return collect(base + _copy_as(tmp_path, 0.40, 2.0) + _copy_as(tmp_path, 0.25, -1.0)
                   + _copy_as(tmp_path, 0.40, 9.0, procedure=(100, 0, 0)))


def test_each_ratio_is_a_row_with_its_difference_from_fifteen_percent(data):
    (size, points), = ratio_series(data)
    assert size == "mini" and [round(r, 2) for r, _ in points] == [0.15, 0.25, 0.40]  # 100/0/0 is Table 8's, not here
    table = masking_ratio_table(data)
    rows = {row[1]: row for row in table.rows}
    assert list(rows) == ["15%", "25%", "40%"]
    assert rows["15%"][5] == "–" and rows["25%"][5] == "-1.0" and rows["40%"][5] == "+2.0"
    assert float(rows["40%"][3]) == pytest.approx(float(rows["15%"][3]) + 2.0, abs=0.051)
    low, high = (float(x) for x in rows["40%"][4].strip("[]").split(", "))
    assert low < float(rows["40%"][3]) < high  # an interval around the score, not a point
    assert rows["15%"][2] == "–"  # the fixture's records predate the held-out score at the paper's masking


def test_heldout_mlm_at_the_papers_masking_is_the_mean_over_pretraining_seeds(tmp_path):
    from bertbench.report.tables.masking import heldout_mlm

    recs = []
    for seed, acc in ((1, 30.0), (2, 34.0)):
        for r in _copy_as(tmp_path, 0.40, 0.0):
            data = copy.deepcopy(r.data)
            data["pretrain_seed"] = seed
            data["model"]["pretraining"]["heldout"] = {"mlm_accuracy": 20.0, "mlm_accuracy_paper_masking": acc}
            recs.append(LoadedRecord(tmp_path / f"s{seed}.{r.path.name}", data))
    (v,) = collect(recs).variants
    assert heldout_mlm(v) == "32.0% (mean of 2)"  # the paper-masking score, not the training ratio's


def test_the_claim_compares_forty_with_fifteen_percent(data):
    outcome = next(o for o in evaluate(data, load_claims()) if o.claim.id == "wettig-mask40-vs-mask15")
    assert outcome.size == "mini" and outcome.diff.estimate.estimate == pytest.approx(2.0)


def test_the_table_and_its_plot_appear_only_with_two_ratios(data, tmp_path):
    from bertbench.report.render.plots import make_figures

    assert "masking_ratio" in [t.key for t in build_report(data).tables]
    figures = make_figures(data, tmp_path / "plots", tmp_path)
    assert figures.masking_plot == "plots/masking_ratio.png" and (tmp_path / "plots" / "masking_ratio.png").stat().st_size > 0
    from bertbench.report.render.markdown import embed_block

    block = embed_block("<!-- bertbench report: begin m -->\n<!-- bertbench report: end m -->\n", build_report(data), "m")
    assert "Masking ratio: GLUE-5 against the share of tokens masked:" in block and "| mini | 40% |" in block
    alone = collect(load_records([RECORDS / "mini-mlm-nsp"]))
    assert ratio_series(alone) == [] and "masking_ratio" not in [t.key for t in build_report(alone).tables]
