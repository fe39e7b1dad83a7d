"""The table of committed studies: a study's page (docs/studies/NAME.md) says its question and the claim that
answers it in one line, `<!-- bertbench study: question=...; claim=CLAIM_ID -->`; its records say the answer, the
claim judged as the claims table judges it. `claim=none` (no claim of claims.yaml compares what it asks): its
GLUE row, without an interval."""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from bertbench.errors import BertbenchError
from bertbench.report.model import MISSING, ReportData, Table, glue_rows
from bertbench.claims import load_claims
from bertbench.report.claims import evaluate_study
from bertbench.report.tables.claims import claims_table

STUDY_MARK = re.compile(r"^<!-- bertbench study: question=(?P<question>[^;]+); claim=(?P<claim>[\w-]+) -->$", re.M)
NO_CLAIM = "none"


@dataclass(frozen=True)
class StudyPage:
    name: str  # the study: its preset, and its folder of records
    question: str
    claim: Optional[str]  # a claim id of claims.yaml, or None


def read_study_page(path: Path) -> StudyPage:
    """The study's question and headline claim from its page's marked line; one error line without it."""
    found = STUDY_MARK.findall(Path(path).read_text(encoding="utf-8"))
    if len(found) != 1:
        raise BertbenchError(f"{path}: needs exactly one line '<!-- bertbench study: question=QUESTION; "
                             f"claim=CLAIM_ID -->' (claim={NO_CLAIM} where no claim compares it), found {len(found)}")
    question, claim = found[0]
    return StudyPage(Path(path).stem, question.strip(), None if claim == NO_CLAIM else claim)


def _headline(page: StudyPage, data: ReportData, where: str, preregistration=None) -> tuple[str, str, str]:
    """(what is compared, ours with its interval, the verdict) for the page's claim on the study's records, in its
    Holm family (the study's pre-registered one, when it has a pre-registration that names it)."""
    if page.claim is None:
        glue = glue_rows(data)
        if not glue:
            return MISSING, MISSING, "no claim compared"
        ours = ", ".join(f"{label} {value:.1f}" for label, value in glue[0].ours.items())
        return glue[0].label, ours, "no claim compared (no interval)"
    claims = load_claims(paper=data.paper)
    known = {c.id: c for c in claims.claims}
    if page.claim not in known:
        raise BertbenchError(f"{where}: claim {page.claim!r} is not in claims.yaml ({', '.join(sorted(known))})")
    table = claims_table(data, evaluate_study(data, (), preregistration, claims), claims, preregistration)
    column = {name: i for i, name in enumerate(table.header)}
    (row,) = [r for r in table.rows if r[column["Claim"]] == known[page.claim].name]
    compared = f"{row[column['a − b']]} ({row[column['Score']]})"
    ours = f"{row[column['Ours a − b']]} {row[column['95% interval']]}"
    return compared, ours, row[column["Verdict"]]


def studies_table(studies: Sequence[tuple]) -> Table:
    """One row per (page, the study's report data, the link to its page[, its pre-registration]), in order."""
    rows = []
    for page, data, link, *prereg in studies:
        compared, ours, verdict = _headline(page, data, link, *prereg)
        rows.append((f"[{page.name}]({link})", page.question, compared, ours, verdict))
    header = ("Study", "Question", "Headline: a − b (score)", "Ours [95% interval]", "Verdict")
    return Table("studies", "Committed studies", header, tuple(rows), (
        "Each study's headline is one claim of bertbench/reference/claims.yaml judged on the study's committed "
        "records, as its claims table judges it (the multi-bootstrap over pre-training seeds, fine-tuning seeds "
        "and dev examples), Holm-adjusted within the study's family: its pre-registered family where the study was "
        "pre-registered (the verdict then ends with its family), else the paper's claims judged on its records; "
        "its page has every table.",))
