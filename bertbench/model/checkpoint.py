"""A bertbench checkpoint is a self-describing folder:

    model.safetensors    weights (our key names; see hf_compat for the HF mapping); `nsp.*` only when the
                         model trained NSP (objective "mlm+nsp")
    model_config.json    ModelConfig
    vocab.txt, tokenizer.json, tokenizer_config.json
    run_config.yaml      the resolved config of the run that made it (pre-training or import): its objective
                         says whether the model has an NSP head
    summary.json         optional: the pre-training summary (objective, masking, tokens, held-out metrics)

`load_checkpoint(path)` needs nothing else.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from bertbench.config import ModelConfig
from bertbench.config_files import from_dict
from bertbench.errors import BertbenchError

REQUIRED_FILES = ("model.safetensors", "model_config.json")
NSP_PREFIX = "nsp."  # the NSP head's state-dict keys
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json")


@dataclass
class Checkpoint:
    model: Any  # bertbench.model.bert.BertForPreTraining
    tokenizer: Any  # bertbench.model.tokenizer.WordPieceTokenizer
    config: ModelConfig
    run_config: dict = field(default_factory=dict)
    summary: Optional[Any] = None  # bertbench.results.PretrainSummary
    path: Optional[Path] = None
    missing_heads: list[str] = field(default_factory=list)


def save_checkpoint(folder: Path, model, tokenizer, run_config: Optional[dict] = None, summary=None) -> None:
    """Write the folder; each file goes in atomically, weights last-but-one and config last."""
    import yaml

    from bertbench.model.hf_compat import write_safetensors
    from bertbench.runtime.files import atomic_write_json, atomic_write_text

    folder = Path(folder)
    sd = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    check_finite_weights(sd, f"{folder}: refusing to save weights")  # never a NaN checkpoint
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(folder)
    atomic_write_text(folder / "run_config.yaml", yaml.safe_dump(run_config or {}, sort_keys=False))
    if summary is not None:
        from bertbench.results import write_summary

        write_summary(folder / "summary.json", summary)  # a results.PretrainSummary
    else:  # another model's summary must not stay beside these weights (it would be read as their provenance)
        (folder / "summary.json").unlink(missing_ok=True)
    write_safetensors(folder, sd)
    atomic_write_json(folder / "model_config.json", asdict(model.cfg))


def check_checkpoint_dir(folder: Path) -> None:
    folder = Path(folder)
    if not folder.is_dir():
        raise BertbenchError(f"{folder}: checkpoint directory not found")
    missing = [f for f in REQUIRED_FILES if not (folder / f).is_file()]
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        missing.append(" or ".join(TOKENIZER_FILES))
    if missing:
        hint = ""
        if (folder / "config.json").is_file():
            hint = " (this looks like a Hugging Face folder: import it with `bertbench convert --from-hf`, or pass it to finetune as is)"
        raise BertbenchError(f"{folder}: not a bertbench checkpoint, missing {', '.join(missing)}{hint}")


def load_checkpoint(path: Path, device: str = "cpu") -> Checkpoint:
    """Load a bertbench checkpoint folder, a pre-training run folder (its checkpoint/, as `finetune --model`
    takes it), or a Hugging Face BERT folder (converted on the fly)."""
    from bertbench.model.bert import BertForPreTraining
    from bertbench.model.tokenizer import WordPieceTokenizer

    folder = Path(path)
    if folder.is_dir() and (folder / "checkpoint" / "model_config.json").is_file():
        folder = folder / "checkpoint"  # a pre-training run folder
    if folder.is_dir() and (folder / "config.json").is_file() and not (folder / "model_config.json").is_file():
        return import_hf(folder)
    check_checkpoint_dir(folder)
    cfg_file = folder / "model_config.json"
    try:
        cfg = from_dict(ModelConfig, json.loads(cfg_file.read_text()), str(cfg_file))
    except json.JSONDecodeError as err:
        raise BertbenchError(f"{cfg_file}: not valid JSON ({err})") from None
    except BertbenchError as err:  # a value check (hidden_size -8) names the value, not the file
        raise BertbenchError(err if str(cfg_file) in str(err) else f"{cfg_file}: {err}") from None
    sd = read_safetensors(folder / "model.safetensors", device)
    run_config = _read_yaml(folder / "run_config.yaml")
    nsp = has_nsp_head(sd, run_config)
    model = BertForPreTraining(cfg, nsp=nsp)
    result = load_weights(model, sd, f"{folder / 'model.safetensors'}: weights do not match model_config.json")
    if result.missing_keys or result.unexpected_keys:
        raise BertbenchError(f"{folder / 'model.safetensors'}: weights do not match model_config.json "
                             f"(missing {result.missing_keys[:3]}, unexpected {result.unexpected_keys[:3]})")
    model.to(device).eval()
    tokenizer = WordPieceTokenizer.load(folder)
    from bertbench.results import read_summary

    summary = read_summary(folder / "summary.json") if (folder / "summary.json").is_file() else None
    return Checkpoint(model, tokenizer, cfg, run_config, summary, folder)


def has_nsp_head(state_dict: dict, run_config: Optional[dict] = None) -> bool:
    """Whether the model of a checkpoint has an NSP head: its run's objective says so ("mlm+nsp"); without one
    (an import), the weights do."""
    from bertbench.config import OBJECTIVES, trains_nsp

    objective = run_config.get("objective") if isinstance(run_config, dict) else None
    if objective in OBJECTIVES:
        return trains_nsp(objective)
    return any(k.startswith(NSP_PREFIX) for k in state_dict)


def fit_nsp_weights(state_dict: dict, nsp: bool, prefix: str = "") -> dict:
    """The one place where a checkpoint's NSP weights meet a model: for a model without the NSP head (an
    encoder to fine-tune), any `nsp.*` tensors are dropped. `prefix`: the model's key prefix in the state dict.
    A model with the head keeps them all."""
    if nsp:
        return state_dict
    return {k: v for k, v in state_dict.items() if not k.startswith(prefix + NSP_PREFIX)}


def load_weights(model, state_dict: dict, mismatch: str):
    """`model.load_state_dict(strict=False)`, with a tensor of another shape as one line instead of torch's
    multi-line RuntimeError (a config edited after training, or weights from another model)."""
    try:
        return model.load_state_dict(state_dict, strict=False)
    except RuntimeError as err:
        detail = next((line.strip() for line in str(err).splitlines() if "size mismatch" in line), str(err).splitlines()[0])
        raise BertbenchError(f"{mismatch} ({detail})") from None


def check_finite_weights(state_dict: dict, where: str) -> None:
    """Refuse weights holding NaN/inf (a diverged run's, or a file with damaged tensor data)."""
    import torch

    bad = [k for k, v in state_dict.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise BertbenchError(
            f"{where}: {len(bad)} weight tensor(s) hold NaN/inf (first: {bad[0]}); the file is damaged or the run diverged"
        )


def read_safetensors(path: Path, device: str = "cpu") -> dict:
    """Tensors of a .safetensors file, or one line: truncated, corrupt, or holding NaN/inf weights."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        sd = load_file(str(path), device=device)
    except (SafetensorError, OSError, ValueError) as err:
        raise BertbenchError(f"{path}: not a readable safetensors file ({err}); it is truncated or corrupt") from None
    check_finite_weights(sd, str(path))
    return sd


def import_hf(hf_dir: Path) -> Checkpoint:
    """An HF BERT folder → an in-memory Checkpoint. An NSP head (`cls.seq_relationship`) absent from the file
    is absent from the model; the pooler and LM head absent from the file stay at their init."""
    from bertbench.model.hf_compat import read_hf_dir, state_dict_from_hf
    from bertbench.model.bert import BertForPreTraining
    from bertbench.model.tokenizer import WordPieceTokenizer

    hf_dir = Path(hf_dir)
    cfg, hf_sd = read_hf_dir(hf_dir)
    sd, missing = state_dict_from_hf(hf_sd, cfg, str(hf_dir))
    nsp = has_nsp_head(sd)
    missing = [k for k in missing if not k.startswith(NSP_PREFIX)]
    model = BertForPreTraining(cfg, nsp=nsp)
    load_weights(model, sd, f"{hf_dir}: weights do not match config.json")
    model.eval()
    tokenizer = WordPieceTokenizer.load(hf_dir)
    if tokenizer.vocab_size != cfg.vocab_size:
        raise BertbenchError(f"{hf_dir}: tokenizer has {tokenizer.vocab_size} tokens but config.json says vocab_size {cfg.vocab_size}")
    return Checkpoint(model, tokenizer, cfg, {"imported_from": str(hf_dir)}, None, hf_dir, missing)


def _read_yaml(path: Path) -> dict:
    if not path.is_file():
        return {}
    import yaml

    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def fingerprint_checkpoint(folder: Path) -> str:
    """sha256 of the weights file (what a fine-tuning result depends on), short form."""
    folder = Path(folder)
    weights = folder / "model.safetensors"
    if not weights.is_file():
        weights = folder / "pytorch_model.bin"
    with open(weights, "rb") as fh:
        return "sha256:" + hashlib.file_digest(fh, "sha256").hexdigest()[:16]
