"""The claims table: every claim, the paper's and the ones stated for a study, as `report.claims` judges them.

One row per comparison (a claim on an objective has one per model size). "Stated in" says where each claim was
stated (the paper's table, a pre-registration, claims.yaml beside the records, `--claim`), the notes say which Holm
family each verdict belongs to, and a multi-task score says how much each task carries of its a − b.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Optional

from bertbench.reference import PaperNumbers
from bertbench.claims import ALPHA, PAPER, POWER, RESAMPLES, RNG_SEED, Claims, load_claims
from bertbench.report.claims import (
    CONTRADICTED, EXPLORATORY, INCONCLUSIVE, NOT_MEASURABLE, NOT_RUN, PAPERS, PRE_REGISTERED, REPRODUCED,
    SUPPORTED, YOURS, Outcome, contributions, evaluate, paper_values, score_text,
)
from bertbench.report.model import MISSING, ReportData, Table
from bertbench.report.tables.paired import COVERS_NOTE, fmt_covers, fmt_difference, fmt_runs
from bertbench.registration import log_note

HEADER = ("Claim", "Stated in", "a − b", "Score", "Paper a − b", "Ours a − b", "95% interval", "Covers", "Runs a/b",
          "Test", "Threshold from", "MDE (80%)", "p", "p Holm", "Verdict")
FAMILY_WORDS = {PRE_REGISTERED: "pre-registered", EXPLORATORY: "exploratory", PAPERS: "the paper's claims",
                YOURS: "yours (--claim, claims.yaml)"}
AMENDED_AFTER_RESULTS = "amended after results"  # a registration changed once records existed (check_stamps)
CARRIES = 0.5  # one task carrying more than this share of a multi-task a − b is flagged


def fmt_p(p: Optional[float]) -> str:
    if p is None:
        return MISSING
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _paper_difference(paper: PaperNumbers, o: Outcome) -> str:
    if o.claim.origin != PAPER:
        return MISSING
    if o.claim.paper is None or len(o.claim.scores) != 1:
        return "no number (stated in words)"
    values = paper_values(paper, o.claim)
    if values is None:
        return MISSING
    a, b, split = values
    return f"{a - b:+.1f} ({a:.1f} − {b:.1f}, {split})"


def _excluded(paper: PaperNumbers, o: Outcome) -> str:
    """'; the paper's +9.2 excluded' when a comparison that cannot decide the claim (a flagged side, too little
    power) still has an interval that rules out the paper's own a − b: a finding the verdict alone would hide."""
    values = paper_values(paper, o.claim)
    if values is None or not o.compared or o.verdict not in (INCONCLUSIVE, NOT_MEASURABLE):
        return ""
    paper_diff, est = values[0] - values[1], o.diff.estimate
    return "" if est.low <= paper_diff <= est.high else f"; the paper's {paper_diff:+.1f} excluded"


def _carried(o: Outcome) -> str:
    """'; ⚑ stsb carries 87% of it' when one task of a multi-task a − b carries more than half of it."""
    big = [(task, share) for task, _, share in contributions(o) if share > CARRIES]
    return "".join(f"; ⚑ {task} carries {share:.0%} of it" for task, share in big)


def verdict_text(o: Outcome, paper: PaperNumbers, registered: bool, after_results: bool = False) -> str:
    text = o.verdict + (f" ({o.why})" if o.why else "") + _excluded(paper, o) + _carried(o)
    if o.diff is not None and o.diff.best_of > 1:  # never a decision on optimistic cells without saying so
        text += (f"; ‡ judged on each cell's best of {o.diff.best_of} fine-tuning settings on dev (optimistic): "
                 "report one protocol's records for a verdict on it")
    if o.one_pretrain_seed and o.verdict != NOT_RUN:
        text += "; 1 pre-training seed: about these checkpoints"
    if not registered:
        return text
    return text + f" · {o.family}" + (f", {AMENDED_AFTER_RESULTS}" if after_results else "")


def _score(data: ReportData, o: Outcome) -> str:
    if o.claim.origin == PAPER or o.diff is None:
        return score_text(data, o.claim)
    scores = tuple((task, metric or row.metric) for (task, metric), row in zip(o.claim.scores, o.diff.a.rows))
    return score_text(data, dataclasses.replace(o.claim, scores=scores))


def claims_table(data: ReportData, outcomes: Optional[Sequence[Outcome]] = None, paper: Optional[Claims] = None,
                 preregistration=None) -> Table:
    """Every claim's comparisons (`outcomes`, or the paper's claims judged by `report.claims.evaluate`), with
    `preregistration` (bertbench.registration) when its claims were judged as one family."""
    paper = paper or load_claims(paper=data.paper)
    outcomes = evaluate(data, paper) if outcomes is None else list(outcomes)
    registered = preregistration is not None
    rows = []
    for o in outcomes:
        value, interval = fmt_difference(o.diff)
        who = f"{o.a.label} − {o.b.label}" if o.a is not None else f"{o.claim.a} − {o.claim.b}"
        stated = o.claim.source + (f"; also {', '.join(o.claim.also)}" if o.claim.also else "")
        rows.append((o.claim.name or o.claim.text, stated, who, _score(data, o), _paper_difference(data.paper, o),
                     value, interval, fmt_covers(o.diff.estimate) if o.diff else MISSING,
                     fmt_runs(o.diff) if o.diff else MISSING, o.claim.test_text, o.claim.threshold_from,
                     f"{o.mde:.1f}" if o.mde is not None else MISSING, fmt_p(o.p), fmt_p(o.p_holm),
                     verdict_text(o, data.paper, registered, registered and preregistration.after_results)))
    notes = _notes(outcomes, paper, preregistration)
    return Table("claims", "Claims, judged on our records", HEADER, tuple(rows), notes)


def verdict_counts(outcomes: Sequence[Outcome]) -> dict[str, int]:
    made = [o for o in outcomes if o.compared]
    return {v: sum(o.verdict == v for o in made)
            for v in (REPRODUCED, SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_MEASURABLE)}


def _family_note(outcomes: Sequence[Outcome], preregistration) -> str:
    """One statement of the table's Holm families: which verdict belongs to which, and how many each holds."""
    families = [f for f in FAMILY_WORDS if any(o.family == f for o in outcomes)]
    parts = []
    for family in families:
        members = [o for o in outcomes if o.family == family and (o.p is not None or family == PRE_REGISTERED)]
        counts = verdict_counts(members)
        said = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
        unrun = sum(o.p is None for o in members)
        parts.append(f"{FAMILY_WORDS[family]}: {len(members)} member(s)" + (f" ({said})" if said else "")
                     + (f", {unrun} of them without a comparison, counted with p = 1" if unrun else ""))
    if preregistration is not None and preregistration.after_results:
        head = (f"{AMENDED_AFTER_RESULTS.capitalize()}: the pre-registration ({preregistration.where}) changed after the "
                "first fine-tuning had finished (its log lists the amendment), so only what was fixed before the first "
                "record would count as pre-registered, and every comparison here is judged as exploratory, Holm-"
                "adjusted in one family. ")
    elif preregistration is not None:
        source = f"the preset {preregistration.preset}'s" if preregistration.preset else "the"
        head = (f"Holm families (pre-registration: {source} preregistration.yaml, written before the study ran): the "
                "claims it states, the paper's by id and yours alike, are adjusted together; every other comparison "
                "(the paper's other claims, claims.yaml, --claim) is exploratory, in a family of its own, and a claim "
                "stated again later is judged once, under its pre-registration. Each verdict ends with its family. ")
    else:
        head = ("Holm families: the paper's claims (Stated in: the paper's table) and yours (--claim, claims.yaml "
                "beside the records) are adjusted apart; a claim stated twice is judged once, under its earliest "
                "statement. ")
    return (head + "In this table: " + "; ".join(parts) + f". Family-wise level {ALPHA:g}; p is each comparison's own two-sided p, p "
            "Holm the adjusted one; a comparison without an interval (not run, one run, both sides constant) is no "
            "member" + (", except a registered one (p = 1)." if preregistration is not None else ".")
            + log_note(preregistration))


def _notes(outcomes: Sequence[Outcome], paper: Claims, preregistration) -> tuple[str, ...]:
    made = [o for o in outcomes if o.compared]
    sizes = sorted({o.size for o in made if o.size})
    not_run = sum(o.verdict == NOT_RUN for o in outcomes)
    one_seed = sum(o.one_pretrain_seed for o in made)
    notes = [
        f"Verdicts are made at {', '.join(sizes) or 'no'} scale on dev splits (dev, or a dev split we cut where "
        f"the task has no labelled dev set of its own), not at the paper's BERT-Base scale and not on test sets. "
        f"{not_run} comparison(s) not run for lack of records.",
        _family_note(outcomes, preregistration),
        "Estimator: the multi-bootstrap (Sellam et al., The MultiBERTs, 2021): pre-training seeds, fine-tuning "
        f"seeds and dev examples resampled jointly ({RESAMPLES:,} replicates, RNG seed {RNG_SEED}), paired where "
        "both sides share them; 95% interval = estimate ± t·SE; p from the same t. A multi-task score (GLUE-5) "
        "averages every task with all of its seeds. " + COVERS_NOTE,
        f"Pre-training seeds: {one_seed} of {len(made)} comparisons have a pre-trained side with one pre-training "
        "seed (records without `pretrain_seed` are read as one unknown seed); their verdicts say so.",
        "Rules: reproduced (a paper claim) or supported (yours) when Holm's adjusted p < 0.05 with the estimate on "
        "the claim's side of its threshold, contradicted on the other side, else inconclusive. A side with a "
        "degenerate (⊘) or near-constant (≈) seed is inconclusive whatever its numbers. Not measurable at this "
        f"budget: inconclusive, and the minimum detectable effect (MDE: {POWER:.0%} power at α = 0.05 two-sided, "
        "(t(0.975) + t(0.8))·SE from the measured variance) exceeds the effect: the paper's own |a − b| for a paper "
        "claim (for |a − b| < m: the margin m), |T| for yours (a claim against 0 names no effect: its MDE is shown "
        f"but not judged). Thresholds: 'about a point' is {paper.thresholds['about_a_point']:g} point(s) on the "
        f"0-100 scale and '≫' more than {paper.thresholds['much_greater']:g} points; 'Threshold from' says whose "
        "each number is.",
        "Paper a − b: the paper's own difference between its two rows, read from its table (dev, BERT-Base); "
        "claims without a table (Figure 5, the value of pre-training) are stated in words only.",
    ]
    notes += [_contribution_note(o) for o in made if contributions(o)]
    return tuple(notes)


def _contribution_note(o: Outcome) -> str:
    parts = ", ".join(f"{task} {part:+.1f} ({share:.0%})" for task, part, share in contributions(o))
    flag = [task for task, _, share in contributions(o) if share > CARRIES]
    return (f"{o.claim.name or o.claim.text} ({o.a.label} − {o.b.label}): each task's part of the mean a − b "
            f"{o.diff.estimate.estimate:+.1f} (its own a − b over the number of tasks, its share): {parts}"
            + (f"; ⚑ {', '.join(flag)} carries more than half of it: the mean speaks mostly for that task."
               if flag else "."))


def claim_lines(data: ReportData, outcomes: Sequence[Outcome], preregistration=None) -> list[str]:
    """The claims stated for these records (not the paper's), one line per comparison, for the terminal (the
    markdown has the table): printed from the outcomes, with the table's own cell formats."""
    registered = preregistration is not None
    lines = []
    for o in outcomes:
        if o.claim.threshold_from != YOURS:  # a paper claim: its threshold's source is the paper's words or ours
            continue
        who = f"{o.a.label} − {o.b.label}" if o.a is not None else f"{o.claim.a} − {o.claim.b}"
        verdict = verdict_text(o, data.paper, registered, registered and preregistration.after_results)
        value, interval = fmt_difference(o.diff)
        if value == MISSING and interval == MISSING:  # not run: nothing was measured
            lines.append(f"{o.claim.name or o.claim.text}: {who} on {_score(data, o)}: {verdict}")
            continue
        measured = f"{value} {interval} ({fmt_covers(o.diff.estimate)}, runs {fmt_runs(o.diff)})"
        mde = f"{o.mde:.1f}" if o.mde is not None else MISSING
        lines.append(f"{o.claim.name or o.claim.text}: {who} on {_score(data, o)} = {measured}; {o.claim.test_text}: "
                     f"p {fmt_p(o.p)}, p Holm {fmt_p(o.p_holm)}, MDE {mde}: {verdict}")
    return lines


__all__ = ["CARRIES", "HEADER", "claim_lines", "claims_table", "fmt_p", "verdict_counts", "verdict_text"]
