"""The paper's qualitative claims (reference/claims.yaml) judged on our records: the claims table.

Each claim compares two variants, a − b, by the multi-bootstrap (`bertbench.report.tables.paired`), and is
tested against its threshold (claims.yaml's header; every threshold's source is printed beside it):
- p: the two-sided p-value of the t-test on the multi-bootstrap's estimate and SE against the threshold
  (for `equivalent`, two one-sided tests against ±m); the direction is the side the estimate lies on. A
  95% interval wholly on one side of the threshold is exactly p < 0.05 (`verdict()` says where it lies).
- Holm–Bonferroni over the family of every comparison this claims table makes: reproduced (or
  contradicted) when the adjusted p is below 0.05, inconclusive otherwise.
- A degenerate (⊘: one class for every example) or near-constant (≈: ≥ 95% one label or value) side
  never counts as a reproduction, nor as a contradiction: inconclusive.
- not measurable at this budget: inconclusive, and the minimum detectable effect (80% power, from the
  measured variance) exceeds the paper's own difference (for `equivalent`: the margin m).
- not run: the records hold no pair of variants for the claim (not counted as a comparison).
A claim is judged once per model size that has both of its variants.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from bertbench.errors import BertbenchError
from bertbench.report.tables.paired import (
    COVERS_NOTE,
    Difference,
    difference,
    fmt_covers,
    fmt_difference,
    fmt_runs,
    gain_side,
    side,
)
from bertbench.reference import PaperNumbers, load_paper_numbers
from bertbench.report.model import DEFAULT_APPROACH, MISSING, ReportData, Table, Variant
from bertbench.report.multibootstrap import CONFIDENCE, POWER, RESAMPLES, RNG_SEED, Estimate, holm
from bertbench.report.stats import Interval

CLAIMS_PATH = Path(__file__).resolve().parents[2] / "reference" / "claims.yaml"
SCHEMA = 1
TESTS = ("greater", "not_worse", "much_greater", "equivalent")
CHECKPOINTS = ("last", "first", "gain")
APPROACHES = ("fine-tuning", "feature-based")
THRESHOLDS = ("about_a_point", "much_greater")
REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_RUN = "reproduced", "contradicted", "inconclusive", "not run"
NOT_MEASURABLE = "not measurable at this budget"
ALPHA = 1 - CONFIDENCE  # the family-wise level of Holm's adjustment: the 95% intervals' own
# Where each test's threshold comes from: the paper's words, or our reading of them.
THRESHOLD_SOURCES = {
    "greater": "the paper's (a beats b)",
    "not_worse": "ours ('about a point': the paper calls Table 8's 0.1–0.8 spread robust)",
    "much_greater": "ours (the project's target; the paper gives no number)",
    "equivalent": "ours ('about a point', as not_worse)",
}
_REQUIRED = {"id", "source", "claim", "a", "b", "test"}
_OPTIONAL = {"task", "metric", "tasks", "approach", "checkpoint", "paper"}


@dataclass(frozen=True)
class Claim:
    id: str
    source: str
    claim: str
    a: str  # variant objective label, e.g. "MLM+NSP"
    b: str
    scores: tuple[tuple[str, str], ...]  # (paper task, paper metric); several: their per-seed mean
    test: str
    approach: str = DEFAULT_APPROACH
    checkpoint: str = "last"
    paper: Optional[tuple[str, str]] = None  # the paper's systems for a and b, in `source`


@dataclass(frozen=True)
class Claims:
    thresholds: Mapping[str, float]
    claims: tuple[Claim, ...]

    def test_text(self, test: str) -> str:
        m, big = self.thresholds["about_a_point"], self.thresholds["much_greater"]
        return {"greater": "a − b > 0", "not_worse": f"a − b > −{m:g}", "much_greater": f"a − b > {big:g}",
                "equivalent": f"|a − b| < {m:g}"}[test]

    def bound(self, test: str) -> float:
        m = self.thresholds["about_a_point"]
        return {"greater": 0.0, "not_worse": -m, "much_greater": self.thresholds["much_greater"], "equivalent": m}[test]


def load_claims(path: Optional[Path] = None, paper: Optional[PaperNumbers] = None) -> Claims:
    """Load and check claims.yaml (every problem listed in one `BertbenchError`)."""
    return _load(Path(path) if path is not None else CLAIMS_PATH, paper or load_paper_numbers())


def _load(path: Path, paper: PaperNumbers) -> Claims:
    from bertbench.config import load_yaml

    data = load_yaml(path)
    problems: list[str] = []
    if not isinstance(data, dict) or set(data) != {"schema", "thresholds", "claims"}:
        raise BertbenchError(f"{path}: expected the top-level keys schema, thresholds, claims")
    if data["schema"] != SCHEMA:
        problems.append(f"schema {data['schema']!r} is not {SCHEMA}")
    thresholds = data["thresholds"] if isinstance(data["thresholds"], dict) else {}
    if set(thresholds) != set(THRESHOLDS) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in thresholds.values()):
        problems.append(f"thresholds: expected positive numbers for exactly {', '.join(THRESHOLDS)}")
    claims, seen = [], set()
    for i, raw in enumerate(data["claims"] if isinstance(data["claims"], list) else []):
        claim = _parse_claim(raw, f"claims[{i}]", paper, problems)
        if claim is not None:
            if claim.id in seen:
                problems.append(f"claims[{i}]: id {claim.id!r} repeats")
            seen.add(claim.id)
            claims.append(claim)
    if not claims and not problems:
        problems.append("claims: expected a non-empty list")
    if problems:
        raise BertbenchError(f"{path}: {len(problems)} problem(s) in the claims:\n  " + "\n  ".join(problems))
    return Claims({k: float(v) for k, v in sorted(thresholds.items())}, tuple(claims))


def _parse_claim(raw: Any, where: str, paper: PaperNumbers, problems: list[str]) -> Optional[Claim]:
    if not isinstance(raw, dict):
        problems.append(f"{where}: expected a mapping")
        return None
    before = len(problems)
    missing, unknown = _REQUIRED - set(raw), set(raw) - _REQUIRED - _OPTIONAL
    if missing:
        problems.append(f"{where}: missing {', '.join(sorted(missing))}")
        return None
    if unknown:
        problems.append(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    if ("tasks" in raw) == ("task" in raw or "metric" in raw):
        problems.append(f"{where}: give either task and metric, or tasks")
        return None
    scores = [tuple(s) for s in raw["tasks"]] if "tasks" in raw else [(raw.get("task"), raw.get("metric"))]
    for ptask, pmetric in scores:
        if ptask not in paper.tasks or pmetric not in paper.metrics:
            problems.append(f"{where}: {ptask!r} / {pmetric!r} is not a task and metric of paper_numbers.yaml")
    for key, allowed in (("test", TESTS), ("checkpoint", CHECKPOINTS), ("approach", APPROACHES)):
        if key in raw and raw[key] not in allowed:
            problems.append(f"{where}: {key} {raw[key]!r} is not one of {', '.join(allowed)}")
    systems = raw.get("paper")
    if systems is not None:
        if not (isinstance(systems, list) and len(systems) == 2):
            problems.append(f"{where}: paper must be [a's system, b's system]")
        else:
            for system in systems:
                if not paper.find(source=raw["source"], system=system):
                    problems.append(f"{where}: no number of system {system!r} in source {raw['source']!r}")
    if len(problems) > before:
        return None
    return Claim(str(raw["id"]), str(raw["source"]), str(raw["claim"]), str(raw["a"]), str(raw["b"]),
                 tuple(scores), raw["test"], raw.get("approach", DEFAULT_APPROACH), raw.get("checkpoint", "last"),
                 tuple(systems) if systems else None)


# --- verdicts ----------------------------------------------------------------------------------------------


def verdict(test: str, interval: Optional[Interval], thresholds: Mapping[str, float]) -> str:
    """Where an interval of a − b lies against the test's threshold, before any adjustment: reproduced when it
    is wholly on the claim's side, contradicted when wholly on the other, else inconclusive."""
    if interval is None:
        return INCONCLUSIVE
    lo, hi = interval.low, interval.high
    m = thresholds["about_a_point"]
    if test == "equivalent":
        if -m < lo and hi < m:
            return REPRODUCED
        return CONTRADICTED if lo > m or hi < -m else INCONCLUSIVE
    bound = {"greater": 0.0, "not_worse": -m, "much_greater": thresholds["much_greater"]}[test]
    if lo > bound:
        return REPRODUCED
    return CONTRADICTED if hi < bound else INCONCLUSIVE


def claim_p(test: str, est: Estimate, thresholds: Mapping[str, float]) -> tuple[str, float]:
    """(direction, two-sided p): the side of the threshold the estimate points to and how surely; p < 0.05 is
    exactly the 95% interval wholly on that side."""
    m = thresholds["about_a_point"]
    if test == "equivalent":  # two one-sided tests: inside ±m needs both, outside needs one
        p_in = max(est.p_greater(-m), est.p_less(m))
        p_out = min(est.p_greater(m), est.p_less(-m))
        p_rep, p_con = p_in, p_out
    else:
        bound = {"greater": 0.0, "not_worse": -m, "much_greater": thresholds["much_greater"]}[test]
        p_rep, p_con = est.p_greater(bound), est.p_less(bound)
    direction = REPRODUCED if p_rep <= p_con else CONTRADICTED
    return direction, min(1.0, 2 * min(p_rep, p_con))


class Compared:
    """What a claim's outcome (the paper's `Outcome`, the user's `UserOutcome`) says of its comparison."""

    diff: Optional[Difference]

    @property
    def compared(self) -> bool:
        """A comparison was made: a difference with an interval (a member of Holm's family)."""
        return self.diff is not None and self.diff.has_interval and not self.diff.unmeasured

    @property
    def mde(self) -> Optional[float]:
        return self.diff.estimate.mde() if self.compared else None


@dataclass(frozen=True)
class Outcome(Compared):
    claim: Claim
    size: Optional[str]
    diff: Optional[Difference]
    verdict: str
    why: str = ""  # what made it inconclusive, not measurable or not run
    p: Optional[float] = None  # raw two-sided p
    p_holm: Optional[float] = None  # Holm-adjusted over the table's family
    effect: Optional[float] = None  # the effect the claim is about: the paper's |a − b|, or the margin m
    registration: str = ""  # with a pre-registration: 'pre-registered' or 'exploratory' (tables.preregistration)

    def with_holm(self, p_holm: float) -> "Outcome":
        """The verdict after Holm's adjustment, the flags and the power check (`adjusted_verdict`)."""
        effect_text = f"the effect {self.effect:.1f}" if self.effect is not None else ""
        found, why = adjusted_verdict(self.verdict, self.p, p_holm, self.diff, self.effect, effect_text)
        return dataclasses.replace(self, verdict=found, why=why, p_holm=p_holm)

    @property
    def one_pretrain_seed(self) -> bool:
        """Some pre-trained side has one (unknown) pre-training seed: the verdict is about that checkpoint."""
        if self.diff is None:
            return False
        sides = (self.diff.a, self.diff.b)
        return any(not s.variant.random_init and n <= 1
                   for s, n in zip(sides, self.diff.estimate.pretrain_seeds))


def _pick(data: ReportData, objective: str, size: str) -> Optional[Variant]:
    return next((v for v in data.variants if v.objective == objective and v.size == size), None)


def _series(data: ReportData, variant: Variant) -> tuple[Variant, ...]:
    return data.checkpoints.get(variant.label, (variant,))


def _step(variant: Variant) -> Optional[tuple[str, int]]:
    """Where on the pre-training run a checkpoint lies: its step, or its token count in records without steps."""
    pre = variant.pretraining or {}
    if pre.get("steps") is not None:
        return ("step", pre["steps"])
    return None if variant.tokens_seen is None else ("tokens", variant.tokens_seen)


def claim_sides(data: ReportData, claim: Claim, size: str):
    """(a's side, b's side, why not) for the claim at `size`."""
    va, vb = _pick(data, claim.a, size), _pick(data, claim.b, size)
    if claim.checkpoint == "last":
        return side(data, va, claim.scores, claim.approach), side(data, vb, claim.scores, claim.approach), ""
    # Figure 5: points of the two pre-training runs at the same pre-training step (the figure's x-axis), both
    # fine-tuned. Not at the same token count: a masked LM's sentence pairs are sometimes short (the paper's
    # 10% of short targets), a causal LM's text is packed, so the same steps hold slightly different counts.
    ta = {_step(v): v for v in _series(data, va) if side(data, v, claim.scores, claim.approach)}
    tb = {_step(v): v for v in _series(data, vb) if side(data, v, claim.scores, claim.approach)}
    common = sorted(set(ta) & set(tb) - {None})
    if len(common) < 2:  # with one checkpoint, "earliest" would be the final model
        return None, None, "not two checkpoints at the same pre-training step with these scores"
    first, last = common[0], common[-1]
    sa = side(data, ta[first], claim.scores, claim.approach)
    sb = side(data, tb[first], claim.scores, claim.approach)
    if claim.checkpoint == "gain":
        sa = gain_side(sa, side(data, ta[last], claim.scores, claim.approach))
        sb = gain_side(sb, side(data, tb[last], claim.scores, claim.approach))
    return sa, sb, ""


def _judge(data: ReportData, claims: Claims, claim: Claim, size: str) -> Outcome:
    """The claim's comparison at `size`, its raw p and unadjusted direction (Holm comes after, in `evaluate`)."""
    sa, sb, why = claim_sides(data, claim, size)
    if why:
        return Outcome(claim, size, None, NOT_RUN, why)
    if sa is None or sb is None:
        missing = claim.a if sa is None else claim.b
        return Outcome(claim, size, None, NOT_RUN, f"no {_what(data.paper, claim)} records for {missing}")
    diff = difference(sa, sb)
    if diff is None:
        return Outcome(claim, size, None, NOT_RUN, "no seed ran on both sides of the same row")
    effect = claims.thresholds["about_a_point"] if claim.test == "equivalent" else _paper_effect(data.paper, claim)
    if diff.unmeasured:  # two constant predictors: no difference to test, and no member of Holm's family
        return Outcome(claim, size, diff, INCONCLUSIVE, f"{diff.unmeasured}: no difference measured", effect=effect)
    if not diff.has_interval:
        tasks = ", ".join(diff.single_run_tasks)
        return Outcome(claim, size, diff, INCONCLUSIVE, f"one run of {tasks}: no interval", effect=effect)
    direction, p = claim_p(claim.test, diff.estimate, claims.thresholds)
    return Outcome(claim, size, diff, direction, p=p, effect=effect)


def adjusted_verdict(verdict: str, p: float, p_holm: float, diff: Difference, effect: Optional[float],
                     effect_text: str) -> tuple[str, str]:
    """(verdict, why) after Holm's adjustment, the degenerate and near-constant flags and the power check: the
    rules every claim is judged by, the paper's and the user's. `effect_text` names the effect ("the effect 3.5")."""
    found = verdict if p_holm < ALPHA else INCONCLUSIVE
    why = "" if p_holm < ALPHA or p >= ALPHA else f"alone p = {p:.3f}: {verdict}"
    flags = ("⊘ degenerate" if diff.degenerate else "") or ("≈ near-constant" if diff.near_constant else "")
    if flags and found != INCONCLUSIVE:
        found, why = INCONCLUSIVE, f"{flags} cell; the test alone says {found}"
    elif flags:
        why = f"{flags} cell" + (f"; {why}" if why else "")
    mde = diff.estimate.mde()
    if found == INCONCLUSIVE and effect is not None and mde > effect:
        found, why = NOT_MEASURABLE, f"MDE {mde:.1f} > {effect_text}" + (f"; {why}" if why else "")
    return found, why


def adjust_family(groups: Sequence[list], member: Callable[[Compared], bool] = lambda o: True) -> None:
    """Holm–Bonferroni over every outcome of `groups` (lists of the paper's or the user's outcomes) that has a p and
    that `member` admits, as one family: each is replaced, in place, by its verdict after it (`with_holm`)."""
    at = [(group, i) for group in groups for i, o in enumerate(group) if o.p is not None and member(o)]
    for (group, i), p_holm in zip(at, holm([group[i].p for group, i in at])):
        group[i] = group[i].with_holm(p_holm)


def judge_claims(data: ReportData, claims: Claims) -> list[Outcome]:
    """Every claim, once per size that has both variants (once, not run, when no size has); each comparison's
    raw p and direction, before Holm (`adjust_family`)."""
    out = []
    for claim in claims.claims:
        sizes = [v.size for v in data.variants if v.objective == claim.a and _pick(data, claim.b, v.size)]
        if not sizes:
            out.append(Outcome(claim, None, None, NOT_RUN, f"no size has both {claim.a} and {claim.b}"))
        out += [_judge(data, claims, claim, size) for size in sizes]
    return out


def evaluate(data: ReportData, claims: Claims) -> list[Outcome]:
    """`judge_claims`, Holm-adjusted over the family of every comparison made (a pre-registered study judges
    two families instead: tables.preregistration.evaluate_families)."""
    out = judge_claims(data, claims)
    adjust_family([out])
    return out


def _paper_effect(paper: PaperNumbers, claim: Claim) -> Optional[float]:
    """The paper's |a − b| from its table; None for a claim stated in words only."""
    values = _paper_values(paper, claim)
    return None if values is None else abs(values[0] - values[1])


def _paper_values(paper: PaperNumbers, claim: Claim):
    if claim.paper is None or len(claim.scores) != 1:
        return None
    (ptask, pmetric), values = claim.scores[0], []
    for system in claim.paper:
        found = [n for n in paper.find(source=claim.source, system=system, task=ptask, metric=pmetric)
                 if n.config.get("approach", DEFAULT_APPROACH) == claim.approach]
        if not found:
            return None
        values.append(found[0].value)
    return values[0], values[1], found[0].split


def _paper_difference(paper: PaperNumbers, claim: Claim) -> str:
    if claim.paper is None or len(claim.scores) != 1:
        return "no number (stated in words)"
    values = _paper_values(paper, claim)
    if values is None:
        return MISSING
    a, b, split = values
    return f"{a - b:+.1f} ({a:.1f} − {b:.1f}, {split})"


def _what(paper: PaperNumbers, claim: Claim) -> str:
    scores = ", ".join(f"{paper.tasks[t]} {paper.metrics[m]}" for t, m in claim.scores)
    if len(claim.scores) > 1:
        scores = f"mean of {scores}"
    if claim.approach != DEFAULT_APPROACH:
        scores += f", {claim.approach}"
    if claim.checkpoint != "last":
        scores += {"first": ", earliest checkpoint", "gain": ", last − first checkpoint"}[claim.checkpoint]
    return scores


def _fmt_p(p: Optional[float]) -> str:
    if p is None:
        return MISSING
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _excluded(paper: PaperNumbers, o: Outcome) -> str:
    """' · the paper's +9.2 excluded' when a comparison that cannot decide the claim (a flagged side, too little
    power) still has an interval that rules out the paper's own a − b: a finding the verdict alone would hide."""
    values = _paper_values(paper, o.claim)
    if values is None or not o.compared or o.verdict not in (INCONCLUSIVE, NOT_MEASURABLE):
        return ""
    paper_diff, est = values[0] - values[1], o.diff.estimate
    return "" if est.low <= paper_diff <= est.high else f"; the paper's {paper_diff:+.1f} excluded"


def _verdict_text(o: Outcome, paper: Optional[PaperNumbers] = None) -> str:
    text = o.verdict + (f" ({o.why})" if o.why else "") + (_excluded(paper, o) if paper is not None else "")
    if o.one_pretrain_seed and o.verdict != NOT_RUN:
        text += "; 1 pre-training seed: about these checkpoints"
    return text + (f" · {o.registration}" if o.registration else "")


def claims_table(data: ReportData, claims: Optional[Claims] = None, outcomes: Optional[list[Outcome]] = None,
                 family_note: str = "") -> Table:
    """The table of the paper's claims: `outcomes` when given (a pre-registered study's, with `family_note`
    saying how its families were adjusted), else `evaluate`'s."""
    claims = claims or load_claims(paper=data.paper)
    outcomes = evaluate(data, claims) if outcomes is None else outcomes
    header = ("Claim", "Source", "a − b", "Score", "Paper a − b", "Ours a − b", "95% interval", "Covers",
              "Runs a/b", "Test", "Threshold from", "MDE (80%)", "p", "p Holm", "Verdict")
    rows: list[tuple[str, ...]] = []
    for o in outcomes:
        value, interval = fmt_difference(o.diff)
        who = f"{o.size} {o.claim.a} − {o.size} {o.claim.b}" if o.size else f"{o.claim.a} − {o.claim.b}"
        rows.append((o.claim.claim, o.claim.source, who, _what(data.paper, o.claim),
                     _paper_difference(data.paper, o.claim), value, interval,
                     fmt_covers(o.diff.estimate) if o.diff else MISSING, fmt_runs(o.diff) if o.diff else MISSING,
                     claims.test_text(o.claim.test), THRESHOLD_SOURCES[o.claim.test],
                     f"{o.mde:.1f}" if o.mde is not None else MISSING, _fmt_p(o.p), _fmt_p(o.p_holm),
                     _verdict_text(o, data.paper)))
    notes = _claims_notes(outcomes, claims) + ((family_note,) if family_note else ())
    return Table("claims", "The paper's claims, judged on our records", header, tuple(rows), notes)


def verdict_counts(outcomes) -> dict[str, int]:
    made = [o for o in outcomes if o.compared]
    return {v: sum(o.verdict == v for o in made) for v in (REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_MEASURABLE)}


def _claims_notes(outcomes: list[Outcome], claims: Claims) -> tuple[str, ...]:
    made = [o for o in outcomes if o.compared]
    counts = verdict_counts(outcomes)
    sizes = sorted({o.size for o in made if o.size})
    not_run = sum(o.verdict == NOT_RUN for o in outcomes)
    one_seed = sum(o.one_pretrain_seed for o in made)
    return (
        f"Verdicts are made at {', '.join(sizes) or 'no'} scale on dev splits (dev, or a dev split we cut where "
        f"the task has no labelled dev set of its own), not at the paper's BERT-Base scale and not on test sets.",
        f"{len(made)} comparisons made ({counts[REPRODUCED]} reproduced, {counts[CONTRADICTED]} contradicted, "
        f"{counts[INCONCLUSIVE]} inconclusive, {counts[NOT_MEASURABLE]} not measurable at this budget); {not_run} "
        f"claim(s) not run for lack of records. Family for Holm–Bonferroni: these {len(made)} comparisons, at "
        f"family-wise level {ALPHA:g}; p is each comparison's own two-sided p, p Holm the adjusted one.",
        "Estimator: the multi-bootstrap (Sellam et al., The MultiBERTs, 2021): pre-training seeds, fine-tuning "
        f"seeds and dev examples resampled jointly ({RESAMPLES:,} replicates, RNG seed {RNG_SEED}), paired where "
        "both sides share them; 95% interval = estimate ± t·SE; p from the same t. A multi-task score (GLUE-5) "
        "averages every task with all of its seeds. " + COVERS_NOTE,
        f"Pre-training seeds: {one_seed} of {len(made)} comparisons have a pre-trained side with one pre-training "
        "seed (records without `pretrain_seed` are read as one unknown seed); their verdicts say so.",
        "Rules: reproduced (contradicted) when Holm's adjusted p < 0.05 with the estimate on the claim's (the "
        "other) side of its threshold, else inconclusive. A side with a degenerate (⊘) or near-constant (≈) seed "
        "is inconclusive whatever its numbers. Not measurable at this budget: inconclusive, and the minimum "
        f"detectable effect (MDE: {POWER:.0%} power at α = 0.05 two-sided, (t(0.975) + t(0.8))·SE from the "
        "measured variance) exceeds the paper's own |a − b| (for |a − b| < m: the margin m). Thresholds: 'about "
        f"a point' is {claims.thresholds['about_a_point']:g} point(s) on the 0-100 scale and '≫' more than "
        f"{claims.thresholds['much_greater']:g} points; 'Threshold from' says whose each number is.",
        "Paper a − b: the paper's own difference between its two rows, read from its table (dev, BERT-Base); "
        "claims without a table (Figure 5, the value of pre-training) are stated in words only.",
    )


__all__ = ["CLAIMS_PATH", "Claim", "Claims", "Outcome", "THRESHOLD_SOURCES", "claim_p", "claims_table", "adjust_family", "evaluate", "judge_claims",
           "load_claims", "verdict", "verdict_counts", "CONTRADICTED", "INCONCLUSIVE", "NOT_MEASURABLE", "NOT_RUN",
           "REPRODUCED"]
