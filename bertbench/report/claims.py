"""The claims' one judge (the report's claims table renders it): a claim (bertbench.claims: the grammar, where it
was stated) is judged once under its earliest statement, so a later one never joins or changes a family. The judge:
the multi-bootstrap's a − b, p against T, Holm within the claim's family (`evaluate`), then the flags and the power
check (`adjusted_verdict`); a pre-registered claim without a comparison stays in its family with p = 1.
docs/claims.md is the reference.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from bertbench.claims import (
    COMMAND_LINE, FILE, OBJECTIVE_WORDS, PAPER, PREREGISTRATION, Claim, Claims, load_claims, names_variant, statements,
)
from bertbench.errors import BertbenchError
from bertbench.reference import PaperNumbers
from bertbench.claims import ALPHA, DEFAULT_APPROACH
from bertbench.report.model import ReportData, Variant
from bertbench.report.multibootstrap import Estimate, holm
from bertbench.report.comparison import Difference, Side, difference, gain_side, side

REPRODUCED, SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_RUN = (
    "reproduced", "supported", "contradicted", "inconclusive", "not run")
NOT_MEASURABLE = "not measurable at this budget"
# Holm families: with a pre-registration, the registered claims and the rest; without, the paper's and yours.
PRE_REGISTERED, EXPLORATORY, PAPERS, YOURS = "pre-registered", "exploratory", "the paper's", "yours"


# --- resolving a claim on the records ------------------------------------------------------------------------


def _variants(data: ReportData, claim: Claim, name: str) -> list[tuple[Variant, bool]]:
    found = [(v, exact) for v in data.variants if (exact := names_variant(name, v)) is not None]
    if not found and claim.origin in (FILE, COMMAND_LINE):  # a claim stated before the records is "not run"
        known = "; ".join(v.label for v in data.variants)
        raise BertbenchError(f"{claim.where}: claim {claim.text!r}: no variant {name!r} in these records (their "
                             f"variants: {known}; or an objective: {', '.join(OBJECTIVE_WORDS)})")
    return found


def _check_tasks(data: ReportData, claim: Claim) -> None:
    """A claim stated for these records names tasks and metrics they hold. One stated before them (the paper's, a
    pre-registration's) may name what they lack: it is "not run", and a registered one stays in its family."""
    if claim.origin in (PAPER, PREREGISTRATION):
        return
    tasks = {r.task for r in data.rows}
    for task, metric in claim.scores:
        rows = [r for r in data.rows if task in (r.task, data.paper.paper_task(r.task))]
        if not rows:
            raise BertbenchError(f"{claim.where}: claim {claim.text!r}: no records of task {task!r} (tasks in these "
                                 f"records: {', '.join(sorted(tasks))})")
        if metric is not None:
            have = {m for r in rows for v in data.variants if data.cell(v, r)
                    for rec in data.cell(v, r).records for m in rec["metrics"]}
            if metric not in have:
                raise BertbenchError(f"{claim.where}: claim {claim.text!r}: task {task!r} has no metric {metric!r} "
                                     f"(its records have {', '.join(sorted(have))})")


def _step(variant: Variant) -> Optional[tuple[str, int]]:
    """Where on the pre-training run a checkpoint lies: its step, or its token count in records without steps."""
    pre = variant.pretraining or {}
    if pre.get("steps") is not None:
        return ("step", pre["steps"])
    return None if variant.tokens_seen is None else ("tokens", variant.tokens_seen)


def claim_sides(data: ReportData, claim: Claim, va: Variant, vb: Variant):
    """(a's side, b's side, why not) of the claim on variants va and vb (Figure 5's claims: two checkpoints)."""
    def at(v: Variant) -> Optional[Side]:
        return side(data, v, claim.scores, claim.approach)

    if claim.checkpoint == "last":
        return at(va), at(vb), ""
    # Figure 5: points of the two pre-training runs at the same pre-training step (the figure's x-axis), both
    # fine-tuned. Not at the same token count: a masked LM's sentence pairs are sometimes short (the paper's
    # 10% of short targets), a causal LM's text is packed, so the same steps hold slightly different counts.
    ta, tb = ({_step(v): v for v in data.checkpoints.get(x.label, (x,)) if at(v)} for x in (va, vb))
    common = sorted(set(ta) & set(tb) - {None})
    if len(common) < 2:  # with one checkpoint, "earliest" would be the final model
        return None, None, "not two checkpoints at the same pre-training step with these scores"
    first, last = common[0], common[-1]
    sa, sb = at(ta[first]), at(tb[first])
    if claim.checkpoint == "gain":
        sa, sb = gain_side(sa, at(ta[last])), gain_side(sb, at(tb[last]))
    return sa, sb, ""


def score_text(data: ReportData, claim: Claim) -> str:
    """What a claim's score is, in words: 'QNLI Acc', 'mean of sst2 accuracy, rte accuracy', '..., feature-based'."""
    paper = data.paper
    words = [f"{paper.tasks[t]} {paper.metrics[m]}" if claim.origin == PAPER else f"{t} {m or 'primary metric'}"
             for t, m in claim.scores]
    text = ", ".join(words) if len(words) == 1 else f"mean of {', '.join(words)}"
    if claim.approach != DEFAULT_APPROACH:
        text += f", {claim.approach}"
    if claim.checkpoint != "last":
        text += {"first": ", earliest checkpoint", "gain": ", last − first checkpoint"}[claim.checkpoint]
    return text


# --- the judge ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One comparison of a claim (a claim on an objective has one a model size), before and after Holm."""

    claim: Claim
    a: Optional[Variant]
    b: Optional[Variant]
    diff: Optional[Difference]
    verdict: str
    why: str = ""  # what made it inconclusive, not measurable or not run
    p: Optional[float] = None  # raw two-sided p
    p_holm: Optional[float] = None  # Holm-adjusted within its family
    effect: Optional[float] = None  # the effect of the power check: the paper's |a − b| (or margin), or |T|
    family: str = ""  # the Holm family it is adjusted in (PRE_REGISTERED, EXPLORATORY, PAPERS, YOURS)

    @property
    def size(self) -> Optional[str]:
        return self.a.size if self.a is not None else None

    @property
    def compared(self) -> bool:
        """A comparison was made: a difference with an interval (a member of Holm's family)."""
        return self.diff is not None and self.diff.has_interval and not self.diff.unmeasured

    @property
    def mde(self) -> Optional[float]:
        return self.diff.estimate.mde() if self.compared else None

    @property
    def one_pretrain_seed(self) -> bool:
        """Some pre-trained side has one (unknown) pre-training seed: the verdict is about that checkpoint."""
        if self.diff is None:
            return False
        return any(not s.variant.random_init and n <= 1
                   for s, n in zip((self.diff.a, self.diff.b), self.diff.estimate.pretrain_seeds))

    def with_holm(self, p_holm: float) -> "Outcome":
        """The verdict after Holm's adjustment, the flags and the power check (`adjusted_verdict`)."""
        if self.p is None:  # a registered claim without a comparison: counted in its family, never decided
            return dataclasses.replace(self, p_holm=p_holm)
        effect = self.effect
        effect_text = "" if effect is None else (
            f"the effect {effect:.1f}" if self.claim.origin == PAPER else f"|T| {effect:g}")
        found, why = adjusted_verdict(self.verdict, self.p, p_holm, self.diff, effect, effect_text)
        return dataclasses.replace(self, verdict=found, why=why, p_holm=p_holm)


def paper_values(paper: PaperNumbers, claim: Claim):
    """(a's number, b's number, split) in the paper's own table; None for a claim stated in words only."""
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


def effect_of(paper: PaperNumbers, claim: Claim) -> Optional[float]:
    """The effect a claim's power check is against: a paper claim's |a − b| in the paper's table (the margin for
    `within`; None for a claim in words only), and |T| for yours (None against 0: it names no effect)."""
    if claim.origin != PAPER or claim.comparator == "within":
        return claim.effect
    values = paper_values(paper, claim)
    return None if values is None else abs(values[0] - values[1])


def direction_and_p(claim: Claim, est: Estimate) -> tuple[str, float]:
    """(the side the estimate points to, two-sided p) of the t-test against the claim's threshold; p < 0.05 is
    exactly the 95% interval wholly on that side (for `within`: two one-sided tests)."""
    t = claim.threshold
    if claim.comparator == "within":  # inside ±T needs both one-sided tests, outside needs one
        p_yes, p_no = max(est.p_greater(-t), est.p_less(t)), min(est.p_greater(t), est.p_less(-t))
    elif claim.comparator == ">":
        p_yes, p_no = est.p_greater(t), est.p_less(t)
    else:
        p_yes, p_no = est.p_less(t), est.p_greater(t)
    yes = REPRODUCED if claim.origin == PAPER else SUPPORTED  # a paper claim is reproduced, yours supported
    return (yes if p_yes <= p_no else CONTRADICTED), min(1.0, 2 * min(p_yes, p_no))


def adjusted_verdict(verdict: str, p: float, p_holm: float, diff: Difference, effect: Optional[float],
                     effect_text: str) -> tuple[str, str]:
    """(verdict, why) after Holm's adjustment, the degenerate and near-constant flags and the power check."""
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


def _judge(data: ReportData, claim: Claim, va: Variant, vb: Variant) -> Outcome:
    """The claim's comparison of va and vb, its raw p and unadjusted direction (Holm comes after)."""
    sa, sb, why = claim_sides(data, claim, va, vb)
    if why:
        return Outcome(claim, va, vb, None, NOT_RUN, why)
    if sa is None or sb is None:
        missing = va if sa is None else vb
        return Outcome(claim, va, vb, None, NOT_RUN, f"no {score_text(data, claim)} records for {missing.label}")
    diff, effect = difference(sa, sb), effect_of(data.paper, claim)
    if diff is None:
        return Outcome(claim, va, vb, None, NOT_RUN, "the two ran on different task versions or splits")
    if diff.unmeasured:  # two constant predictors: no difference to test, and no member of Holm's family
        return Outcome(claim, va, vb, diff, INCONCLUSIVE, f"{diff.unmeasured}: no difference measured", effect=effect)
    if not diff.has_interval:
        return Outcome(claim, va, vb, diff, INCONCLUSIVE, f"one run of {', '.join(diff.single_run_tasks)}: no interval",
                       effect=effect)
    direction, p = direction_and_p(claim, diff.estimate)
    return Outcome(claim, va, vb, diff, direction, p=p, effect=effect)


def judge(data: ReportData, claims: Sequence[Claim]) -> list[Outcome]:
    """Each claim once per pair of variants it names (an objective: once per size that has both sides), its raw
    p and direction before Holm. A claim of yours naming an unknown variant or task raises `BertbenchError`."""
    out: list[Outcome] = []
    for claim in claims:
        _check_tasks(data, claim)
        sides_a, sides_b = _variants(data, claim, claim.a), _variants(data, claim, claim.b)
        pairs = [(va, vb) for va, ea in sides_a for vb, eb in sides_b
                 if va is not vb and ((ea and eb) or va.size == vb.size)]
        if not pairs:
            out.append(Outcome(claim, None, None, None, NOT_RUN, f"no size has both {claim.a} and {claim.b}"))
        out += [_judge(data, claim, va, vb) for va, vb in pairs]
    return out


def evaluate(data: ReportData, paper: Optional[Claims] = None, stated: Sequence[Claim] = (),
             registered: Optional[Sequence[Claim]] = None) -> list[Outcome]:
    """Every claim (the paper's, then those stated), each once under its earliest statement, judged and Holm-
    adjusted within its family: with a pre-registration (`registered`: its claims, the paper's by id and
    yours), the registered comparisons together and every other apart (exploratory); without, the paper's and
    yours apart. A registered comparison without a p stays in its family with p = 1."""
    paper = paper or load_claims(paper=data.paper)
    claims = statements(paper.claims, stated, data.paper)
    out = judge(data, claims)
    if registered is None:
        families = [dataclasses.replace(o, family=PAPERS if o.claim.origin == PAPER else YOURS) for o in out]
    else:
        keys = {c.key(data.paper) for c in registered}
        families = [dataclasses.replace(o, family=PRE_REGISTERED if o.claim.key(data.paper) in keys else EXPLORATORY)
                    for o in out]
    for family in dict.fromkeys(o.family for o in families):
        at = [i for i, o in enumerate(families) if o.family == family
              and (o.p is not None or family == PRE_REGISTERED)]
        for i, p_holm in zip(at, holm([1.0 if families[i].p is None else families[i].p for i in at])):
            families[i] = families[i].with_holm(p_holm)
    return families


def evaluate_study(data: ReportData, stated: Sequence[Claim] = (), preregistration=None,
                   paper: Optional[Claims] = None) -> list[Outcome]:
    """`evaluate` as the report runs it: the paper's claims, a `preregistration`'s (bertbench.registration:
    its paper claim ids and its own lines, one family) and those `stated` for the records (claims.yaml, --claim)."""
    paper = paper or load_claims(paper=data.paper)
    if preregistration is None:
        return evaluate(data, paper, stated)
    registered = [c for c in paper.claims if c.id in preregistration.paper_claims] + list(preregistration.user_claims)
    if preregistration.after_results:  # a family changed after results is no pre-registered family: all exploratory
        registered = []
    return evaluate(data, paper, [*preregistration.user_claims, *stated], registered)


def contributions(o: Outcome) -> tuple[tuple[str, float, float], ...]:
    """A multi-task comparison's (task, its share of a − b in points, that share as a fraction of a − b): the
    mean over tasks is each task's a − b over the number of tasks; () for one task or no comparison."""
    if not o.compared or len(o.diff.a.components) < 2:
        return ()
    k, total = len(o.diff.a.components), o.diff.estimate.estimate
    parts = [(ca.task, (ca.point() - cb.point()) / k) for ca, cb in zip(o.diff.a.components, o.diff.b.components)]
    return tuple((task, part, part / total if total else float("nan")) for task, part in parts)


__all__ = ["CONTRADICTED", "EXPLORATORY", "INCONCLUSIVE", "NOT_MEASURABLE", "NOT_RUN", "Outcome", "PAPERS",
           "PRE_REGISTERED", "REPRODUCED", "SUPPORTED", "YOURS", "adjusted_verdict", "claim_sides", "contributions",
           "direction_and_p", "effect_of", "evaluate", "evaluate_study", "judge", "paper_values", "score_text"]
