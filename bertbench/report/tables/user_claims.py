"""Claims of the user's own, judged on the records as the paper's are (`report.tables.claims`).

A claim is one line (`bertbench report RESULTS --claim "..."`, or an entry of `claims.yaml` beside the records):

    A − B on TASK > T          a − b is above T      e.g.  mlm+nsp − mlm on stsb > 0
    A − B on TASK < T          a − b is below T      e.g.  clm − mlm on rte < -1
    A − B on TASK within T     |a − b| is below T    e.g.  mlm+nsp − mlm on sst2 within 1

- A and B name variants: an objective (mlm+nsp, mlm, clm or ltr, random; or the report's words, "MLM (no NSP)",
  "MLM+NSP 40%"), judged once per model size that has both; a size and an objective ("tiny mlm+nsp"); or a column
  label exactly as the report prints it ("HF hfbert, L2-H128" for a model we did not pre-train). The minus is '-',
  '−' or '–' with a space each side (a label such as L2-H128 has none).
- TASK is a task of the records (its primary metric), TASK:METRIC for another of its metrics, and several tasks
  joined by commas are their mean (each with all of its seeds), as the paper's GLUE-5 claims are.
- T is a number on the 0-100 scale of the records' metrics (84.6, not 0.846).

Each claim's a − b is the multi-bootstrap's (`report.tables.paired.difference`: pre-training seeds, fine-tuning
seeds and dev examples resampled jointly), p its two-sided t-test against T, and Holm–Bonferroni adjusts over the
family of the user's comparisons (apart from the paper's, which have theirs). Verdicts: supported (contradicted)
when the adjusted p < 0.05 with the estimate on the claim's (the other) side; inconclusive otherwise, and always
when a side has a degenerate or near-constant seed; not measurable at this budget when inconclusive and the
minimum detectable effect exceeds |T| (T ≠ 0; for `within`, T). A name that is no variant of the records, or a
task they do not hold, is an error; a pair of variants with no common row is "not run".
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from bertbench.config import OBJECTIVES
from bertbench.errors import BertbenchError
from bertbench.report.model import (
    DEFAULT_APPROACH,
    MISSING,
    ReportData,
    RowKey,
    Table,
    Variant,
    component_for,
    is_degenerate,
    is_near_constant,
)
from bertbench.report.tables.claims import (
    ALPHA,
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_MEASURABLE,
    NOT_RUN,
    Compared,
    adjust_family,
    adjusted_verdict,
)
from bertbench.report.tables.paired import (
    COVERS_NOTE,
    DEV_KINDS,
    Difference,
    Side,
    all_degenerate,
    difference,
    fmt_covers,
    fmt_difference,
    fmt_runs,
)
from bertbench.report.labels import objective_label

SUPPORTED = "supported"
COMPARATORS = (">", "<", "within")
CLAIMS_FILE = "claims.yaml"  # read from each RESULTS_DIR given to `bertbench report`
FORM = "'A − B on TASK > T' (or < T, or within T), e.g. \"mlm+nsp − mlm on stsb > 0\"; see docs/claims.md"
# the words a claim may use for an objective, beside the report's own ("MLM+NSP", "MLM (no NSP)" ...)
OBJECTIVE_WORDS = {**{o: objective_label({"objective": o}) for o in OBJECTIVES},
                   "ltr": objective_label({"objective": "clm"}), "random": objective_label(None)}
_MINUS = re.compile(r"\s[-−–]\s")
_TEST = re.compile(r"^(?P<tasks>\S+?)\s*(?P<cmp>>|<|\s+within\s+)\s*(?P<t>\S+)$")


@dataclass(frozen=True)
class UserClaim:
    text: str  # as the user wrote it
    where: str  # "--claim", or "results/claims.yaml:4"
    a: str
    b: str
    scores: tuple[tuple[str, Optional[str]], ...]  # (task, metric; None: the task's primary metric)
    comparator: str  # one of COMPARATORS
    threshold: float
    name: Optional[str] = None  # a claims.yaml entry's own words for it

    @property
    def test_text(self) -> str:
        if self.comparator == "within":
            return f"|a − b| < {self.threshold:g}"
        return f"a − b {self.comparator} {self.threshold:g}"

    @property
    def effect(self) -> Optional[float]:
        """The effect the claim is about, for the power check: |T|; None for a claim against 0 (any effect)."""
        return abs(self.threshold) or None


def parse_claim(text: str, where: str = "--claim", name: Optional[str] = None) -> UserClaim:
    """One claim line → UserClaim; a malformed one is one `BertbenchError` naming `where` and what was expected."""
    def bad(what: str) -> BertbenchError:
        return BertbenchError(f"{where}: claim {text!r}: {what}; expected {FORM}")

    if not isinstance(text, str) or not text.strip():
        raise bad("empty")
    left, on, right = text.strip().rpartition(" on ")
    if not on:
        raise bad("no ' on TASK'")
    sides = _MINUS.split(left.strip())
    if len(sides) != 2 or not all(s.strip() for s in sides):
        raise bad("expected two variants 'A − B' (a minus with a space each side)")
    test = _TEST.match(right.strip())
    if test is None:
        raise bad("expected 'TASK > T', 'TASK < T' or 'TASK within T' after ' on '")
    try:
        threshold = float(test["t"].replace("−", "-"))
    except ValueError:
        raise bad(f"threshold {test['t']!r} is not a number") from None
    comparator = test["cmp"].strip()
    if comparator == "within" and not threshold > 0:
        raise bad("'within T' needs a positive T")
    scores = []
    for item in test["tasks"].split(","):
        task, _, metric = item.partition(":")
        if not task:
            raise bad(f"empty task in {test['tasks']!r}")
        scores.append((task, metric or None))
    return UserClaim(text.strip(), where, sides[0].strip(), sides[1].strip(), tuple(scores), comparator, threshold,
                     name)


def load_claims_file(path: Path) -> list[UserClaim]:
    """`claims.yaml`: {claims: [a claim line, or {claim: line, name: words}, ...]}; errors name the file and line."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError) as err:
        raise BertbenchError(f"{path}: cannot read the claims ({err})") from None
    except yaml.YAMLError as err:
        raise BertbenchError(f"{path}: not valid YAML: {err}") from None
    entries = None
    if isinstance(root, yaml.MappingNode):
        entries = next((v for k, v in root.value if k.value == "claims"), None)
        if {k.value for k, _ in root.value} != {"claims"}:
            entries = None
    if not isinstance(entries, yaml.SequenceNode) or not entries.value:
        raise BertbenchError(f"{path}: expected 'claims:' and a list of claims, each {FORM}")
    out = []
    for node in entries.value:
        where = f"{path}:{node.start_mark.line + 1}"
        value = yaml.safe_load(yaml.serialize(node))
        if isinstance(value, dict) and set(value) <= {"claim", "name"} and "claim" in value:
            out.append(parse_claim(value["claim"], where, str(value["name"]) if value.get("name") else None))
        elif isinstance(value, str):
            out.append(parse_claim(value, where))
        else:
            raise BertbenchError(f"{where}: expected a claim line or {{claim: ..., name: ...}}, got {value!r}")
    return out


def claims_beside(results: Iterable[Path]) -> list[UserClaim]:
    """The claims of a `claims.yaml` in each results folder given (not searched below it)."""
    return [c for folder in results if (Path(folder) / CLAIMS_FILE).is_file()
            for c in load_claims_file(Path(folder) / CLAIMS_FILE)]


# --- resolving names on the records --------------------------------------------------------------------------


def _named(name: str, v: Variant) -> Optional[bool]:
    """Whether `name` names variant `v`: True when exactly (its label, or size and objective), False when by its
    objective (any size), None when not."""
    n = " ".join(name.lower().split())
    if n == v.label.lower():
        return True
    words = {v.objective.lower()} | {w for w, label in OBJECTIVE_WORDS.items() if label == v.objective}
    if n in words:
        return False
    size, _, rest = n.partition(" ")
    return True if size == v.size.lower() and rest in words else None


def _variants(data: ReportData, claim: UserClaim, name: str) -> list[tuple[Variant, bool]]:
    found = [(v, exact) for v in data.variants if (exact := _named(name, v)) is not None]
    if not found:
        known = "; ".join(v.label for v in data.variants)
        raise BertbenchError(f"{claim.where}: claim {claim.text!r}: no variant {name!r} in these records (their "
                             f"variants: {known}; or an objective: {', '.join(OBJECTIVE_WORDS)})")
    return found


def _check_tasks(data: ReportData, claim: UserClaim) -> None:
    tasks = {r.task for r in data.rows}
    for task, metric in claim.scores:
        if task not in tasks:
            raise BertbenchError(f"{claim.where}: claim {claim.text!r}: no records of task {task!r} (tasks in these "
                                 f"records: {', '.join(sorted(tasks))})")
        if metric is not None:
            have = {m for r in data.rows if r.task == task for v in data.variants if data.cell(v, r)
                    for rec in data.cell(v, r).records for m in rec["metrics"]}
            if metric not in have:
                raise BertbenchError(f"{claim.where}: claim {claim.text!r}: task {task!r} has no metric {metric!r} "
                                     f"(its records have {', '.join(sorted(have))})")


def _row(data: ReportData, variant: Variant, task: str) -> Optional[RowKey]:
    """The variant's row of `task` a claim is judged on: fine-tuned, on dev (or a dev split we cut), newest version."""
    rows = [r for r in data.rows if r.task == task and r.approach == DEFAULT_APPROACH and r.eval_kind in DEV_KINDS
            and data.cell(variant, r) is not None]
    return min(rows, key=lambda r: (DEV_KINDS.index(r.eval_kind), -r.task_version), default=None)


def user_side(data: ReportData, variant: Variant, scores: Sequence[tuple[str, Optional[str]]]) -> Optional[Side]:
    """`variant`'s runs on each (task, metric) of a claim, every seed of each; None where one is missing."""
    rows, comps, degenerate, near, constant = [], [], False, False, True
    for task, metric in scores:
        row = _row(data, variant, task)
        comp = None if row is None else component_for(data.cell(variant, row).records, metric or row.metric, task)
        if comp is None:
            return None
        records = data.cell(variant, row).records
        rows.append(row)
        comps.append(comp)
        degenerate, near = degenerate or is_degenerate(records), near or is_near_constant(records)
        constant = constant and all_degenerate(records)
    return Side(variant, tuple(rows), tuple(comps), degenerate, near, constant)


# --- verdicts -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UserOutcome(Compared):
    claim: UserClaim
    a: Optional[Variant]
    b: Optional[Variant]
    diff: Optional[Difference]
    verdict: str
    why: str = ""
    p: Optional[float] = None
    p_holm: Optional[float] = None
    registration: str = ""  # with a pre-registration: 'pre-registered' or 'exploratory' (tables.preregistration)

    def with_holm(self, p_holm: float) -> "UserOutcome":
        """Holm's verdict, the degenerate and near-constant flags, then the power check: the paper claims' rules
        (`claims.adjusted_verdict`), against |T|."""
        effect = self.claim.effect
        effect_text = f"|T| {effect:g}" if effect else ""
        found, why = adjusted_verdict(self.verdict, self.p, p_holm, self.diff, effect, effect_text)
        return dataclasses.replace(self, verdict=found, why=why, p_holm=p_holm)


def direction_and_p(claim: UserClaim, est) -> tuple[str, float]:
    """(the side the estimate points to, two-sided p) of the t-test against the claim's threshold; p < 0.05 is
    exactly the 95% interval wholly on that side (for `within`: two one-sided tests, as the paper's ≈)."""
    t = claim.threshold
    if claim.comparator == "within":
        p_yes, p_no = max(est.p_greater(-t), est.p_less(t)), min(est.p_greater(t), est.p_less(-t))
    elif claim.comparator == ">":
        p_yes, p_no = est.p_greater(t), est.p_less(t)
    else:
        p_yes, p_no = est.p_less(t), est.p_greater(t)
    return (SUPPORTED if p_yes <= p_no else CONTRADICTED), min(1.0, 2 * min(p_yes, p_no))


def _judge(data: ReportData, claim: UserClaim, va: Variant, vb: Variant) -> UserOutcome:
    sa, sb = user_side(data, va, claim.scores), user_side(data, vb, claim.scores)
    if sa is None or sb is None:
        missing = va if sa is None else vb
        return UserOutcome(claim, va, vb, None, NOT_RUN, f"no dev records of {missing.label} for every task")
    diff = difference(sa, sb)
    if diff is None:
        return UserOutcome(claim, va, vb, None, NOT_RUN, "the two ran on different task versions or splits")
    if diff.unmeasured:
        return UserOutcome(claim, va, vb, diff, INCONCLUSIVE, f"{diff.unmeasured}: no difference measured")
    if not diff.has_interval:
        return UserOutcome(claim, va, vb, diff, INCONCLUSIVE, f"one run of {', '.join(diff.single_run_tasks)}: "
                           "no interval")
    direction, p = direction_and_p(claim, diff.estimate)
    return UserOutcome(claim, va, vb, diff, direction, p=p)


def judge_user_claims(data: ReportData, claims: Sequence[UserClaim]) -> list[UserOutcome]:
    """Each claim once per pair of variants it names (an objective: once per size that has both sides), its raw
    p and direction before Holm (`claims.adjust_family`). Unknown variants or tasks raise `BertbenchError`."""
    out: list[UserOutcome] = []
    for claim in claims:
        _check_tasks(data, claim)
        sides_a, sides_b = _variants(data, claim, claim.a), _variants(data, claim, claim.b)
        pairs = [(va, vb) for va, ea in sides_a for vb, eb in sides_b
                 if va is not vb and ((ea and eb) or va.size == vb.size)]
        if not pairs:
            out.append(UserOutcome(claim, None, None, None, NOT_RUN, f"no model size has both {claim.a} and {claim.b}"))
        out += [_judge(data, claim, va, vb) for va, vb in pairs]
    return out


def evaluate_user_claims(data: ReportData, claims: Sequence[UserClaim]) -> list[UserOutcome]:
    """`judge_user_claims`, Holm-adjusted over the family of the comparisons made (a pre-registered study judges
    two families instead: tables.preregistration.evaluate_families)."""
    out = judge_user_claims(data, claims)
    adjust_family([out])
    return out


def _fmt_p(p: Optional[float]) -> str:
    if p is None:
        return MISSING
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def user_claims_table(data: ReportData, claims: Sequence[UserClaim], outcomes: Optional[list[UserOutcome]] = None,
                      family_note: str = "") -> Table:
    """The table of the user's claims: `outcomes` when given (a pre-registered study's, `family_note` saying how
    its families were adjusted), else `evaluate_user_claims`'."""
    outcomes = evaluate_user_claims(data, claims) if outcomes is None else outcomes
    header = ("Claim", "Stated in", "a − b", "Score", "Ours a − b", "95% interval", "Covers", "Runs a/b", "Test",
              "MDE (80%)", "p", "p Holm", "Verdict")
    rows = []
    for o in outcomes:
        value, interval = fmt_difference(o.diff)
        who = f"{o.a.label} − {o.b.label}" if o.a is not None else f"{o.claim.a} − {o.claim.b}"
        rows_used = o.diff.a.rows if o.diff is not None else [None] * len(o.claim.scores)
        score = ", ".join(f"{task} {metric or (row.metric if row else 'primary metric')}"
                          for (task, metric), row in zip(o.claim.scores, rows_used))
        rows.append((o.claim.name or o.claim.text, f"yours ({o.claim.where})", who,
                     f"mean of {score}" if len(o.claim.scores) > 1 else score, value, interval,
                     fmt_covers(o.diff.estimate) if o.diff else MISSING, fmt_runs(o.diff) if o.diff else MISSING,
                     o.claim.test_text, f"{o.mde:.1f}" if o.mde is not None else MISSING, _fmt_p(o.p),
                     _fmt_p(o.p_holm), o.verdict + (f" ({o.why})" if o.why else "")
                     + (f" · {o.registration}" if o.registration else "")))
    made = [o for o in outcomes if o.compared]
    counts = {v: sum(o.verdict == v for o in made) for v in (SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_MEASURABLE)}
    notes = (
        "Your claims (`report --claim`, or claims.yaml beside the records), judged as the paper's claims are: a − b "
        "by the multi-bootstrap on dev (or a dev split we cut), p from its t-test against the claim's threshold T, "
        "Holm–Bonferroni over the family of your comparisons (not the paper's), at family-wise level "
        f"{ALPHA:g}. {len(made)} comparisons made ({counts[SUPPORTED]} supported, {counts[CONTRADICTED]} "
        f"contradicted, {counts[INCONCLUSIVE]} inconclusive, {counts[NOT_MEASURABLE]} not measurable at this budget).",
        "Rules: supported (contradicted) when Holm's adjusted p < 0.05 with the estimate on the claim's (the other) "
        "side of T, else inconclusive; a side with a degenerate (⊘) or near-constant (≈) seed is inconclusive "
        "whatever its numbers; not measurable at this budget: inconclusive, and the minimum detectable effect (80% "
        "power) exceeds |T| (a claim against 0 names no effect, so its MDE is shown but not judged).",
        COVERS_NOTE,
    ) + ((family_note,) if family_note else ())
    return Table("user_claims", "Your claims, judged on these records", header, tuple(rows), notes)


def claim_lines(table: Table) -> list[str]:
    """The user claims table as one line per comparison, for the terminal (the markdown has the table)."""
    col = {name: i for i, name in enumerate(table.header)}
    lines = []
    for row in table.rows:
        cell = {name: row[i] for name, i in col.items()}
        if cell["Ours a − b"] == MISSING and cell["95% interval"] == MISSING:  # not run: nothing was measured
            lines.append(f"{cell['Claim']}: {cell['a − b']} on {cell['Score']}: {cell['Verdict']}")
            continue
        measured = f"{cell['Ours a − b']} {cell['95% interval']} ({cell['Covers']}, runs {cell['Runs a/b']})"
        lines.append(f"{cell['Claim']}: {cell['a − b']} on {cell['Score']} = {measured}; {cell['Test']}: "
                     f"p {cell['p']}, p Holm {cell['p Holm']}, MDE {cell['MDE (80%)']}: {cell['Verdict']}")
    return lines


__all__ = ["CLAIMS_FILE", "COMPARATORS", "SUPPORTED", "UserClaim", "UserOutcome", "claim_lines", "claims_beside",
           "direction_and_p", "evaluate_user_claims", "judge_user_claims", "load_claims_file", "parse_claim", "user_claims_table",
           "user_side"]
