"""The paper's qualitative claims (reference/claims.yaml) judged on our records: the claims table.

Each claim compares two variants (a − b, paired by seed: `bertbench.report.tables.paired`) and gets a verdict from
where the 95% paired t-interval [lo, hi] lies against the claim's threshold (the rules are in
claims.yaml's header, with the thresholds; `verdict()` applies them):
- reproduced: the whole interval is on the claim's side;
- contradicted: the whole interval is on the other side;
- inconclusive: the interval straddles the threshold, or has fewer than two seed pairs (no interval),
  or a side is degenerate (one class for every example): a degenerate cell never counts as a
  reproduction, nor as a contradiction;
- not run: the records hold no pair of variants for the claim (not counted as a comparison).
Where both sides hold per-example results (accuracy: `extra.example_correct`), the paired bootstrap
over seeds × dev examples is computed too, and a verdict must hold under both intervals.
A claim is judged once per model size that has both of its variants.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from bertbench.errors import BertbenchError
from bertbench.report.tables.paired import Difference, difference, fmt_difference, gain_side, side
from bertbench.reference import PaperNumbers, load_paper_numbers
from bertbench.report.model import DEFAULT_APPROACH, MISSING, ReportData, Table, Variant
from bertbench.report.stats import BOOTSTRAP_RESAMPLES, Interval, fmt_interval

CLAIMS_PATH = Path(__file__).resolve().parents[2] / "reference" / "claims.yaml"
SCHEMA = 1
TESTS = ("greater", "not_worse", "much_greater", "equivalent")
CHECKPOINTS = ("last", "first", "gain")
APPROACHES = ("fine-tuning", "feature-based")
THRESHOLDS = ("about_a_point", "much_greater")
REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_RUN = "reproduced", "contradicted", "inconclusive", "not run"
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
    """Where the interval of a − b lies against the test's threshold (see the module docstring)."""
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


@dataclass(frozen=True)
class Outcome:
    claim: Claim
    size: Optional[str]
    diff: Optional[Difference]
    verdict: str
    why: str = ""  # what made it inconclusive or not run

    @property
    def compared(self) -> bool:
        """A comparison was made: a difference with an interval."""
        return self.diff is not None and self.diff.interval is not None


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


def _judge(data: ReportData, claims: Claims, claim: Claim, size: str) -> Outcome:
    va, vb = _pick(data, claim.a, size), _pick(data, claim.b, size)
    if claim.checkpoint == "last":
        sa = side(data, va, claim.scores, claim.approach)
        sb = side(data, vb, claim.scores, claim.approach)
    else:
        # Figure 5: points of the two pre-training runs at the same pre-training step (the figure's x-axis), both
        # fine-tuned. Not at the same token count: a masked LM's sentence pairs are sometimes short (the paper's
        # 10% of short targets), a causal LM's text is packed, so the same steps hold slightly different counts.
        ta = {_step(v): v for v in _series(data, va) if side(data, v, claim.scores, claim.approach)}
        tb = {_step(v): v for v in _series(data, vb) if side(data, v, claim.scores, claim.approach)}
        common = sorted(set(ta) & set(tb) - {None})
        if len(common) < 2:  # with one checkpoint, "earliest" would be the final model
            return Outcome(claim, size, None, NOT_RUN, "not two checkpoints at the same pre-training step with these scores")
        first, last = common[0], common[-1]
        sa = side(data, ta[first], claim.scores, claim.approach)
        sb = side(data, tb[first], claim.scores, claim.approach)
        if claim.checkpoint == "gain":
            sa = gain_side(sa, side(data, ta[last], claim.scores, claim.approach))
            sb = gain_side(sb, side(data, tb[last], claim.scores, claim.approach))
    if sa is None or sb is None:
        missing = claim.a if sa is None else claim.b
        return Outcome(claim, size, None, NOT_RUN, f"no {_what(data.paper, claim)} records for {missing}")
    diff = difference(sa, sb, bootstrap=True)
    if diff is None or diff.estimate is None:
        return Outcome(claim, size, diff, NOT_RUN, "no seed ran on both sides of the same row")
    if diff.interval is None:
        return Outcome(claim, size, diff, INCONCLUSIVE, "one seed pair: no interval")
    found = verdict(claim.test, diff.interval, claims.thresholds)
    if diff.bootstrap is not None:  # dev-example noise too: a verdict must survive both intervals
        by_examples = verdict(claim.test, diff.bootstrap, claims.thresholds)
        if by_examples != found:
            return Outcome(claim, size, diff, INCONCLUSIVE,
                           f"t over seeds says {found}, the bootstrap over dev examples says {by_examples}")
    if diff.degenerate:
        return Outcome(claim, size, diff, INCONCLUSIVE, f"degenerate cell ⊘; the interval alone says {found}")
    return Outcome(claim, size, diff, found)


def evaluate(data: ReportData, claims: Claims) -> list[Outcome]:
    """Every claim, once per size that has both variants (once, not run, when no size has)."""
    out = []
    for claim in claims.claims:
        sizes = [v.size for v in data.variants if v.objective == claim.a and _pick(data, claim.b, v.size)]
        if not sizes:
            out.append(Outcome(claim, None, None, NOT_RUN, f"no size has both {claim.a} and {claim.b}"))
        out += [_judge(data, claims, claim, size) for size in sizes]
    return out


def _paper_difference(paper: PaperNumbers, claim: Claim) -> str:
    if claim.paper is None or len(claim.scores) != 1:
        return "no number (stated in words)"
    (ptask, pmetric), values = claim.scores[0], []
    for system in claim.paper:
        found = [n for n in paper.find(source=claim.source, system=system, task=ptask, metric=pmetric)
                 if n.config.get("approach", DEFAULT_APPROACH) == claim.approach]
        if not found:
            return MISSING
        values.append(found[0].value)
    return f"{values[0] - values[1]:+.1f} ({values[0]:.1f} − {values[1]:.1f}, {found[0].split})"


def _what(paper: PaperNumbers, claim: Claim) -> str:
    scores = ", ".join(f"{paper.tasks[t]} {paper.metrics[m]}" for t, m in claim.scores)
    if len(claim.scores) > 1:
        scores = f"mean of {scores}"
    if claim.approach != DEFAULT_APPROACH:
        scores += f", {claim.approach}"
    if claim.checkpoint != "last":
        scores += {"first": ", earliest checkpoint", "gain": ", last − first checkpoint"}[claim.checkpoint]
    return scores


def claims_table(data: ReportData, claims: Optional[Claims] = None) -> Table:
    claims = claims or load_claims(paper=data.paper)
    outcomes = evaluate(data, claims)
    header = ("Claim", "Source", "a − b", "Score", "Paper a − b", "Ours a − b", "95% interval", "Seed pairs",
              "Bootstrap 95% (seeds × examples)", "Test", "Verdict")
    rows: list[tuple[str, ...]] = []
    for o in outcomes:
        value, interval = fmt_difference(o.diff)
        who = f"{o.size} {o.claim.a} − {o.size} {o.claim.b}" if o.size else f"{o.claim.a} − {o.claim.b}"
        shown = o.verdict + (f" ({o.why})" if o.why else "")
        rows.append((o.claim.claim, o.claim.source, who, _what(data.paper, o.claim),
                     _paper_difference(data.paper, o.claim), value, interval,
                     str(len(o.diff.seeds)) if o.diff else "0",
                     fmt_interval(o.diff.bootstrap, signed=True) if o.diff and o.diff.bootstrap else MISSING,
                     claims.test_text(o.claim.test), shown))
    made = [o for o in outcomes if o.compared]
    counts = {v: sum(o.verdict == v for o in made) for v in (REPRODUCED, CONTRADICTED, INCONCLUSIVE)}
    sizes = sorted({o.size for o in made if o.size})
    not_run = sum(o.verdict == NOT_RUN for o in outcomes)
    m, big = claims.thresholds["about_a_point"], claims.thresholds["much_greater"]
    notes = (
        f"Verdicts are made at {', '.join(sizes) or 'no'} scale on dev splits (dev, or a dev split we cut where "
        f"the task has no labelled dev set of its own), not at the paper's BERT-Base scale and not on test sets.",
        f"{len(made)} comparisons made ({counts[REPRODUCED]} reproduced, {counts[CONTRADICTED]} contradicted, "
        f"{counts[INCONCLUSIVE]} inconclusive); {not_run} claim(s) not run for lack of records. Each interval is "
        f"a 95% paired t-interval over fine-tuning seeds, not adjusted for multiple comparisons: among "
        f"{len(made)} comparisons about {0.05 * len(made):.1f} may miss by chance alone.",
        f"Rules: reproduced when the whole interval of a − b is on the claim's side of its threshold, contradicted "
        f"when it is wholly on the other side, inconclusive otherwise. 'About a point' is {m:g} point(s) on the "
        f"0-100 scale; '≫' means more than {big:g} points. A side with a degenerate seed (⊘: one class for every "
        f"example) or a single seed pair is inconclusive whatever its numbers.",
        "Bootstrap: where both sides' records hold per-example results (accuracy), a paired bootstrap that resamples "
        f"seeds and dev examples together ({BOOTSTRAP_RESAMPLES:,} resamples, percentile interval); a verdict then has to hold for both "
        "intervals, else it is inconclusive. The t-interval alone measures fine-tuning noise on this dev set only.",
        "Paper a − b: the paper's own difference between its two rows, read from its table (dev, BERT-Base); "
        "claims without a table (Figure 5, the value of pre-training) are stated in words only.",
    )
    return Table("claims", "The paper's claims, judged on our records", header, tuple(rows), notes)


__all__ = ["CLAIMS_PATH", "Claim", "Claims", "Outcome", "claims_table", "evaluate", "load_claims", "verdict",
           "CONTRADICTED", "INCONCLUSIVE", "NOT_RUN", "REPRODUCED"]
