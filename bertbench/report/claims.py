"""One claim model: a claim, where it was stated, and its one judge (the report's claims table renders it).

A claim is one line of the grammar, `A − B on TASK > T` (or `< T`, `within T`), stated in the paper
(reference/claims.yaml: greater `> 0`, not_worse `> −m`, much_greater `> M`, equivalent `within m`), a study's
pre-registration, a claims.yaml beside the records or `--claim` (ORIGINS, earliest first). Its identity is its
normalised statement (`Claim.key`): stated twice, it is judged once under the earliest statement, so a later one
never joins or changes a family. The judge: the multi-bootstrap's a − b, p against T, Holm within the claim's
family (`evaluate`), then the flags and the power check (`adjusted_verdict`); a pre-registered claim without a
comparison stays in its family with p = 1. docs/claims.md is the reference.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from bertbench.config import OBJECTIVES
from bertbench.errors import BertbenchError
from bertbench.reference import PaperNumbers, load_paper_numbers
from bertbench.reference.claims import CLAIMS_PATH, check_claims
from bertbench.report.labels import objective_label
from bertbench.report.model import DEFAULT_APPROACH, ReportData, Variant
from bertbench.report.multibootstrap import CONFIDENCE, Estimate, holm
from bertbench.report.comparison import Difference, Side, difference, gain_side, side

CLAIMS_FILE = "claims.yaml"  # read from each RESULTS_DIR given to `bertbench report`
ALPHA = 1 - CONFIDENCE  # the family-wise level of Holm's adjustment: the 95% intervals' own
REPRODUCED, SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_RUN = (
    "reproduced", "supported", "contradicted", "inconclusive", "not run")
NOT_MEASURABLE = "not measurable at this budget"
# Where a claim was stated, earliest first: a claim stated twice is judged under the earlier statement.
PAPER, PREREGISTRATION, FILE, COMMAND_LINE = "the paper", "pre-registration", CLAIMS_FILE, "--claim"
ORIGINS = (PAPER, PREREGISTRATION, FILE, COMMAND_LINE)
# Holm families: with a pre-registration, the registered claims and the rest; without, the paper's and yours.
PRE_REGISTERED, EXPLORATORY, PAPERS, YOURS = "pre-registered", "exploratory", "the paper's", "yours"
FORM = "'A − B on TASK > T' (or < T, or within T), e.g. \"mlm+nsp − mlm on stsb > 0\"; see docs/claims.md"
# the words a claim may use for an objective, beside the report's own ("MLM+NSP", "MLM (no NSP)" ...)
OBJECTIVE_WORDS = {**{o: objective_label({"objective": o}) for o in OBJECTIVES},
                   "ltr": objective_label({"objective": "clm"}), "random": objective_label(None)}
_MINUS = re.compile(r"\s[-−–]\s")
_TEST = re.compile(r"^(?P<tasks>\S+?)\s*(?P<cmp>>|<|\s+within\s+)\s*(?P<t>\S+)$")
THRESHOLD_SOURCES = {
    "greater": "the paper's (a beats b)",
    "not_worse": "ours ('about a point': the paper calls Table 8's 0.1–0.8 spread robust)",
    "much_greater": "ours (the project's target; the paper gives no number)",
    "equivalent": "ours ('about a point', as not_worse)",
}


@dataclass(frozen=True)
class Claim:
    """A claim of the grammar, and where it was stated (`origin`, one of ORIGINS; `source` in words)."""

    a: str  # a variant name as stated ("mlm+nsp", "MLM+NSP", "tiny mlm", a column label)
    b: str
    scores: tuple[tuple[str, Optional[str]], ...]  # (task, metric or None for its primary); several: their mean
    comparator: str  # ">", "<" or "within"
    threshold: float
    origin: str = COMMAND_LINE
    source: str = "--claim"  # where, for the reader: "BERT paper Table 5", "yours (results/claims.yaml:3)"
    where: str = "--claim"  # where, for an error: "--claim", "results/claims.yaml:3", "preset.yaml: claims[2]"
    name: Optional[str] = None  # words shown instead of the statement (a paper claim's sentence)
    id: Optional[str] = None  # a paper claim's id in reference/claims.yaml
    approach: str = DEFAULT_APPROACH
    checkpoint: str = "last"  # Figure 5's claims: "first" or "gain" (a paper claim only)
    paper: Optional[tuple[str, str]] = None  # the paper's systems for a and b, in `source`
    threshold_from: str = "yours"
    also: tuple[str, ...] = ()  # later statements of the same claim (judged once, under this one)
    written: str = ""  # the line as it was written (a pre-registration keeps it verbatim)

    @property
    def text(self) -> str:
        """The statement in the grammar: as written, or (a paper claim's) composed from its parts."""
        scores = ",".join(t if m is None else f"{t}:{m}" for t, m in self.scores)
        return self.written or f"{self.a} − {self.b} on {scores} {self.comparator} {self.threshold:g}"

    def key(self, paper: PaperNumbers) -> tuple:
        """The claim's identity: its statement normalised (variant words in the report's form, tasks as the paper
        names them, numbers as numbers), with the approach and checkpoint a paper claim may add."""
        scores = tuple((paper.paper_task(t) or t, m and paper.paper_metric(m)) for t, m in self.scores)
        return (_normal(self.a), _normal(self.b), scores, self.comparator, self.threshold, self.approach,
                self.checkpoint)

    @property
    def test_text(self) -> str:
        t = f"{self.threshold:g}".replace("-", "−")
        return f"|a − b| < {t}" if self.comparator == "within" else f"a − b {self.comparator} {t}"

    @property
    def effect(self) -> Optional[float]:
        """The effect the power check is against: |T|; None for a claim against 0 (it names no effect)."""
        return abs(self.threshold) or None

    @property
    def yes(self) -> str:
        """The verdict word when the records bear the claim out: a paper claim is reproduced, yours supported."""
        return REPRODUCED if self.origin == PAPER else SUPPORTED


def _normal(name: str) -> str:
    n = " ".join(name.lower().split())
    size, _, rest = n.partition(" ")
    word = OBJECTIVE_WORDS.get(n) or (OBJECTIVE_WORDS.get(rest) and f"{size} {OBJECTIVE_WORDS[rest]}")
    return (word or n).lower()


# --- statements: the grammar, claims.yaml beside the records, the paper's claims -----------------------------


def parse_claim(text: str, where: str = "--claim", name: Optional[str] = None, origin: str = COMMAND_LINE,
                source: Optional[str] = None) -> Claim:
    """One claim line → Claim; a malformed one is one `BertbenchError` naming `where` and what was expected."""
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
    shown = source or (f"yours ({where})" if origin in (FILE, COMMAND_LINE) else f"{origin} ({where})")
    return Claim(sides[0].strip(), sides[1].strip(), tuple(scores), comparator, threshold, origin, shown, where,
                 name, written=text.strip())


def load_claims_file(path: Path) -> list[Claim]:
    """`claims.yaml`: {claims: [a claim line, or {claim: line, name: words}, ...]}; errors name the file and line."""
    import yaml

    path = Path(path)
    try:
        root = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError) as err:
        raise BertbenchError(f"{path}: cannot read the claims ({err})") from None
    except yaml.YAMLError as err:
        raise BertbenchError(f"{path}: not valid YAML: {err}") from None
    entries = None
    if isinstance(root, yaml.MappingNode) and {k.value for k, _ in root.value} == {"claims"}:
        entries = root.value[0][1]
    if not isinstance(entries, yaml.SequenceNode) or not entries.value:
        raise BertbenchError(f"{path}: expected 'claims:' and a list of claims, each {FORM}")
    out = []
    for node in entries.value:
        where = f"{path}:{node.start_mark.line + 1}"
        value = yaml.safe_load(yaml.serialize(node))
        if isinstance(value, dict) and set(value) <= {"claim", "name"} and "claim" in value:
            out.append(parse_claim(value["claim"], where, str(value["name"]) if value.get("name") else None, FILE))
        elif isinstance(value, str):
            out.append(parse_claim(value, where, origin=FILE))
        else:
            raise BertbenchError(f"{where}: expected a claim line or {{claim: ..., name: ...}}, got {value!r}")
    return out


def claims_beside(results: Iterable[Path]) -> list[Claim]:
    """The claims of a `claims.yaml` in each results folder given (not searched below it)."""
    return [c for folder in results if (Path(folder) / CLAIMS_FILE).is_file()
            for c in load_claims_file(Path(folder) / CLAIMS_FILE)]


@dataclass(frozen=True)
class Claims:
    """The paper's claims (reference/claims.yaml), each in the grammar, and the two thresholds they use."""

    thresholds: Mapping[str, float]
    claims: tuple[Claim, ...]


def load_claims(path: Optional[Path] = None, paper: Optional[PaperNumbers] = None) -> Claims:
    """The paper's claims.yaml, checked (bertbench.reference.claims: every problem listed in one `BertbenchError`),
    each claim written in the grammar."""
    thresholds, raws = check_claims(Path(path) if path is not None else CLAIMS_PATH, paper or load_paper_numbers())
    return Claims(thresholds, tuple(_paper_claim(raw, thresholds) for raw in raws))


def _paper_claim(raw: Mapping[str, Any], thresholds: Mapping[str, float]) -> Claim:
    m, big = thresholds["about_a_point"], thresholds["much_greater"]
    comparator, threshold = {"greater": (">", 0.0), "not_worse": (">", -m), "much_greater": (">", big),
                             "equivalent": ("within", m)}[raw["test"]]
    scores = [tuple(s) for s in raw["tasks"]] if "tasks" in raw else [(raw.get("task"), raw.get("metric"))]
    systems = raw.get("paper")
    return Claim(str(raw["a"]), str(raw["b"]), tuple(scores), comparator, threshold, PAPER, str(raw["source"]),
                 f"{CLAIMS_PATH.name}: {raw['id']}", str(raw["claim"]), str(raw["id"]),
                 raw.get("approach", DEFAULT_APPROACH), raw.get("checkpoint", "last"),
                 tuple(systems) if systems else None, THRESHOLD_SOURCES[raw["test"]])


def statements(paper: Sequence[Claim], stated: Sequence[Claim], paper_numbers: PaperNumbers) -> list[Claim]:
    """Every claim once, under its earliest statement (ORIGINS' order; the given order within one origin); the
    later statements of the same claim are kept in its `also`, to be shown."""
    first: dict[tuple, Claim] = {}
    for claim in sorted([*paper, *stated], key=lambda c: ORIGINS.index(c.origin)):  # sorted() is stable
        key = claim.key(paper_numbers)
        if key in first:
            first[key] = dataclasses.replace(first[key], also=first[key].also + (claim.source,))
        else:
            first[key] = claim
    return list(first.values())


# --- resolving a claim on the records ------------------------------------------------------------------------


def names_variant(name: str, v: Variant) -> Optional[bool]:
    """Whether `name` names variant `v`: True when exactly (its label, an external model's name, or size and
    objective), False when by its objective (any size), None when not."""
    n = " ".join(name.lower().split())
    if n == v.label.lower():
        return True
    if v.external is not None and n == str(v.external.get("name", "")).lower():  # an external model by its name
        return True
    words = {v.objective.lower()} | {w for w, label in OBJECTIVE_WORDS.items() if label == v.objective}
    if n in words:
        return False
    size, _, rest = n.partition(" ")
    return True if size == v.size.lower() and rest in words else None


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


def _series(data: ReportData, variant: Variant) -> tuple[Variant, ...]:
    return data.checkpoints.get(variant.label, (variant,))


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
    ta = {_step(v): v for v in _series(data, va) if at(v)}
    tb = {_step(v): v for v in _series(data, vb) if at(v)}
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
    return (claim.yes if p_yes <= p_no else CONTRADICTED), min(1.0, 2 * min(p_yes, p_no))


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
    """`evaluate` as the report runs it: the paper's claims, a `preregistration`'s (report.registration:
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


__all__ = ["ALPHA", "CLAIMS_FILE", "CLAIMS_PATH", "COMMAND_LINE", "CONTRADICTED", "Claim", "Claims",
           "EXPLORATORY", "FILE", "INCONCLUSIVE", "NOT_MEASURABLE", "NOT_RUN", "ORIGINS", "Outcome", "PAPER", "PAPERS",
           "PREREGISTRATION", "PRE_REGISTERED", "REPRODUCED", "SUPPORTED", "YOURS", "claim_sides", "claims_beside",
           "contributions", "direction_and_p", "evaluate", "evaluate_study", "judge", "load_claims", "load_claims_file",
           "effect_of", "names_variant", "paper_values", "parse_claim", "score_text", "statements"]
