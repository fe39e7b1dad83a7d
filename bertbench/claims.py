"""What a claim states, before any record is read: the grammar `A − B on TASK > T` (or `< T`, `within T`), the
paper's claims (reference/claims.yaml: greater `> 0`, not_worse `> −m`, much_greater `> M`, equivalent
`within m`), a claims.yaml beside the records, and the names a claim may give a variant (an objective, its
masking). A claim is stated in the paper, a study's pre-registration, a claims.yaml or `--claim` (ORIGINS,
earliest first); its identity is its normalised statement (`Claim.key`). Shared by the report, which judges claims
(report.claims), and the studies, which check that a pre-registered claim can be measured (studies.protocol).
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from bertbench.config import OBJECTIVES, PAPER_MASK_PROCEDURE, PAPER_MASK_RATIO, is_causal, is_masked, trains_nsp
from bertbench.config_files import yaml_error_line
from bertbench.errors import BertbenchError
from bertbench.reference import PaperNumbers, load_paper_numbers
from bertbench.reference.claims import CLAIMS_PATH, check_claims
from bertbench.results import mask_procedure

DEFAULT_APPROACH = "fine-tuning"
CLAIMS_FILE = "claims.yaml"  # read from each RESULTS_DIR given to `bertbench report`
# Where a claim was stated, earliest first: a claim stated twice is judged under the earlier statement.
PAPER, PREREGISTRATION, FILE, COMMAND_LINE = "the paper", "pre-registration", CLAIMS_FILE, "--claim"
ORIGINS = (PAPER, PREREGISTRATION, FILE, COMMAND_LINE)
# What decides a verdict beside the claims themselves: read by the report (report.multibootstrap, report.claims)
# and hashed into a study's registration (studies.preset.decisive_terms).
CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE  # the family-wise level of Holm's adjustment: the 95% intervals' own
POWER = 0.80
RESAMPLES = 2_000
RNG_SEED = 2022  # fixed, so a report regenerates byte for byte
FORM = "'A − B on TASK > T' (or < T, or within T), e.g. \"mlm+nsp − mlm on stsb > 0\"; see docs/claims.md"


def masking_suffix(pretraining: Optional[Mapping[str, Any]]) -> str:
    """'' for the paper's default masking (15%, 80/10/10, WordPiece); else e.g. 'mask 100/0/0 wwm 40%'."""
    if not pretraining or not is_masked(pretraining.get("objective")):
        return ""
    parts = []
    procedure = mask_procedure(pretraining)
    if procedure is not None and any(abs(a - b) > 1e-6 for a, b in zip(procedure, PAPER_MASK_PROCEDURE)):
        parts.append("mask " + "/".join(f"{v:.4g}" for v in procedure))
    if pretraining.get("whole_word_mask"):
        parts.append("wwm")
    ratio = pretraining.get("mask_ratio")
    if ratio is not None and abs(ratio - PAPER_MASK_RATIO) > 1e-9:
        parts.append(f"{100.0 * ratio:.4g}%")
    return " ".join(parts)


def objective_label(pretraining: Optional[Mapping[str, Any]]) -> str:
    """'MLM+NSP', 'MLM (no NSP)', 'LTR (causal)' or 'random init' (a validated, version-2 `pretraining`)."""
    if pretraining is None:
        return "random init"
    objective = pretraining["objective"]
    if is_causal(objective):
        return "LTR (causal)"
    return "MLM+NSP" if trains_nsp(objective) else "MLM (no NSP)"


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
        raise BertbenchError(yaml_error_line(path, err)) from None
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


def names_variant(name: str, v) -> Optional[bool]:
    """Whether `name` names variant `v` (a label, size, objective and external: the report's Variant, the
    protocol's arm): True when exactly (its label, an external model's name, or size and objective), False when by
    its objective (any size), None when not."""
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


__all__ = ["CLAIMS_FILE", "COMMAND_LINE", "Claim", "Claims", "DEFAULT_APPROACH", "FILE", "FORM",
           "OBJECTIVE_WORDS", "ORIGINS", "PAPER", "PREREGISTRATION", "claims_beside", "load_claims", "load_claims_file",
           "masking_suffix", "names_variant", "objective_label", "parse_claim", "statements"]
