"""The provenance table: what each variant is and where its numbers came from."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from bertbench.config import is_masked
from bertbench.report.model import MISSING, ReportData, Table, fmt_count, short_fingerprint
from bertbench.report.labels import objective_label
from bertbench.results import mask_procedure
from bertbench.runtime.progress import fmt_seconds
from bertbench.report.external import external_provenance_notes


def _masking_text(pre: Optional[Mapping[str, Any]]) -> str:
    if pre is None:
        return MISSING
    if not is_masked(pre["objective"]):
        return "none (causal)"
    procedure = mask_procedure(pre)
    text = f"{100 * pre['mask_ratio']:.4g}% " + ("/".join(f"{x:.4g}" for x in procedure) if procedure else MISSING)
    return text + (" wwm" if pre.get("whole_word_mask") else "")


def provenance_table(data: ReportData) -> Table:
    header = ("Variant", "Objective", "Masking", "Tokens seen", "Pre-train wall", "Pre-train hardware",
              "Pre-train code", "Data", "Model", "Seeds", "Records", "Fine-tune code")
    rows = []
    for v in data.variants:
        pre = v.pretraining or {}
        seeds = sorted({r.data["seed"] for r in v.records})
        codes = sorted({r.data["code_version"] for r in v.records})
        objective = "unknown (external)" if v.external is not None else objective_label(v.pretraining)
        rows.append((v.label, objective, _masking_text(v.pretraining), fmt_count(pre.get("tokens_seen")),
                     fmt_seconds(pre.get("wall_seconds")), pre.get("hardware") or MISSING,
                     pre.get("code_version") or MISSING, short_fingerprint(pre.get("data_fingerprint")), short_fingerprint(v.fingerprint),
                     ", ".join(map(str, seeds)), str(len(v.records)), ", ".join(codes)))
    notes = ("Masking: ratio of positions selected, then MASK/SAME/RND percentages; wwm = whole-word masking. "
             "Fingerprints are shortened to 12 hex digits; the CSV/JSON outputs hold them in full.",
             *external_provenance_notes(data.variants))
    return Table("provenance", "Provenance", header, tuple(rows), notes)
