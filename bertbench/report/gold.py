"""Per-example predictions for records written before records kept them, from the dev file's gold labels.

Such a record of a two-label task keeps `extra.example_correct` (1: the prediction was the gold label), so
with the gold labels its predictions are implied exactly: correct → the gold label, wrong → the other one.
That is what F1, MCC and the near-constant flag need. The gold comes from the dev file whose sha256 the
record holds (`extra.data_fingerprint.eval`): a different file, a capped eval set or a count that does not
match is never joined. In memory only: record files are never rewritten. `bertbench report --data-dir`.
"""
from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from bertbench.errors import BertbenchError
from bertbench.results import LoadedRecord

JOINED = "example_correct + the dev file's gold labels"  # extra.example_predictions_from of a joined record


def _joinable(data: dict, task) -> bool:
    extra = data.get("extra") or {}
    return (data["task_type"] == "classification" and "example_predictions" not in extra
            and isinstance(extra.get("example_correct"), str) and task is not None
            and task.version == data["task_version"] and task.num_labels == 2
            and data["finetune"].get("max_eval_examples") is None)


def _gold(task, data_dir: Path) -> tuple[Optional[dict], Optional[list[int]]]:
    from bertbench.data.task_readers import data_fingerprint, read_split

    try:
        return data_fingerprint(task, "eval", data_dir), [int(ex.label) for ex in read_split(task, "eval", data_dir, "local")]
    except BertbenchError:
        return None, None  # no local dev file: those records stay as they are


def join_gold(records: Sequence[LoadedRecord], data_dir: Path) -> tuple[list[LoadedRecord], int]:
    """(the records, those of them given predictions); see the module docstring."""
    from bertbench.tasks import valid_tasks

    if not Path(data_dir).is_dir():
        raise BertbenchError(f"--data-dir {data_dir}: no such folder")
    tasks = valid_tasks()  # a bad custom task file never blocks the report of the others
    cache: dict[str, tuple] = {}
    out, joined = [], 0
    for rec in records:
        data = rec.data
        task = tasks.get(data["task"])
        if not _joinable(data, task):
            out.append(rec)
            continue
        if task.name not in cache:
            cache[task.name] = _gold(task, Path(data_dir))
        fingerprint, gold = cache[task.name]
        correct = data["extra"]["example_correct"]
        if gold is None or fingerprint != (data["extra"].get("data_fingerprint") or {}).get("eval") or len(gold) != len(correct):
            out.append(rec)
            continue
        new = copy.deepcopy(data)
        new["extra"]["example_predictions"] = "".join(str(g if c == "1" else 1 - g) for g, c in zip(gold, correct))
        new["extra"]["example_gold"] = "".join(map(str, gold))
        new["extra"]["example_predictions_from"] = JOINED
        out.append(LoadedRecord(rec.path, new))
        joined += 1
    return out, joined


__all__ = ["JOINED", "join_gold"]
