"""The pre-training seeds table: each seed of a variant pre-trained more than once, on its own."""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from bertbench.config import PAPER_MASK_PROCEDURE, PAPER_MASK_RATIO
from bertbench.claims import DEFAULT_APPROACH
from bertbench.report.model import MISSING, ReportData, Table, Variant, fmt_count, glue_rows, metric_for
from bertbench.results import LoadedRecord


def _seed_glue(data: ReportData, variant: Variant, covered: Sequence[tuple[str, str, str]], seed: Any) -> Optional[float]:
    """The GLUE score over `covered` (the main table's GLUE row) from one pre-training seed's records alone."""
    scores = []
    for ptask, pmetric, _ in covered:
        metric, row = metric_for(data, variant, ptask, pmetric, DEFAULT_APPROACH, ("dev", "test"))
        values = [] if metric is None else [float(r["metrics"][metric]) for r in data.cell(variant, row).records
                                            if r.get("pretrain_seed") == seed and r["metrics"].get(metric) is not None]
        if not values:
            return None
        scores.append(statistics.fmean(values))
    return statistics.fmean(scores) if scores else None


def _first_of(numbers: Mapping[str, Any], *keys: str) -> str:
    """The first of `keys` that `numbers` has, to one decimal; – when it has none (an older summary)."""
    value = next((numbers[k] for k in keys if numbers.get(k) is not None), None)
    return MISSING if value is None else f"{value:.1f}"


def pretraining_seeds_table(data: ReportData) -> Optional[Table]:
    """One row per pre-training seed of each variant pre-trained more than once: what its held-out evaluation
    measured when pre-training ended, and its GLUE score from its own fine-tuning records. None when no variant
    has two pre-training seeds."""
    glue = glue_rows(data)
    covered = glue[0].covered if glue else ()
    paper_masking = f"{PAPER_MASK_RATIO:.0%} " + "/".join(map(str, PAPER_MASK_PROCEDURE))
    header = ("Variant", "Pre-training seed", "Tokens seen", f"Held-out MLM acc. ({paper_masking})", "NSP acc.",
              "Cross-segment match", glue[0].label if glue else "GLUE", "Records")
    rows = []
    for v in data.variants:
        by_seed: dict[Any, list[LoadedRecord]] = defaultdict(list)
        for r in v.records:
            by_seed[r.data.get("pretrain_seed")].append(r)
        if v.random_init or len(by_seed) < 2:
            continue
        for seed in sorted(by_seed, key=lambda s: (s is None, s)):
            pre = by_seed[seed][0].data["model"]["pretraining"]
            held = pre.get("heldout") or {}
            score = _seed_glue(data, v, covered, seed)
            rows.append((v.label, MISSING if seed is None else str(seed), fmt_count(pre.get("tokens_seen")),
                         _first_of(held, "mlm_accuracy_paper_masking", "mlm_accuracy"), _first_of(held, "nsp_accuracy"),
                         _first_of(held, "cross_segment_match"), MISSING if score is None else f"{score:.1f}",
                         str(len(by_seed[seed]))))
    if not rows:
        return None
    notes = ("Each pre-training seed of a variant pre-trained more than once, on its own: held-out MLM accuracy (%) "
             "when pre-training ended, scored at the paper's masking whatever the variant trained with, and NSP "
             "accuracy (%); cross-segment match, the attention (%) a segment-B token puts on "
             "the same token in segment A, in the layer-0 head that does this most (`bertbench.model.diagnostics`; "
             "– where not recorded); and the main table's GLUE score from this seed's fine-tuning records alone "
             "(mean over fine-tuning seeds). Seeds that disagree here are why a variant's intervals are wide.",)
    return Table("pretraining_seeds", "Pre-training seeds", header, tuple(rows), notes)
