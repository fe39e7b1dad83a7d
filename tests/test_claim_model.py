"""One claim model (issue 48): a claim's identity is its normalised statement, judged once under its earliest
statement; a command-line claim never joins or changes a pre-registered family; a registered claim without records
stays in its family; a multi-task a − b says what each task carries of it."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.claims import COMMAND_LINE, FILE, Claims, load_claims, parse_claim, statements
from bertbench.report.claims import EXPLORATORY, NOT_RUN, PRE_REGISTERED, contributions, evaluate
from bertbench.report.model import collect
from bertbench.report.multibootstrap import holm
from bertbench.report.tables.claims import claims_table
from bertbench.registration import PREREGISTRATION_FILE, parse_preregistration
from bertbench.registration import write_preregistration
from bertbench.results import record_filename, write_record

from record_factory import FAIR, GOLD, GOOD, POOR, variant

runner = CliRunner()
WALK = "mlm+nsp − mlm on stsb > 0"  # the researcher's walk: pre-registered, then given again as --claim


def _records():
    return (variant("qnli_devsplit", "mlm+nsp", GOOD, GOLD) + variant("qnli_devsplit", "mlm", FAIR, GOLD)
            + variant("stsb", "mlm+nsp", GOOD, GOLD) + variant("stsb", "mlm", FAIR, GOLD))


def test_a_claims_identity_is_its_normalised_statement():
    paper = load_claims()
    key = parse_claim(WALK).key(paper_numbers := collect(_records()).paper)
    assert parse_claim("MLM+NSP - MLM (no NSP) on stsb > 0.0").key(paper_numbers) == key
    assert parse_claim("mlm+nsp − mlm on stsb > 0.5").key(paper_numbers) != key
    [qnli] = [c for c in paper.claims if c.id == "t5-qnli-nsp"]  # the paper's, written in the grammar
    assert (qnli.comparator, qnli.threshold) == (">", -1.0)
    assert parse_claim("mlm+nsp − mlm on qnli_devsplit:accuracy > −1").key(paper_numbers) == qnli.key(paper_numbers)
    # stated twice: judged once, under the earliest statement (claims.yaml before --claim), the later one shown
    later, earlier = parse_claim(WALK), parse_claim(WALK, "results/claims.yaml:2", origin=FILE)
    [once] = statements([], [later, earlier], paper_numbers)
    assert once.origin == FILE and once.also == ("yours (--claim)",)


def _registered_rows(tmp_path, *claims: str) -> dict[str, tuple[str, ...]]:
    """The claims table's pre-registered rows (claim → its cells) of `bertbench report` with `--claim`s."""
    out = tmp_path / f"report{len(claims)}.md"
    r = runner.invoke(app, ["report", str(tmp_path / "results"), "--out", str(out),
                            *[arg for c in claims for arg in ("--claim", c)]])
    assert r.exit_code == 0, r.output
    rows = [line for line in out.read_text(encoding="utf-8").splitlines() if line.endswith("· pre-registered |")]
    return {row.split(" | ")[0]: row for row in rows}


def test_a_command_line_claim_never_joins_or_changes_a_pre_registered_family(tmp_path):
    """The walk's case: a study pre-registers "mlm+nsp − mlm on stsb > 0" (beside the paper's QNLI claim); the same
    claim given again with --claim is judged once, under its pre-registration: every registered p, p Holm and
    verdict stays as it was (it used to join the family and double its Holm p)."""
    folder = tmp_path / "results"
    for rec in _records():
        write_record(folder / rec.path.parent.name / record_filename(rec.data), rec.data)
    prereg = {"claims": ["t5-qnli-nsp", WALK]}
    write_preregistration(folder / PREREGISTRATION_FILE,
                          parse_preregistration(prereg, "test", load_claims(), preset="walk"))
    alone = _registered_rows(tmp_path)
    again = _registered_rows(tmp_path, WALK, "mlm+nsp - mlm on stsb > 0.0")
    assert len(alone) == 2 and set(again) == set(alone)
    for claim, row in alone.items():
        cells, cells_again = row.split(" | "), again[claim].split(" | ")
        assert cells_again[:1] + cells_again[2:] == cells[:1] + cells[2:]  # only 'Stated in' adds the later one
    stated = again[f"| {WALK}"].split(" | ")[1]
    assert stated == "pre-registration (results/preregistration.yaml); also yours (--claim), yours (--claim)"


def test_a_registered_claim_without_records_stays_in_its_family_as_not_run():
    """A pre-registered claim that the records cannot measure (no SQuAD here) is not dropped from Holm: it counts
    as a member with p = 1, so the registered QNLI claim's Holm p is that of a family of two."""
    data = collect(_records())
    paper = load_claims(paper=data.paper)
    registered = [c for c in paper.claims if c.id in ("t5-qnli-nsp", "t5-squad-nsp")]
    registered.append(parse_claim("mlm+nsp − clm on cola > 0", "prereg", origin="pre-registration"))
    out = evaluate(data, paper, registered[2:], registered)
    qnli, squad = (next(o for o in out if o.claim.id == i) for i in ("t5-qnli-nsp", "t5-squad-nsp"))
    cola = next(o for o in out if o.claim is registered[2])
    assert squad.verdict == NOT_RUN and cola.verdict == NOT_RUN and squad.family == cola.family == PRE_REGISTERED
    assert qnli.p is not None and qnli.p_holm == pytest.approx(holm([qnli.p, 1.0, 1.0])[0])
    assert squad.p_holm == cola.p_holm == 1.0
    others = [o for o in out if o.family == EXPLORATORY]
    assert others and all(o.verdict == NOT_RUN for o in others)
    table = claims_table(data, out, paper, preregistration=parse_preregistration(
        {"claims": ["t5-qnli-nsp", "t5-squad-nsp"]}, "test", paper))
    assert "pre-registered: 3 member(s) (" in table.notes[1]
    assert "2 of them without a comparison, counted with p = 1" in table.notes[1]


def test_one_task_carrying_most_of_a_multi_task_difference_is_shown_and_flagged():
    """GLUE-4's +8.3 in the claims study was 87% STS-B: a mean over tasks says what each task carries of it."""
    data = collect(variant("rte", "mlm+nsp", GOOD, GOLD) + variant("rte", "mlm", POOR, GOLD)
                   + variant("sst2", "mlm+nsp", GOOD, GOLD) + variant("sst2", "mlm", FAIR, GOLD))
    [o] = evaluate(data, Claims({}, ()), [parse_claim("mlm+nsp − mlm on rte,sst2 > 0", origin=COMMAND_LINE)])
    parts = contributions(o)
    assert [task for task, _, _ in parts] == ["rte", "sst2"]
    assert sum(part for _, part, _ in parts) == pytest.approx(o.diff.estimate.estimate)
    assert sum(share for _, _, share in parts) == pytest.approx(1.0) and parts[0][2] > 0.5 > parts[1][2]
    table = claims_table(data, [o], load_claims(paper=data.paper))
    assert f"; ⚑ rte carries {parts[0][2]:.0%} of it" in table.rows[0][-1]
    assert any(f"rte {parts[0][1]:+.1f} ({parts[0][2]:.0%})" in note and "⚑ rte carries more than half" in note
               for note in table.notes)
    [even] = evaluate(data, Claims({}, ()), [parse_claim("mlm+nsp − mlm on rte,rte > 0")])
    assert "⚑" not in claims_table(data, [even], load_claims(paper=data.paper)).rows[0][-1]  # halves: no flag
