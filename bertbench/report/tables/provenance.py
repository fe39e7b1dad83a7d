"""The provenance table: what each variant is and where its numbers came from."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Optional

from bertbench.config import is_masked
from bertbench.report.model import MISSING, ReportData, Table, fmt_count, pretrain_seed, short_fingerprint
from bertbench.claims import objective_label
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


SEVERAL_SEEDS_NOTE = (
    "A variant of several pre-training seeds (Seeds 'P … × F …': pre-training × fine-tuning seeds) shows each "
    "pre-training fact over all of its seeds, not seed 1's alone: a number as its range (lowest–highest), a name as "
    "each one it takes (past two, how many differ); its Model is the procedure's fingerprint, not one checkpoint's.")


def _span(values: list, fmt: Callable[[Any], str], join: bool = False) -> str:
    """One value as `fmt` writes it; several (a variant's pre-training seeds): lowest–highest, or each name (past
    two names, how many differ: the CSV/JSON hold them)."""
    found = sorted({v for v in values if v is not None})
    shown = list(dict.fromkeys(map(fmt, found)))
    if not shown:
        return MISSING
    if len(shown) == 1:
        return shown[0]
    if join:
        return "; ".join(shown) if len(shown) == 2 else f"{len(shown)} different" + (
            ", one a seed" if len(shown) == len(values) else "")
    return f"{shown[0]}–{shown[-1]}"


def provenance_table(data: ReportData) -> Table:
    header = ("Variant", "Objective", "Masking", "Tokens seen", "Pre-train wall", "Pre-train hardware",
              "Pre-train code", "Data", "Model", "Seeds", "Records", "Fine-tune code")
    rows = []
    for v in data.variants:
        # each pre-training seed's own block (a variant of several seeds holds several), never seed 1's alone
        blocks = list({pretrain_seed(r.data): r.data["model"].get("pretraining") or {} for r in v.records}.items())
        pre = [block for _, block in blocks] or [{}]
        seeds = ", ".join(map(str, sorted({r.data["seed"] for r in v.records})))
        if len(blocks) > 1:
            seeds = f"P {', '.join(str(s) for s, _ in sorted(blocks, key=lambda b: (b[0] is None, b[0] or 0)))} × F {seeds}"
        codes = sorted({r.data["code_version"] for r in v.records})
        objective = "unknown (external)" if v.external is not None else objective_label(v.pretraining)
        rows.append((v.label, objective, _masking_text(v.pretraining),
                     _span([b.get("tokens_seen") for b in pre], fmt_count),
                     _span([b.get("wall_seconds") for b in pre], fmt_seconds),
                     _span([b.get("hardware") for b in pre], str, join=True),
                     _span([b.get("code_version") for b in pre], str, join=True),
                     _span([b.get("data_fingerprint") for b in pre], short_fingerprint, join=True),
                     short_fingerprint(v.fingerprint), seeds, str(len(v.records)), ", ".join(codes)))
    notes = ("Masking: ratio of positions selected, then MASK/SAME/RND percentages; wwm = whole-word masking. "
             "Fingerprints are shortened to 12 hex digits; the CSV/JSON outputs hold them in full.",
             *([SEVERAL_SEEDS_NOTE] if any(row[9].startswith("P ") for row in rows) else []),
             *external_provenance_notes(data.variants))
    return Table("provenance", "Provenance", header, tuple(rows), notes)
