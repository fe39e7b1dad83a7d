"""Small, valid result records made in code for the report's tests: one variant's seeds on one task, with the
per-example predictions the multi-bootstrap joins on (classification: one digit per example)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from bertbench.results import RECORD_SUFFIX, LoadedRecord, validate_record

OBJECTIVE_FINGERPRINTS = {"mlm+nsp": "sha256:a0", "mlm": "sha256:b0", "clm": "sha256:c0"}


def record(task: str, seed: int, predictions: str, gold: str, *, objective: Optional[str] = "mlm+nsp",
           size: str = "tiny", task_type: str = "classification") -> LoadedRecord:
    """A record of `objective`'s tiny model (None: random init) on `task`'s dev set, scored from `predictions`
    (a digit per example) against `gold`: accuracy, and the degenerate / near-constant flags fine-tuning writes."""
    correct = "".join("1" if p == g else "0" for p, g in zip(predictions, gold))
    pretraining = None if objective is None else {
        "objective": objective, "mask_ratio": None if objective == "clm" else 0.15,
        "mask_procedure": None if objective == "clm" else [80, 10, 10],
        "whole_word_mask": None if objective == "clm" else False, "tokens_seen": 1000, "wall_seconds": None,
        "data_fingerprint": None, "code_version": None, "hardware": None, "run_dir": None, "heldout": None}
    fingerprint = OBJECTIVE_FINGERPRINTS.get(objective, "random:tiny")
    data = validate_record({
        "schema_version": 2, "task": task, "task_version": 1, "task_type": task_type,
        "split": {"train": "train", "eval": "dev", "eval_kind": "dev", "train_size": 100, "eval_size": len(gold)},
        "metrics": {"accuracy": 100.0 * correct.count("1") / len(gold)}, "primary_metric": "accuracy",
        "model": {"source": f"runs/{objective}", "fingerprint": fingerprint, "size": size, "pretraining": pretraining},
        "finetune": {"lr": 5e-5, "epochs": 3, "batch_size": 32, "max_seq_len": 128, "max_steps": None,
                     "max_train_examples": None, "precision": "fp32"},
        "seed": seed, "wall_seconds": 1.0, "code_version": "test", "library_versions": {}, "hardware": None,
        "date": "2026-12-06T00:00:00+00:00", "predictions_file": None,
        "extra": {"degenerate": len(set(predictions)) == 1, "example_correct": correct,
                  "example_predictions": predictions, "example_gold": gold,
                  "near_constant": max(predictions.count(c) for c in set(predictions)) >= 0.95 * len(predictions)},
    })
    name = f"{objective or 'random'}/{task}.dev.seed{seed}{RECORD_SUFFIX}"
    return LoadedRecord(Path("/records") / name, data)


def variant(task: str, objective: Optional[str], predictions_by_seed: list[str], gold: str) -> list[LoadedRecord]:
    """One variant's records on `task`, a seed per predictions string (seeds 1, 2, ...)."""
    return [record(task, seed, preds, gold, objective=objective) for seed, preds in enumerate(predictions_by_seed, 1)]


# Predictions on a 100-example binary dev set at three accuracies, for claims judged on per-example records.
GOLD = "01" * 50


def wrong_at(positions) -> str:
    return "".join(str(1 - int(g)) if i in positions else g for i, g in enumerate(GOLD))


GOOD = [wrong_at(set(range(seed, 100, 9))) for seed in (1, 2, 3)]  # about 89% right
FAIR = [wrong_at(set(range(seed, 100, 6))) for seed in (0, 2, 4)]  # about 83% right
POOR = [wrong_at(set(range(seed, 100, 3))) for seed in (0, 1, 2)]  # about 66% right
