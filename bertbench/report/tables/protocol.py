"""The fine-tuning protocol behind each cell, from its records: how the learning rate was chosen, on
how many training examples, and whether the training loss had levelled off by the last epoch.

A fair comparison needs every variant to get the same grid, the same selection rule and enough
training; this table lets a reader check that instead of trusting it.
"""
from __future__ import annotations

from typing import Any, Optional

from bertbench.report.model import MISSING, ReportData, Table, pretrain_seed
from bertbench.runtime.progress import fmt_lr

PLATEAU = 0.05  # a last epoch that lowers the mean training loss by less than 5% counts as levelled off


def _selection(records: list) -> Optional[dict[str, Any]]:
    return next((r["finetune"]["selection"] for r in records if r["finetune"].get("selection")), None)


def _drop(records: list) -> Optional[float]:
    drops = [d for r in records if (d := (r.get("extra") or {}).get("last_epoch_loss_drop")) is not None]
    return max(drops) if drops else None


def _epochs(ft: dict, sel: Optional[dict]) -> str:
    if ft.get("epochs") is None:
        return MISSING
    if sel is not None and sel.get("selected_epoch") is not None:  # early stopping: the epoch was chosen too
        return f"{sel['selected_epoch']} of ≤ {ft['epochs']:g}"
    ran = ft.get("epochs_trained")  # None in records written before it was recorded
    if ran is not None and ran < ft["epochs"]:  # --max-steps stopped it: what ran, not what was asked
        return f"{ran:g} of {ft['epochs']:g} (max steps {ft.get('max_steps')})"
    return f"{ft['epochs']:g}"


def _each(texts) -> str:
    """Every distinct choice, in order of first appearance: one for a cell of one pre-training seed."""
    return ", ".join(dict.fromkeys(texts))


def protocol_table(data: ReportData) -> Table:
    header = ("Variant", "Task", "Train examples", "Epochs", "lr grid", "Chosen lr", "Chosen on", "Selection score",
              "Last-epoch loss drop (max over seeds)")
    rows = []
    unlevelled = 0
    by_epoch = several = False
    for variant in data.variants:
        for row in data.rows:
            cell = data.cell(variant, row)
            if cell is None:
                continue
            first = cell.records[0]
            ft = first["finetune"]
            sel = _selection(list(cell.records))
            drop = _drop(list(cell.records))
            cap = ft.get("max_train_examples")
            train = f"{first['split']['train_size']:,}" + (f" (cap {cap:,})" if cap else "")
            by_epoch = by_epoch or (sel is not None and sel.get("selected_epoch") is not None)
            if drop is not None and drop >= PLATEAU:
                unlevelled += 1
            # each pre-training seed chose for itself: a P-cell shows every seed's choice, never seed 1's alone
            by_seed = {pretrain_seed(r): (r["finetune"], r["finetune"].get("selection")) for r in cell.records}
            chosen = {k: by_seed[k] for k in sorted(by_seed, key=lambda k: (k is None, k or 0))}
            several = several or len(chosen) > 1
            scores = sorted(s["score"] for _, s in chosen.values() if s)
            rows.append((
                variant.label, row.shown_task, train, _each(_epochs(f, s) for f, s in chosen.values()),
                ", ".join(fmt_lr(lr) for lr in sel["grid"]) if sel else f"{fmt_lr(ft['lr'])} only",
                _each(fmt_lr(f["lr"]) for f, _ in chosen.values()), sel["on"] if sel else MISSING,
                MISSING if not scores else "–".join(dict.fromkeys(f"{x:.1f}" for x in (scores[0], scores[-1]))),
                MISSING if drop is None else f"{100 * drop:.1f}%" + (" ▲" if drop >= PLATEAU else ""),
            ))
    notes = [
        "Chosen on train-slice: the learning rate with the best mean primary metric over seeds on a slice held out "
        "of the training set (the same slice, grid, seeds and rule for every variant); the cells above are on dev, "
        "which played no part in the choice. Chosen on dev: the paper's way, optimistic.",
        *(["Epochs 'k of ≤ n': every epoch was scored on the same slice and the (lr, epoch) pair chosen by the same "
           "rule (early stopping); the cell reports dev as it was after epoch k. A candidate that predicted one class "
           "(or one value) for every selection example of some seed ranks last, however well the metric scores it."]
          if by_epoch else []),
        f"Last-epoch loss drop: how much the last epoch lowered the mean training loss; ▲ marks {100 * PLATEAU:.0f}% "
        f"or more (still falling: more epochs might change the cell). {unlevelled} cell(s) marked.",
        *(["A cell of several pre-training seeds: each seed's checkpoint chose its own lr (and epoch); the cell "
           "shows every choice made (comma-separated) and the selection scores' range over the seeds "
           "(lowest–highest), not seed 1's alone."] if several else []),
    ]
    return Table("protocol", "Fine-tuning protocol per cell", header, tuple(rows), tuple(notes))


__all__ = ["PLATEAU", "protocol_table"]
