"""Stage keys: one rule for every kind of stage. A stage is keyed on what determines its output, and on
nothing else: not where the study folder is, not another task's settings.

- the trained tokenizer: its corpus (relative to the data folder), documents, vocabulary size and case;
- pre-training: the variant's resolved config, with the tokenizer as its content fingerprint (not its path)
  and corpus paths written relative to the data folder;
- fine-tuning: the model it starts from (a pre-training's key, a snapshot of one, or random init at a size
  with a tokenizer's fingerprint), its task, and that task's effective settings (its own train cap, not the
  whole `train_caps` mapping).

A finished stage leaves its key beside its output (`stage.json` in a pre-training folder, `done-<task>.json`
in a results folder), and that is where a later invocation looks for it, so a study folder copied or moved
elsewhere resumes.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Optional

from bertbench.config import DATA_SPEED_ONLY, PretrainConfig, keyed_data_fields, to_dict
from bertbench.model.tokenizer import tokenizer_fingerprint  # re-exported: plan.py keys random init with it
from bertbench.paths import data_dir_relative
from bertbench.runtime.files import atomic_write_json

STAGE_FILE = "stage.json"  # in a pre-training folder, and random init's results folder: {"key": ...}


def config_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:10]


def tokenizer_key(cfg: PretrainConfig, data_dir: Path) -> str:
    """A study's trained tokenizer: its corpus (relative to the data folder, so a data folder elsewhere keeps the
    key), documents, vocabulary size and case."""
    docs = cfg.data.max_documents  # with doc_sentences, the first N documents of the cut corpus: other text
    split = {"doc_sentences": cfg.data.doc_sentences} if docs is not None and cfg.data.doc_sentences else {}
    return config_hash({"corpus": [data_dir_relative(c, data_dir) for c in cfg.data.corpus], "docs": docs,
                        "vocab": cfg.tokenizer_vocab_size, "lower": cfg.lowercase, **split})


def pretrain_key(cfg: PretrainConfig, data_dir: Path) -> str:
    fields = to_dict(cfg)
    # without the fields that only change how fast the data is made (the same data, however fast it was made)
    fields["data"] = keyed_data_fields(fields["data"])
    for name in DATA_SPEED_ONLY:
        fields["data"].pop(name, None)
    fields["tokenizer"] = tokenizer_fingerprint(cfg.tokenizer)
    fields["data"]["corpus"] = [data_dir_relative(c, data_dir) for c in cfg.data.corpus]
    return config_hash(fields)


# Request fields that say where a stage reads and writes, or which the model identity / per-task cap replace
_NOT_IN_FINETUNE_KEY = ("model", "tasks", "out", "data_dir", "tasks_dir", "append", "tokenizer", "train_caps",
                        "max_train_examples")


def finetune_key(req: Any, task: str, model_key: str) -> str:
    """A fine-tuning stage's key: `model_key` (what the model is), the task and its effective settings."""
    fields = {k: v for k, v in dataclasses.asdict(req).items() if k not in _NOT_IN_FINETUNE_KEY}
    fields |= {"model": model_key, "task": task, "max_train_examples": req.train_cap(task)}
    return config_hash({k: str(v) for k, v in fields.items()})


def read_json(path: Path) -> Any:
    """What a JSON file a stage or a study left holds; None where there is none, or it is torn."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_key(path: Path) -> Optional[str]:
    marker = read_json(path)  # no marker, or a torn one: not finished
    return marker.get("key") if isinstance(marker, dict) else None


def write_key(path: Path, key: str) -> None:
    atomic_write_json(path, {"key": key})


def find_keyed_dir(root: Path, name: str, key: str) -> Path:
    """The folder of the stage keyed `key` under `root` (pretrain/, or results/ for random init's): the one
    marked with `key` (a folder copied or renamed keeps its marker); else the new folder `<name>-<key>`."""
    new = root / f"{name}-{key}"
    if new.is_dir():
        return new
    for folder in sorted(root.glob(f"{name}-*")):
        if read_key(folder / STAGE_FILE) == key:
            return folder
    return new


def finetune_done(marker: Path, key: str) -> bool:
    """Whether the marker says this stage finished under this key."""
    return read_key(marker) == key
