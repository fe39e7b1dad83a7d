"""The report's words for external models: models bertbench did not pre-train (a record's `model.external`,
see bertbench.model.external). They keep a column of their own in the main table, labelled by what they are
("HF hfbert, L2-H128", labels.external_label), after our variants; they take no part in what compares our
pre-training procedures (Tables 5, 6 and 8, the differences against MLM+NSP, the paper's claims), and a user
claim (`report --claim`) may name them. Nothing here is said of how they were trained: their records say nothing.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def externals(variants: Iterable[Any]) -> list[Any]:
    """The variants that are models we did not pre-train."""
    return [v for v in variants if v.external is not None]


def external_main_notes(variants: Sequence[Any]) -> list[str]:
    """The main table's note on its external columns (none without one: the report is then as it was)."""
    found = externals(variants)
    if not found:
        return []
    names = ", ".join(v.label for v in found)
    return [f"External models ({names}): not pre-trained by bertbench, labelled by their folder's name, architecture "
            "and shape; their pre-training is not ours (its data, objective and budget are theirs), the fine-tuning "
            "protocol is the same; "
            "how they were trained is unknown (their records carry no pre-training block). They are left out of "
            "Tables 5, 6 and 8, the differences against MLM+NSP and the paper's claims; compare one with ours by a "
            "claim of your own (`bertbench report --claim`, docs/claims.md)."]


def external_provenance_notes(variants: Sequence[Any]) -> list[str]:
    """One provenance note per external model: the facts its folder states, and nothing else."""
    notes = []
    for v in externals(variants):
        ext = v.external
        shape = ext.get("shape") or {}
        facts = [f"format {ext.get('format')}", f"folder {v.records[0].data['model']['source']}"]
        for key, said in (("name_or_path", "_name_or_path"), ("model_type", "model_type"), ("tokenizer", "tokenizer"),
                          ("architectures", "architectures"), ("transformers_version", "transformers")):
            if ext.get(key):
                facts.append(f"{said} " + (", ".join(map(str, ext[key])) if key == "architectures" else str(ext[key])))
        facts.append("shape " + ", ".join(f"{k} {shape[k]}" for k in sorted(shape)))
        facts.append(f"weights {ext.get('weights_file') or 'file'} {v.fingerprint}")
        notes.append(f"{v.label}: an external model; its folder states {'; '.join(facts)}. Its objective, masking, "
                     "data and tokens are unknown.")
    return notes


__all__ = ["external_main_notes", "external_provenance_notes", "externals"]
