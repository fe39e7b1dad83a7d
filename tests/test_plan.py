"""`bertbench plan` sizes a study honestly: at least two pre-training seeds where a side pre-trains, the metric the
variance is computed on named, each stage costed at its threads, ≫ planned on its bound (never on the estimate it
tests), flagged sides refused in one line, and the docs quoting exactly what it prints."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.errors import BertbenchError
from bertbench.report.model import collect
from bertbench.stages import StageThreads, stage_threads
from bertbench.report.plan import _costs, plan_claim
from bertbench.claims import load_claims
from bertbench.report.claims import claim_sides
from bertbench.results import load_records

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "leaderboards" / "records"
CPU_HOUR = RECORDS / "cpu-hour"
runner = CliRunner()


@pytest.fixture(scope="module")
def cpu_hour():
    data = collect(load_records([CPU_HOUR]))
    return data, load_claims(paper=data.paper)


def _designs(text: str) -> list[tuple[int, int, float]]:
    return [(int(p), int(f), float(m)) for p, f, m in
            re.findall(r"(\d+) pre-training × (\d+) fine-tuning seeds a side \(MDE ([\d.]+)\)", text)]


def test_a_design_keeps_three_pre_training_seeds_a_side():
    """Asked for a large effect, one or two pre-training seeds a side would be the cheapest designs; with one the
    verdict is about two checkpoints, with two their variance has one degree of freedom, so the plan starts at three
    and says why."""
    r = runner.invoke(app, ["plan", str(CPU_HOUR), "--claim", "t5-qnli-nsp", "--effect", "12"])
    assert r.exit_code == 0, r.output
    designs = _designs(r.output)
    assert designs and all(p >= 3 for p, _, _ in designs) and designs[-1][0] == 3  # the point estimate's: the floor
    assert "at least 3 pre-training seeds a side" in r.output


def test_a_design_of_two_pre_training_seeds_is_refused_in_one_line(cpu_hour):
    r = runner.invoke(app, ["plan", str(CPU_HOUR), "--claim", "t5-qnli-nsp", "--design", "2x3"])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code != 0 and len(lines) == 1
    assert lines[0].startswith("error: plan: --design 2x3: a confirmatory design needs at least 3 pre-training seeds")
    text = "\n".join(plan_claim(cpu_hour[0], "t5-qnli-nsp", design=(3, 3)))
    assert "3 pre-training × 3 fine-tuning seeds a side: MDE" in text


def test_the_plan_names_the_metric_it_computes_on(cpu_hour):
    """MRPC's primary metric is F1, but a claim on its accuracy is computed on accuracy: the plan says accuracy."""
    data, claims = cpu_hour
    base = next(c for c in claims.claims if c.id == "t5-mrpc-mlm-vs-ltr")
    claim = dataclasses.replace(base, b="random init")  # both tiny sides are free of near-constant MRPC seeds
    mine = dataclasses.replace(claims, claims=(claim,))
    lines = plan_claim(data, claim.id, effect=5.0, claims=mine)
    assert lines[0].endswith("tiny MLM+NSP − tiny random init on mrpc (accuracy)."), lines[0]


def test_a_stage_costs_its_wall_time_times_its_threads(cpu_hour):
    """The causal LM pre-trains alone on the host's threads (cpu-hour: 2), so one seed costs twice its wall time;
    a masked LM beside another costs its wall time once. Recorded counts win over the rule."""
    data, claims = cpu_hour
    claim = next(c for c in claims.claims if c.id == "t5-mrpc-mlm-vs-ltr")
    mlm, ltr, _ = claim_sides(data, claim, *_at(data, claim, "tiny"))
    threads = stage_threads([CPU_HOUR])
    assert threads.host == 2
    pre_ltr, _, _, n_ltr = _costs(data, ltr, threads)
    pre_mlm, _, _, n_mlm = _costs(data, mlm, threads)
    assert (n_ltr, n_mlm) == (2, 1)
    assert pre_ltr == pytest.approx(2 * ltr.variant.pretraining["wall_seconds"])
    assert pre_mlm == pytest.approx(mlm.variant.pretraining["wall_seconds"])
    recorded = stage_threads([RECORDS / "cpu-hour-wide"])
    assert recorded.of("pretrain mlm_nsp seed1", alone=False) == 1
    assert StageThreads(host=2, recorded={"pretrain ltr seed1": (1, 2)}).of("pretrain ltr seed1", alone=True) == 2
    assert StageThreads(host=4, recorded={}).of("pretrain x seed1", alone=False) == 1


def test_much_greater_is_planned_on_its_bound_not_on_the_estimate():
    """"≫" is reproduced when the interval clears the +5 bound. Planning on (ours − bound) sized the study on the
    number it was about to test; without a paper number the plan takes the bound itself as the margin, or the
    margin given."""
    r = runner.invoke(app, ["plan", str(CPU_HOUR), "--claim", "pretraining-vs-random", "--max-seeds", "40"])
    assert r.exit_code == 0, r.output
    assert "Distance to detect from its bound: 5.0 (the ≫ bound, 5" in r.output and "ours a − b" not in r.output
    given = runner.invoke(app, ["plan", str(CPU_HOUR), "--claim", "pretraining-vs-random", "--effect", "8"])
    assert "Distance to detect from its bound: 8.0 (given" in given.output


def test_a_side_with_a_near_constant_seed_is_refused_in_one_line():
    """cpu-hour's LTR predicts one MRPC label for ≥ 95% of dev on some seed: its variance is the majority class's,
    and a plan from it would print an MDE that no number of seeds delivers."""
    r = runner.invoke(app, ["plan", str(CPU_HOUR), "--claim", "t5-mrpc-mlm-vs-ltr"])
    assert r.exit_code != 0
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: plan: t5-mrpc-mlm-vs-ltr: tiny LTR (causal)")
    assert "near-constant" in lines[0] and "mrpc" in lines[0] and "MDE" not in r.output.split("error:")[0]


def test_a_degenerate_side_is_refused_not_given_an_mde_of_zero():
    """The masking study's 40% variant has seeds that predict one class for every CoLA and MRPC example."""
    r = runner.invoke(app, ["plan", str(RECORDS / "masking"), "--claim", "wettig-mask40-vs-mask15", "--effect", "3"])
    assert r.exit_code != 0 and "degenerate (one class for every example) seed on cola, mrpc" in r.output
    assert "MDE 0.0" not in r.output
    # ... and says what got past it: the smallest budget of a committed study with a non-degenerate cell (issue 57)
    hint = r.output.split("What got past it: ", 1)[1]
    assert hint.startswith("cola: the smallest budget a committed study reached a non-degenerate cell with is tiny ")
    assert "; mrpc: " in hint and "leaderboards/records/" in hint


def test_what_got_past_a_degenerate_cell_is_the_smallest_non_degenerate_budget(tmp_path):
    from bertbench.report.past_degenerate import smallest_budget_past
    from bertbench.results import write_record
    from record_factory import record

    def put(study, seed, predictions, tokens):
        rec = record("rte", seed, predictions, "0101", objective="mlm+nsp")
        data = {**rec.data, "model": {**rec.data["model"], "fingerprint": f"sha256:{tokens:x}",
                                      "pretraining": {**rec.data["model"]["pretraining"], "tokens_seen": tokens}}}
        write_record(tmp_path / study / "rte" / f"rte.dev.seed{seed}.record.json", data)

    put("small", 1, "0000", 1000)  # degenerate: one class
    put("small", 2, "0101", 1000)  # ... beside a good seed: the cell is still degenerate
    assert smallest_budget_past("rte", "tiny", tmp_path) is None  # nothing got past it
    put("big", 1, "0110", 9_000_000)
    put("bigger", 1, "0101", 50_000_000)
    found = smallest_budget_past("rte", "tiny", tmp_path)
    assert found.startswith("rte: the smallest budget a committed study reached a non-degenerate cell with is tiny "
                            "mlm+nsp pre-trained on 9.0M tokens") and found.endswith("leaderboards/records/big)")
    assert smallest_budget_past("rte", "base", tmp_path) is None  # another size's budget is no answer


def _blocks(text: str):
    pattern = re.compile(r"<!-- bertbench plan: begin (\S+) -->\n_Generated by `bertbench plan ([^`]+)`; do not edit "
                         r"between the markers._\n\n```\n(.*?)\n```\n<!-- bertbench plan: end \1 -->", re.S)
    return pattern.findall(text)


@pytest.mark.parametrize("page", ["docs/plan.md", "docs/studies/claims-3.md"])
def test_the_docs_quote_what_plan_prints(page, monkeypatch):
    monkeypatch.chdir(ROOT)
    text = (ROOT / page).read_text(encoding="utf-8")
    blocks = _blocks(text)
    assert len(blocks) == text.count("<!-- bertbench plan: begin ")  >= 1
    for name, command, body in blocks:
        r = runner.invoke(app, ["plan", *command.split()])
        assert r.exit_code == 0, r.output
        assert r.output.rstrip("\n") == body, f"{page}: block {name} is not what `bertbench plan {command}` prints"


def _one_seed(seed: int = 1):
    """cpu-hour as if each variant had been pre-trained once (seed 1): no pre-training variance measured."""
    records = [r for r in load_records([CPU_HOUR]) if r.data.get("pretrain_seed") in (None, seed)]
    return collect(records)


def test_with_one_pre_training_seed_the_plan_states_both_assumptions():
    """One pre-training seed a variant measures no pre-training variance: two designs, under none (a lower bound)
    and under as much as the fine-tuning seeds', the second never cheaper."""
    data = _one_seed()
    lines = plan_claim(data, "t5-qnli-nsp")
    text = "\n".join(lines)
    assert "Plan for t5-qnli-nsp" in text
    assert "Distance to detect from its bound: 4.5 (the paper's a − b +3.5 − the bound −1, BERT paper Table 5)" in text
    designs = re.findall(r"(\d+) pre-training × (\d+) fine-tuning seeds a side \(MDE ([\d.]+)\), (\d+) CPU-minutes",
                         text)
    assert len(designs) == 2 and all(float(mde) <= 4.5 for *_, mde, _ in designs)
    assert int(designs[1][3]) >= int(designs[0][3])
    assert "pre-training seeds not measured (one pre-training seed)" in text and "AMD EPYC, 2 cores" in text


def test_plan_sizes_a_claim_on_the_mean_of_five_tasks():
    """MLM+NSP ≫ random init on GLUE-5: three pre-training seeds measure the pre-training variance of the mean, and
    one design (cheapest first) detects the effect planned for."""
    r = runner.invoke(app, ["plan", str(CPU_HOUR), "--claim", "pretraining-vs-random", "--max-seeds", "40"])
    assert r.exit_code == 0, r.output
    out = r.output
    assert "on the mean of sst2 (accuracy) + cola (mcc) + stsb (spearman) + mrpc (f1) + rte (accuracy)." in out
    assert "Today: 3×3 / 1×3 seeds a task" in out and "not measured" not in out
    (design,) = re.findall(r"sized on the upper bound \(the design to run\): (\d+) pre-training × (\d+) fine-tuning "
                           r"seeds a side \(MDE ([\d.]+)\)", out)
    assert float(design[2]) <= 5.0 and int(design[0]) > 3  # today's three seeds a side could not: MDE 12.9


def test_plan_adds_no_pre_training_variance_to_random_init():
    """Random init pre-trains nothing: its side's pre-training share is 0, not an unmeasured one that the plan's
    'as large as the fine-tuning seeds'' assumption would fill (which made its designs dearer than they are)."""
    from bertbench.report.plan import side_components

    data = _one_seed()
    claims = load_claims(paper=data.paper)
    claim = next(c for c in claims.claims if c.id == "pretraining-vs-random")
    a, b, _ = claim_sides(data, claim, *_at(data, claim, "tiny"))
    assert b.variant.random_init and side_components(b).pretrain == 0.0
    assert side_components(a).pretrain is None  # MLM+NSP: one pre-training seed, not measured
    text = "\n".join(plan_claim(data, "pretraining-vs-random", max_seeds=20))
    assert "b: fine-tuning seeds" in text and "pre-training seeds none (random init)" in text


def test_plan_refuses_an_unknown_claim_in_one_line():
    r = runner.invoke(app, ["plan", str(CPU_HOUR), "--claim", "t5-qnli-nps"])
    assert r.exit_code != 0 and "error: plan: no claim 't5-qnli-nps'" in r.output


def _at(data, claim, size):
    """The claim's two variants at `size` (a paper claim names objectives)."""
    return [next(v for v in data.variants if v.objective == name and v.size == size) for name in (claim.a, claim.b)]


def _seed_means(study: Path, objective: str, task: str) -> tuple[list[float], float]:
    """(each pre-training seed's mean score, the mean variance between fine-tuning seeds), read from the raw records."""
    import json

    import numpy as np

    by_seed: dict[int, list[float]] = {}
    for path in study.rglob("*.record.json"):
        r = json.loads(path.read_text(encoding="utf-8"))
        if (r["task"], r["model"]["size"], (r["model"].get("pretraining") or {}).get("objective")) == (task, "tiny", objective):
            by_seed.setdefault(r["pretrain_seed"], []).append(r["metrics"][r["primary_metric"]])
    return [float(np.mean(v)) for v in by_seed.values()], float(np.mean([np.var(v, ddof=1) for v in by_seed.values()]))


def test_plan_sizes_the_claims_study_on_the_pessimistic_pre_training_variance():
    """The claims study's QNLI claim (6 × 3 seeds a side): the pre-training variance's 80% upper bound from 5 degrees
    of freedom, computed here from the raw records with scipy, is what the plan sizes on; against the distance from
    the claim's bound (the paper's +3.5 − (−1) = 4.5), not the paper's |a − b|; and the printed design detects it
    while no design with one pre-training seed fewer, nor one fine-tuning seed fewer, does."""
    import math

    from scipy import stats

    r = runner.invoke(app, ["plan", str(RECORDS / "claims"), "--claim", "t5-qnli-nsp", "--max-seeds", "20"])
    assert r.exit_code == 0, r.output
    assert "Distance to detect from its bound: 4.5 (the paper's a − b +3.5 − the bound −1" in r.output
    upper, finetune = [], []
    for objective in ("mlm+nsp", "mlm"):
        means, ft = _seed_means(RECORDS / "claims", objective, "qnli_devsplit")
        df = len(means) - 1
        s2 = stats.tvar(means)
        upper.append(max(0.0, s2 * df / stats.chi2.ppf(0.2, df) - ft / 3))
        finetune.append(ft)
        assert f"{upper[-1]:.2f} (estimate {max(0.0, s2 - ft / 3):.2f}, {df} df)" in r.output, (upper, r.output)
    assert upper[0] > 2 * 13.59  # the point estimate 13.59 (what the run measured) more than doubles
    examples = float(re.search(r"paired \(the same examples\): ([\d.]+)\.", r.output).group(1))
    (design,) = re.findall(r"sized on the upper bound \(the design to run\): (\d+) pre-training × (\d+) fine-tuning "
                           r"seeds a side \(MDE ([\d.]+)\)", r.output)
    p, f, printed = int(design[0]), int(design[1]), float(design[2])

    def mde(p: int, f: int) -> float:  # Var(â − b̂) of the design, its Welch–Satterthwaite df, t quantiles
        parts = [u / p + ft / (p * f) for u, ft in zip(upper, finetune)]
        var = sum(parts) + examples
        df = var ** 2 / sum(v * v / (p - 1) for v in parts)
        return (stats.t.ppf(0.975, df) + stats.t.ppf(0.8, df)) * math.sqrt(var)

    assert p >= 3 and mde(p, f) == pytest.approx(printed, abs=0.02) and printed <= 4.5
    assert all(mde(p - 1, g) > 4.5 for g in range(1, 21)) and (f == 1 or mde(p, f - 1) > 4.5)


def test_plan_takes_a_claim_line_and_a_claims_yaml_beside_the_records(tmp_path, cpu_hour):
    """`--claim` in the report's grammar plans a user claim on the records; a claims.yaml beside them is read as
    the report reads it (by name, or every claim when no --claim is given)."""
    from bertbench.claims import load_claims_file

    data, _ = cpu_hour
    line = "mlm+nsp − mlm on stsb > 0"
    text = "\n".join(plan_claim(data, line, effect=6.0))
    assert text.startswith(f"Plan for {line}: tiny MLM+NSP − tiny MLM (no NSP) on stsb (spearman).")
    assert "Claim: a − b > 0. Distance to detect from its bound: 6.0 (given" in text
    # cpu-hour's tiny MLM+NSP seeds disagree wildly on STS-B (515 points² between them, 2 df): no design fits
    assert "a 2331.18 (estimate 515.26, 2 df); b 71.01 (estimate 4.10, 1 df)" in text
    assert "sized on the upper bound (the design to run): no design up to 10 × 10 seeds a side detects 6.0." in text
    with pytest.raises(BertbenchError, match="names no expected effect"):
        plan_claim(data, line)
    # RTE (277 examples, accuracy) is the cheaper score to plan twice
    (tmp_path / "claims.yaml").write_text('claims:\n  - claim: "mlm+nsp − mlm on rte > 0"\n    name: NSP helps RTE\n',
                                          encoding="utf-8")
    every = runner.invoke(app, ["plan", str(tmp_path), str(CPU_HOUR), "--effect", "6"])
    assert every.exit_code == 0, every.output
    assert every.output.startswith("Plan for NSP helps RTE: tiny MLM+NSP − tiny MLM (no NSP) on rte (accuracy).")
    named = plan_claim(data, "NSP helps RTE", effect=6.0, beside=load_claims_file(tmp_path / "claims.yaml"),
                       threads=stage_threads([CPU_HOUR]))
    assert every.output.rstrip("\n").split("\n") == named


def test_plan_sizes_a_family_of_m_claims_at_alpha_over_m():
    """A pre-registered family of m claims is judged under Holm, whose first step tests at α/m: the plan sizes each
    claim at that level. One design, costed both ways: its MDE at α/2 is the t quantiles' at 1 − 0.025/2, which
    (computed here with scipy from the MDE at α and the same df) is larger; the search then needs more seeds."""
    from scipy import stats

    alone = runner.invoke(app, ["plan", str(RECORDS / "claims"), "--claim", "t5-qnli-nsp", "--design", "6x1"])
    pair = runner.invoke(app, ["plan", str(RECORDS / "claims"), "--claim", "t5-qnli-nsp", "--design", "6x1",
                               "--family", "2"])
    assert alone.exit_code == 0 and pair.exit_code == 0, alone.output + pair.output
    assert "α = 0.05/2 = 0.025 two-sided (Holm over a family of 2" in pair.output
    pattern = r"upper bound \(the design to run\): 6 pre-training × 1 fine-tuning seeds a side: MDE ([\d.]+)"
    m1, m2 = (float(re.search(pattern, r.output).group(1)) for r in (alone, pair))
    # MDE = (t(1 − α/2) + t(0.8))·SE at the design's df: recover SE·(quantiles) ratio with the df the plan used
    ratios = {df: (stats.t.ppf(1 - 0.0125, df) + stats.t.ppf(0.8, df)) / (stats.t.ppf(0.975, df) + stats.t.ppf(0.8, df))
              for df in (2, 3, 5, 10, 30, 1000)}
    assert m2 > m1 and min(ratios.values()) - 0.01 <= m2 / m1 <= max(ratios.values()) + 0.01
    searched = [_designs(r.output)[0] for r in (
        runner.invoke(app, ["plan", str(RECORDS / "claims"), "--claim", "t5-qnli-nsp", "--max-seeds", "20"]),
        runner.invoke(app, ["plan", str(RECORDS / "claims"), "--claim", "t5-qnli-nsp", "--max-seeds", "20",
                            "--family", "2"]))]
    assert searched[1][0] * searched[1][1] > searched[0][0] * searched[0][1] or searched[1][0] > searched[0][0]
