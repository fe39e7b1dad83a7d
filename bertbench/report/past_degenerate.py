"""What got past a degenerate cell before: when `plan` refuses a side whose cells are degenerate (one class, one
value), it also says the smallest pre-training and fine-tuning budget with which a committed study
(leaderboards/records/STUDY) reached a non-degenerate cell of the same task and model size, so that the
refusal comes with a way out taken from our own records rather than a guess.

A cell is the records of one study, task, model (fingerprint) and fine-tuning setting; it is non-degenerate
when no seed of it is degenerate or near-constant. "Smallest" is the fewest pre-training tokens, then the
fewest fine-tuning steps.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Optional


def _cells(root: Path, task: str, size: Optional[str]) -> dict[tuple, list[dict[str, Any]]]:
    from bertbench.results import RECORD_SUFFIX, read_record

    cells: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(root.glob(f"*/**/{task}/*{RECORD_SUFFIX}")):
        try:
            rec = read_record(path)
        except Exception:  # noqa: BLE001 — a hint only: a record that does not read is not one to learn from
            continue
        if rec["task"] != task or rec["model"].get("pretraining") is None or (size and rec["model"]["size"] != size):
            continue
        study = path.relative_to(root).parts[0]
        setting = tuple(sorted((k, str(v)) for k, v in rec["finetune"].items() if k not in ("selection", "steps",
                                                                                               "steps_trained")))
        cells[(study, rec["model"]["fingerprint"], setting)].append(rec)
    return cells


def _flagged(rec: dict[str, Any]) -> bool:
    extra = rec.get("extra") or {}
    return bool(extra.get("degenerate")) or extra.get("near_constant") is True


def smallest_budget_past(task: str, size: Optional[str], root: Optional[Path] = None) -> Optional[str]:
    """A sentence naming the smallest committed budget that reached a non-degenerate `task` cell at `size`, or None."""
    from bertbench.paths import COMMITTED_RECORDS

    root = Path(root) if root is not None else COMMITTED_RECORDS
    if not root.is_dir():
        return None
    best = None
    for (study, _, _), recs in _cells(root, task, size).items():
        if any(_flagged(r) for r in recs):
            continue
        pre = recs[0]["model"]["pretraining"]
        key = (pre.get("tokens_seen") or 0, max(r["finetune"].get("steps") or 0 for r in recs))
        if best is None or key < best[0]:
            best = (key, study, recs[0])
    if best is None:
        return None
    (tokens, steps), study, rec = best
    pre, ft = rec["model"]["pretraining"], rec["finetune"]
    pretrained = f"{tokens / 1e6:.1f}M tokens" + (f" ({pre['steps']:,} steps)" if pre.get("steps") else "")
    cap = f", at most {ft['max_train_examples']:,} training examples" if ft.get("max_train_examples") else ""
    return (f"{task}: the smallest budget a committed study reached a non-degenerate cell with is {rec['model']['size']} "
            f"{pre['objective']} pre-trained on {pretrained}, fine-tuned {ft.get('epochs')} epochs at lr "
            f"{ft['lr']:g} ({steps:,} steps{cap}; leaderboards/records/{study})")


def past_degenerate_hint(tasks: list[str], size: Optional[str], root: Optional[Path] = None) -> str:
    """' What got past it: …' for the refused tasks that a committed study got past, else ''."""
    found = [line for task in dict.fromkeys(tasks) if (line := smallest_budget_past(task, size, root))]
    return (" What got past it: " + "; ".join(found) + ".") if found else ""


__all__ = ["past_degenerate_hint", "smallest_budget_past"]
