"""The provenance table: what each variant is and where its numbers came from."""
from __future__ import annotations

from bertbench.report.model import MISSING, ReportData, Table, _fmt_count, _masking_text, _short
from bertbench.results import objective_label
from bertbench.runtime.progress import fmt_seconds


def provenance_table(data: ReportData) -> Table:
    header = ("Variant", "Objective", "Masking", "Tokens seen", "Pre-train wall", "Pre-train hardware",
              "Pre-train code", "Data", "Model", "Seeds", "Records", "Fine-tune code")
    rows = []
    for v in data.variants:
        pre = v.pretraining or {}
        seeds = sorted({r.data["seed"] for r in v.records})
        codes = sorted({r.data["code_version"] for r in v.records})
        objective = objective_label(v.pretraining)
        rows.append((v.label, objective, _masking_text(v.pretraining), _fmt_count(pre.get("tokens_seen")),
                     fmt_seconds(pre.get("wall_seconds")), pre.get("hardware") or MISSING,
                     pre.get("code_version") or MISSING, _short(pre.get("data_fingerprint")), _short(v.fingerprint),
                     ", ".join(map(str, seeds)), str(len(v.records)), ", ".join(codes)))
    notes = ("Masking: ratio of positions selected, then MASK/SAME/RND percentages; wwm = whole-word masking. "
             "Fingerprints are shortened to 12 hex digits; the CSV/JSON outputs hold them in full.",)
    return Table("provenance", "Provenance", header, tuple(rows), notes)
