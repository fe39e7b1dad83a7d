"""`bertbench plan`: how many pre-training × fine-tuning seeds a claim needs to be decided, and what they cost,
planned from a study's records; docs/plan.md says how (what it sizes on, what it refuses), with the formulas."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Optional, Sequence

from bertbench.errors import BertbenchError
from bertbench.report.model import ReportData, is_degenerate, is_near_constant, metric_for
from bertbench.report.multibootstrap import (
    VarianceComponents, average_components, design_df, difference_variance, mde_floor,
    minimum_detectable_effect, paired_average_example_variance, plan_designs, pretrain_upper_bound,
)
from bertbench.claims import ALPHA, CONFIDENCE, PAPER, Claim, Claims, load_claims, parse_claim
from bertbench.registration import CONFIRMATORY_PRETRAIN_SEEDS
from bertbench.report.claims import judge, paper_values
from bertbench.report.comparison import DEV_KINDS, Side
from bertbench.stages import StageThreads


def _model_label(run_folder: Optional[str]) -> Optional[str]:
    """A study's model label from its run folder ('pretrain/ltr-seed1-8eccd69119' -> 'ltr seed1'), as its stage
    names spell it (bertbench.studies.plan); None when the folder is not a study's."""
    if not run_folder:
        return None
    parts = PurePosixPath(run_folder).name.rsplit("-", 1)
    return parts[0].replace("-seed", " seed") if len(parts) == 2 else None


def _costs(data: ReportData, side: Side, threads: StageThreads) -> tuple[float, float, str, int]:
    """(CPU-seconds of one pre-training run, CPU-seconds of one fine-tuning seed with its whole lr grid on every task
    the claim averages, hardware, the pre-training's threads): wall time × the threads each stage ran on."""
    pre = side.variant.pretraining or {}
    label = _model_label(pre.get("run_dir"))
    alone = pre.get("objective") == "clm"  # bertbench.studies.plan.runs_alone: a causal LM takes the whole machine
    pre_threads = threads.of(f"pretrain {label}" if label else None, alone)
    finetune, hardware = 0.0, "unknown hardware"
    for row in side.rows:
        records = data.cell(side.variant, row).records
        walls = [r["wall_seconds"] for r in records if r.get("wall_seconds") is not None]
        if not walls:
            raise BertbenchError(f"plan: the {row.task} records of {side.variant.label} hold no wall_seconds")
        grid = max(len(((r["finetune"].get("selection") or {}).get("grid")) or [None]) for r in records)
        hardware = records[0].get("hardware") or hardware
        ft_label = _model_label(str(PurePosixPath(str((records[0].get("model") or {}).get("source", ""))).parent))
        ft_threads = threads.of(f"finetune {ft_label} {row.task}" if ft_label else None, False)
        finetune += math.fsum(walls) / len(walls) * grid * ft_threads
    return float(pre.get("wall_seconds") or 0.0) * pre_threads, finetune, hardware, pre_threads


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
                 examples: Optional[float], min_pretrain_seeds: int, design: Optional[tuple[int, int]] = None,
                 confidence: float = CONFIDENCE) -> str:
    cost_pretrain, cost_finetune = (costs[0][0], costs[1][0]), (costs[0][1], costs[1][1])
    if design is not None:
        p, f = design
        se = math.sqrt(difference_variance(a, b, p, f, pretrain_default, examples))
        mde = minimum_detectable_effect(se, design_df(a, b, p, f, pretrain_default, examples), confidence)
        cost = p * sum(cost_pretrain) + p * f * sum(cost_finetune)
        return (f"- {label}: {p} pre-training × {f} fine-tuning seeds a side: MDE {mde:.2f} "
                f"({'detects' if mde <= effect else 'does not detect'} {effect:.1f}), {cost / 60:.0f} CPU-minutes "
                "from scratch.")
    designs = plan_designs(a, b, effect, cost_pretrain=cost_pretrain, cost_finetune=cost_finetune, max_seeds=max_seeds,
                           pretrain_default=pretrain_default, examples=examples, min_pretrain_seeds=min_pretrain_seeds,
                           confidence=confidence)
    if not designs:
        return f"- {label}: no design up to {max_seeds} × {max_seeds} seeds a side detects {effect:.1f}."
    d = designs[0]
    return (f"- {label}: {d.pretrain_seeds} pre-training × {d.finetune_seeds} fine-tuning seeds a side "
            f"(MDE {d.mde:.2f}), {d.cost_seconds / 60:.0f} CPU-minutes from scratch.")


UPPER_LEVEL = 0.80  # the one-sided level of the pessimistic pre-training variance a design is sized on


def plan_claim(data: ReportData, claim_id: str, effect: Optional[float] = None, max_seeds: int = 10,
               claims: Optional[Claims] = None, threads: Optional[StageThreads] = None, beside: Sequence = (),
               design: Optional[tuple[int, int]] = None, family: int = 1,
               pretrain_sd: Optional[float] = None) -> list[str]:
    """The plan's lines for one claim (an id, a claim line, or a claim of `beside`: a claims.yaml beside the records),
    once per pair of variants it names, each judged alone (the others' comparisons, and Holm over them, change
    nothing of its sides). `design`, `family` and `pretrain_sd` are `--design`, `--family` and `--pretrain-sd`
    (docs/plan.md)."""
    claims = claims or load_claims(paper=data.paper)
    if effect is not None and effect <= 0:
        raise BertbenchError(f"plan: --effect must be a positive number of points, not {effect:g}")
    if family < 1:
        raise BertbenchError(f"plan: --family {family}: the number of claims in the Holm family, at least 1")
    if max_seeds < CONFIRMATORY_PRETRAIN_SEEDS:
        raise BertbenchError(f"plan: --max-seeds {max_seeds}: a confirmatory design needs at least "
                             f"{CONFIRMATORY_PRETRAIN_SEEDS} pre-training seeds a side that pre-trains")
    claim = (next((c for c in claims.claims if c.id == claim_id), None)
             or next((c for c in beside if claim_id in (c.name, c.text)), None))
    if claim is None and " on " in claim_id:
        claim = parse_claim(claim_id, "--claim")
    if claim is None:
        known = ", ".join([c.id for c in claims.claims] + [c.name or c.text for c in beside])
        raise BertbenchError(f"plan: no claim {claim_id!r} in claims.yaml (known: {known}), and no claim line "
                             "('A − B on TASK > T')")
    if claim.checkpoint != "last":
        raise BertbenchError(f"plan: claim {claim.id} compares checkpoints (Figure 5); plan a claim on final models")
    if claim.origin != PAPER and effect is None:  # a − b against T names no expected effect: the user says how far
        raise BertbenchError(f"plan: claim {claim.text!r} names no expected effect; give the margin by which you "
                             f"expect a − b to clear {claim.threshold:g} (--effect)")
    lines: list[str] = []
    for outcome in judge(data, [claim]):
        if outcome.diff is None:
            lines.append(f"{claim.id or claim.text}: {outcome.verdict} ({outcome.why}); nothing to plan from.")
            continue
        _refuse_flagged(data, claim.id or claim.text, outcome.diff)
        lines += _plan_lines(data, claim, outcome.diff, _distance(data, claim, effect), max_seeds,
                             threads or StageThreads(), design, family, pretrain_sd)
    return lines


def _distance(data: ReportData, claim: Claim, effect: Optional[float]) -> tuple[float, str]:
    """The distance from the claim's bound to detect: given, or (a paper claim) from the paper's own |a − b|:
    a − b > B is planned on (the paper's a − b) − B, |a − b| < m on m − |the paper's a − b|. Never the estimate the
    plan is about to test: sizing a study on what its own data showed is post hoc."""
    if effect is not None:
        return effect, "given: the margin from the claim's bound"
    bound, values = claim.threshold, paper_values(data.paper, claim)
    paper_diff = None if values is None else abs(values[0] - values[1])
    if paper_diff is None and claim.comparator == ">" and bound > 0:  # a ≫ claim: its bound is an effect
        return bound, (f"the ≫ bound, {bound:g}, as the margin above it (the paper gives no a − b): the least "
                       "effect the claim calls far greater; give the margin you expect with --effect")
    if paper_diff is None:
        raise BertbenchError(f"plan: claim {claim.id} has no paper number; give the margin from its bound to detect "
                             "(--effect)")
    if claim.comparator == "within":
        distance = bound - paper_diff
        if distance <= 0:
            raise BertbenchError(f"plan: claim {claim.id}: the paper's own |a − b| {paper_diff:g} is not inside "
                                 f"±{bound:g}; give the margin to detect (--effect)")
        return distance, f"{bound:g} − the paper's |a − b| {paper_diff:g}, {claim.source}"
    return paper_diff - bound, f"the paper's a − b {_signed(paper_diff)} − the bound {_signed(bound)}, {claim.source}"


def _signed(x: float) -> str:
    return f"{x:+g}".replace("-", "−")


def _refuse_flagged(data: ReportData, name: str, diff) -> None:
    """A side with a degenerate or near-constant seed measures the majority class's variance (0 when every seed
    predicts one class), not the model's: an MDE from it would promise what no number of seeds delivers."""
    for s in (diff.a, diff.b):
        if not (s.degenerate or s.near_constant):
            continue
        tasks = [row.task for row in s.rows
                 if is_degenerate(data.cell(s.variant, row).records) or is_near_constant(data.cell(s.variant, row).records)]
        kind = "degenerate (one class for every example)" if s.degenerate else "near-constant (one label for ≥ 95%)"
        from bertbench.report.past_degenerate import past_degenerate_hint

        raise BertbenchError(
            f"plan: {name}: {s.variant.label} has a {kind} seed on {', '.join(tasks)}; its variance is the "
            "constant prediction's, not the model's, so no MDE can be planned from it (fix the fine-tuning first: "
            "lr, epochs, selection)." + past_degenerate_hint(tasks, s.variant.size))


def _pre_cost(side: Side, seconds: float, threads: int) -> str:
    if side.variant.random_init:
        return "none (random init)"
    return f"{seconds / 60:.1f} ({threads} thread{'s' if threads > 1 else ''})"


def _metrics_of(data: ReportData, side: Side, claim) -> list[str]:
    """The record metric each of the claim's scores is computed on (what the variance components measure)."""
    return [metric_for(data, side.variant, ptask, pmetric, claim.approach, DEV_KINDS)[0] or row.metric
            for (ptask, pmetric), row in zip(claim.scores, side.rows)]


def pessimistic(vc: VarianceComponents) -> VarianceComponents:
    """The side's components with the pre-training share at its one-sided UPPER_LEVEL upper bound (χ² on the records'
    degrees of freedom): a design sized on the point estimate of two or three seeds' spread is sized on luck (the
    claims study planned on 3.1 and measured 13.6)."""
    upper = pretrain_upper_bound(vc, UPPER_LEVEL)
    return vc if upper is None else replace(vc, pretrain=upper)


def _plan_lines(data, claim: Claim, diff, distance: tuple[float, str], max_seeds: int, threads: StageThreads,
                design: Optional[tuple[int, int]], family: int = 1, pretrain_sd: Optional[float] = None) -> list[str]:
    sa, sb = diff.a, diff.b
    alpha = ALPHA / family
    pretrains = not (sa.variant.random_init and sb.variant.random_init)
    if design is not None and pretrains and design[0] < CONFIRMATORY_PRETRAIN_SEEDS:
        raise BertbenchError(f"plan: --design {design[0]}x{design[1]}: a confirmatory design needs at least "
                             f"{CONFIRMATORY_PRETRAIN_SEEDS} pre-training seeds a side that pre-trains (with "
                             f"{design[0]}, the pre-training variance has {design[0] - 1} degree(s) of freedom)")
    target, source = distance
    vca, vcb = side_components(sa), side_components(sb)
    upa, upb = pessimistic(vca), pessimistic(vcb)
    examples = paired_average_example_variance(sa.components, sb.components)  # the difference's, same dev examples
    (pre_a, ft_a, hardware, thr_a), (pre_b, ft_b, _, thr_b) = _costs(data, sa, threads), _costs(data, sb, threads)
    costs = ((pre_a, ft_a), (pre_b, ft_b))
    est = diff.estimate
    on = " + ".join(f"{row.task} ({metric})" for row, metric in zip(sa.rows, _metrics_of(data, sa, claim)))
    averaged = len(sa.rows) > 1
    runs = [round(sum(len(c.runs) for c in s.components) / len(s.components)) for s in (sa, sb)]
    min_p = CONFIRMATORY_PRETRAIN_SEEDS if pretrains else 1
    lines = [
        f"Plan for {f'{claim.id} ({claim.name})' if claim.origin == PAPER else claim.name or claim.text}: "
        f"{sa.variant.label} − {sb.variant.label} on "
        + (f"the mean of {on}." if averaged else f"{on}."),
        f"Claim: {claim.test_text}. Distance to detect from its bound: {target:.1f} ({source}); 80% power at "
        + (f"α = {ALPHA:g}/{family} = {alpha:.3g} two-sided (Holm over a family of {family}: its first step's level)."
           if family > 1 else f"α = {ALPHA:g} two-sided."),
        f"Measured variance (points²{', of the mean over tasks' if averaged else ''}): "
        f"a: {_fmt_vc(vca, sa)}; b: {_fmt_vc(vcb, sb)}.",
        "Dev examples' variance of a − b, paired (the same examples): "
        + ("not stored (seeds only)." if examples is None else f"{examples:.2f}."),
        f"Today: {est.pretrain_seeds[0]}×{runs[0] // est.pretrain_seeds[0]} / "
        f"{est.pretrain_seeds[1]}×{runs[1] // est.pretrain_seeds[1]} seeds"
        f"{' a task' if averaged else ''}, a − b = {est.estimate:+.1f}, the report's MDE {est.mde():.1f} "
        "(multi-bootstrap, t quantiles).",
        f"Cost of one run on {hardware}, in CPU-minutes (wall time × threads): pre-training a "
        f"{_pre_cost(sa, pre_a, thr_a)}, b {_pre_cost(sb, pre_b, thr_b)}; one fine-tuning seed (its whole lr grid"
        f"{', every task' if averaged else ''}) a {ft_a / 60:.1f}, b {ft_b / 60:.1f}.",
    ]
    if pretrains:
        lines.append(f"A confirmatory design has at least {CONFIRMATORY_PRETRAIN_SEEDS} pre-training seeds a side: "
                     "with one, a verdict is about those checkpoints, not the procedure that made them; with two, "
                     "their variance has one degree of freedom.")
    kw = dict(max_seeds=max_seeds, examples=examples, min_pretrain_seeds=min_p, confidence=1 - alpha)
    if vca.pretrain is None or vcb.pretrain is None:
        same = (vca.finetune + vcb.finetune) / 2
        designs = [("assuming no pre-training variance (a lower bound)", vca, vcb, 0.0),
                   (f"assuming pre-training variance = the fine-tuning seeds' ({same:.2f})", vca, vcb, same)]
        if pretrain_sd is not None:
            designs.append((f"assuming a pre-training SD of {pretrain_sd:g} points (variance {pretrain_sd ** 2:.2f}; "
                            "stated, not measured)", vca, vcb, pretrain_sd ** 2))
    else:
        bounds = "; ".join(f"{name} {_fmt_upper(vc, up, s)}" for name, vc, up, s in
                           (("a", vca, upa, sa), ("b", vcb, upb, sb)))
        lines.append(f"Pessimistic pre-training variance ({UPPER_LEVEL:.0%} one-sided upper bound, χ² on the "
                     f"records' degrees of freedom): {bounds}.")
        designs = [("sized on the upper bound (the design to run)", upa, upb, 0.0),
                   ("on the point estimate (optimistic, for comparison)", vca, vcb, 0.0)]
    lines += [_design_line(label, a, b, target, costs, pretrain_default=default, design=design, **kw)
              for label, a, b, default in designs]
    floor = mde_floor(vca, vcb, examples=examples)
    lines.append(f"Floor: with unlimited seeds the dev examples alone leave an MDE of {floor:.2f} (this dev split's size)."
                 if examples is not None else
                 "Floor: unknown (the records keep no per-example predictions for this metric).")
    return lines


def _fmt_upper(vc: VarianceComponents, up: VarianceComponents, side: Side) -> str:
    if side.variant.random_init:
        return "none (random init)"
    return f"{up.pretrain:.2f} (estimate {vc.pretrain:.2f}, {vc.means_df} df)"


__all__ = ["UPPER_LEVEL", "pessimistic", "plan_claim"]
