"""What a result record says of a model bertbench did not pre-train: the folder's own facts, nothing else.

A Hugging Face encoder folder (`save_pretrained`), or a bertbench checkpoint folder without a pre-training
summary (`convert --from-hf` writes one), tells us its shape, maybe the name it was loaded from
(`_name_or_path`) and its architectures, and its weights (whose sha256 is the record's `model.fingerprint`).
It says nothing of how it was trained: no objective, masking, data or tokens. Its record therefore has
`model.pretraining: null` and this `model.external` block (validated by results.py; its fields: docs/claims.md),
and the report labels it by its name and shape, apart from the variants bertbench pre-trained.

A BERT folder is imported into bertbench's encoder; any other encoder (RoBERTa, ELECTRA, DistilBERT, DeBERTa)
is fine-tuned as transformers' own model under the same heads (model.hf_encoder).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

HUGGINGFACE, BERTBENCH = "huggingface", "bertbench"  # `external.format`: which kind of folder it was


def external_facts(folder: Path, given: str, config, run_config: Optional[dict], data_dir: Path,
                   tokenizer_kind: Optional[str] = None) -> dict[str, Any]:
    """The `model.external` block of a folder without a pre-training summary. `given`: the folder as the user
    named it; `config`: its ModelConfig; `run_config`: a bertbench folder's run_config.yaml (None for HF);
    `tokenizer_kind`: what the loaded tokenizer is (HFTokenizer.kind; "WordPiece" for a BERT)."""
    from bertbench.paths import portable_folder

    folder = Path(folder)
    hf = _read_json(folder / "config.json") if (folder / "config.json").is_file() else None
    kind = BERTBENCH if (folder / "model_config.json").is_file() else HUGGINGFACE
    name_or_path = None
    if kind == HUGGINGFACE and isinstance(hf, dict):
        name_or_path = hf.get("_name_or_path") or None  # "" when the config was made in code, not loaded
    elif isinstance(run_config, dict):
        name_or_path = run_config.get("imported_from") or None  # what `convert --from-hf` imported
    stated = hf if kind == HUGGINGFACE and isinstance(hf, dict) else {}  # what config.json says of itself
    architectures = stated.get("architectures")
    weights = next((f for f in ("model.safetensors", "pytorch_model.bin") if (folder / f).is_file()), None)
    return {
        "format": kind,
        "name": Path(given).name or folder.name,
        "name_or_path": portable_folder(str(name_or_path), data_dir) if isinstance(name_or_path, str) else None,
        "architectures": list(architectures) if isinstance(architectures, list) else None,
        "transformers_version": stated.get("transformers_version"),
        "shape": {"layers": config.num_layers, "hidden": config.hidden_size, "heads": config.num_heads,
                  "intermediate": config.intermediate_size, "vocab": config.vocab_size,
                  "max_position": config.max_position_embeddings},
        "weights_file": weights,  # the file model.fingerprint is the sha256 of
        # the architecture (config.json's model_type; a bertbench folder is a BERT) and the tokenizer's kind
        "model_type": str(stated.get("model_type") or "bert") if kind == HUGGINGFACE else "bert",
        "tokenizer": tokenizer_kind,
    }


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # read already by the loader, which names a bad file; here it only adds facts


__all__ = ["BERTBENCH", "HUGGINGFACE", "external_facts"]
