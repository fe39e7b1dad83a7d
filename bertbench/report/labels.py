"""How the report names a record's model (its column: size, objective, masking) and groups its fine-tuning
settings; what a record holds is `bertbench.results`' business, how the report shows it is this module's."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bertbench.claims import masking_suffix, objective_label
from bertbench.results import Record


def external_label(external: Mapping[str, Any]) -> str:
    """An external model's report label: its kind, its folder's name, its architecture when it is not a BERT
    (config.json's model_type) and its shape, e.g. 'HF hfbert, L2-H128', 'HF roberta-tiny (roberta), L2-H32-A2'
    ('-A4' added when the heads are not hidden / 64, the rule of every released BERT)."""
    shape = external["shape"]
    text = f"L{shape['layers']}-H{shape['hidden']}"
    if shape["heads"] * 64 != shape["hidden"]:
        text += f"-A{shape['heads']}"
    kind = "HF" if external["format"] == "huggingface" else "external"
    arch = external.get("model_type")
    named = f"{external['name']} ({arch})" if arch and arch != "bert" else external["name"]
    return f"{kind} {named}, {text}"


def variant_label(record: Record) -> str:
    """The report column of a record: '{size} MLM+NSP', '{size} LTR (causal)', 'mini MLM+NSP mask 100/0/0', ...;
    a model we did not pre-train is named by what it is (`external_label`)."""
    if record["model"].get("external"):
        return external_label(record["model"]["external"])
    pretraining = record["model"]["pretraining"]
    label = f"{record['model']['size']} {objective_label(pretraining)}"
    suffix = masking_suffix(pretraining)
    return f"{label} {suffix}" if suffix else label


# What a held-out selection chose, not what was asked: each pre-training seed's checkpoint is selected on its
# own, so its records would otherwise split one variant's cell into one "setting" per pre-training seed
_SELECTION_OUTCOME = ("selection", "selected_epoch", "steps", "steps_trained")


def setting_key(record: Record) -> str:
    """The fine-tuning setting as a canonical string (records differing only in seed share it, and so do the
    pre-training seeds of one variant: a held-out selection's outcome, lr included, is not part of it)."""
    ft = dict(record["finetune"])
    if ft.get("grid") == "heldout":
        for key in (*_SELECTION_OUTCOME, "lr"):
            ft.pop(key, None)
    return json.dumps(ft, sort_keys=True)
