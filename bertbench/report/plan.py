"""`bertbench plan`: how many pre-training × fine-tuning seeds a claim needs to detect an effect, and what they cost.

From the committed records of a study: the variance components of each side (between fine-tuning seeds,
between pre-training seeds where several ran, and the dev examples' sampling variance), the cost of one
run on the machine the records ran on (each record's `wall_seconds` times the learning rates its grid
compared; the pre-training run's `wall_seconds`), and the effect to detect (the paper's |a − b| by
default). The MDE of a design of P pre-training × F fine-tuning seeds a side is
(t(0.975) + t(0.8))·√Var, Var = Σ_sides σ²_pre/P + σ²_ft/(P·F) + σ²_examples, at the degrees of freedom the
report's multi-bootstrap would have (Welch–Satterthwaite over the seed units: P − 1 for P pre-training seeds).
One pre-training seed a variant measures no pre-training variance: the plan shows the design under two
assumptions, none (a lower bound) and as large as the fine-tuning seeds' (MultiBERTs found them of the same
order). Random init has none by construction (nothing is pre-trained; each fine-tuning seed draws its own
initialisation), so no assumption is added to its side. A claim on the mean of several tasks (GLUE-5) is
planned on that mean: `multibootstrap.average_components` says how its components combine, and one seed a
side runs every task.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Optional

from bertbench.errors import BertbenchError
from bertbench.report.model import ReportData
from bertbench.report.multibootstrap import (
    VarianceComponents,
    average_components,
    mde_floor,
    paired_average_example_variance,
    plan_designs,
)
from bertbench.report.tables.claims import Claims, claim_sides, evaluate, load_claims
from bertbench.report.tables.paired import Side


def _costs(data: ReportData, side: Side) -> tuple[float, float, str]:
    """(seconds of one pre-training run, seconds of one fine-tuning seed with its whole lr grid, on every task
    the claim averages, hardware)."""
    pre = side.variant.pretraining or {}
    finetune, hardware = 0.0, "unknown hardware"
    for row in side.rows:
        records = data.cell(side.variant, row).records
        walls = [r["wall_seconds"] for r in records if r.get("wall_seconds") is not None]
        if not walls:
            raise BertbenchError(f"plan: the {row.task} records of {side.variant.label} hold no wall_seconds")
        grid = max(len(((r["finetune"].get("selection") or {}).get("grid")) or [None]) for r in records)
        hardware = records[0].get("hardware") or hardware
        finetune += math.fsum(walls) / len(walls) * grid
    return float(pre.get("wall_seconds") or 0.0), finetune, hardware


def side_components(side: Side) -> VarianceComponents:
    """The side's components on its claim's score (averaged over tasks); random init's pre-training share is
    0, not unmeasured: it pre-trains nothing, and its fine-tuning seeds already vary the initialisation."""
    vc = average_components(side.components)
    return replace(vc, pretrain=0.0) if side.variant.random_init else vc


def _fmt_vc(vc: VarianceComponents, side: Side) -> str:
    pre = ("none (random init)" if side.variant.random_init else
           "not measured (one pre-training seed)" if vc.pretrain is None else f"{vc.pretrain:.2f}")
    ex = "not stored (seeds only)" if vc.examples is None else f"{vc.examples:.2f}"
    return f"fine-tuning seeds {vc.finetune:.2f}, pre-training seeds {pre}, dev examples {ex}"


def _design_line(label: str, a: VarianceComponents, b: VarianceComponents, effect: float,
                 costs: tuple[tuple[float, float], tuple[float, float]], max_seeds: int, pretrain_default: float,
                 examples: Optional[float]) -> str:
    designs = plan_designs(a, b, effect, cost_pretrain=(costs[0][0], costs[1][0]),
                           cost_finetune=(costs[0][1], costs[1][1]), max_seeds=max_seeds,
                           pretrain_default=pretrain_default, examples=examples)
    if not designs:
        return f"- {label}: no design up to {max_seeds} × {max_seeds} seeds a side detects {effect:.1f}."
    d = designs[0]
    return (f"- {label}: {d.pretrain_seeds} pre-training × {d.finetune_seeds} fine-tuning seeds a side "
            f"(MDE {d.mde:.2f}), {d.cost_seconds / 60:.0f} CPU-minutes from scratch.")


def plan_claim(data: ReportData, claim_id: str, effect: Optional[float] = None, max_seeds: int = 10,
               claims: Optional[Claims] = None) -> list[str]:
    """The plan's lines for one claim of claims.yaml, once per model size that has both of its variants."""
    claims = claims or load_claims(paper=data.paper)
    claim = next((c for c in claims.claims if c.id == claim_id), None)
    if claim is None:
        known = ", ".join(c.id for c in claims.claims)
        raise BertbenchError(f"plan: no claim {claim_id!r} in claims.yaml (known: {known})")
    if claim.checkpoint != "last":
        raise BertbenchError(f"plan: claim {claim_id} compares checkpoints (Figure 5); plan a claim on final models")
    lines: list[str] = []
    for outcome in (o for o in evaluate(data, claims) if o.claim.id == claim_id):
        if outcome.diff is None:
            lines.append(f"{claim_id}: {outcome.verdict} ({outcome.why}); nothing to plan from.")
            continue
        lines += _plan_lines(data, claims, outcome, effect, max_seeds)
    return lines


def _plan_lines(data, claims, outcome, effect: Optional[float], max_seeds: int) -> list[str]:
    claim = outcome.claim
    sa, sb, _ = claim_sides(data, claim, outcome.size)
    target = effect if effect is not None else outcome.effect
    source = "given" if effect is not None else f"the paper's |a − b|, {claim.source}"
    if target is None and claim.test == "much_greater":
        # reproduced only when the interval's low end clears the bound: what must be detected is the margin above it
        bound, ours = claims.bound(claim.test), outcome.diff.estimate.estimate
        if ours <= bound:
            return [f"{claim.id}: ours a − b is {ours:+.1f}, not above the ≫ bound {bound:g}; no number of seeds "
                    "reproduces it at this effect (give one to plan for: --effect)."]
        target, source = ours - bound, f"ours a − b, {ours:+.1f}, less the ≫ bound {bound:g} its interval must clear"
    if target is None:
        raise BertbenchError(f"plan: claim {claim.id} has no paper number; give the effect to detect (--effect)")
    vca, vcb = side_components(sa), side_components(sb)
    examples = paired_average_example_variance(sa.components, sb.components)  # the difference's, same dev examples
    (pre_a, ft_a, hardware), (pre_b, ft_b, _) = _costs(data, sa), _costs(data, sb)
    costs = ((pre_a, ft_a), (pre_b, ft_b))
    est = outcome.diff.estimate
    on = " + ".join(f"{row.task} ({row.metric})" for row in sa.rows)
    averaged = len(sa.rows) > 1
    runs = [round(sum(len(c.runs) for c in s.components) / len(s.components)) for s in (sa, sb)]
    lines = [
        f"Plan for {claim.id} ({claim.claim}): {sa.variant.label} − {sb.variant.label} on "
        + (f"the mean of {on}." if averaged else f"{on}."),
        f"Effect to detect: {target:.1f} ({source}); 80% power at α = 0.05 two-sided.",
        f"Measured variance (points²{', of the mean over tasks' if averaged else ''}): "
        f"a: {_fmt_vc(vca, sa)}; b: {_fmt_vc(vcb, sb)}.",
        f"Today: {est.pretrain_seeds[0]}×{runs[0] // est.pretrain_seeds[0]} / "
        f"{est.pretrain_seeds[1]}×{runs[1] // est.pretrain_seeds[1]} seeds"
        f"{' a task' if averaged else ''}, a − b = {est.estimate:+.1f}, the report's MDE {est.mde():.1f} "
        "(multi-bootstrap, t quantiles).",
        f"Cost of one run on {hardware}: pre-training a {pre_a / 60:.1f} min, b {pre_b / 60:.1f} min; one fine-tuning "
        f"seed (its whole lr grid{', every task' if averaged else ''}) a {ft_a / 60:.1f} min, b {ft_b / 60:.1f} min.",
    ]
    unmeasured = vca.pretrain is None or vcb.pretrain is None
    if unmeasured:
        lines.append(_design_line("assuming no pre-training variance (a lower bound)", vca, vcb, target, costs,
                                  max_seeds, 0.0, examples))
        same = (vca.finetune + vcb.finetune) / 2
        lines.append(_design_line(f"assuming pre-training variance = the fine-tuning seeds' ({same:.2f})", vca, vcb,
                                  target, costs, max_seeds, same, examples))
    else:
        lines.append(_design_line("with the measured pre-training variance", vca, vcb, target, costs, max_seeds, 0.0,
                                  examples))
    ex_text = "not stored (seeds only)" if examples is None else f"{examples:.2f}"
    lines.insert(3, f"Dev examples' variance of a − b, paired (the same examples): {ex_text}.")
    floor = mde_floor(vca, vcb, examples=examples)
    lines.append(f"Floor: with unlimited seeds the dev examples alone leave an MDE of {floor:.2f} (this dev split's size)."
                 if examples is not None else
                 "Floor: unknown (the records keep no per-example predictions for this metric).")
    return lines


__all__ = ["plan_claim"]
