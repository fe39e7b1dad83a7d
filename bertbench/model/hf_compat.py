"""Hugging Face `transformers` BERT ⇄ bertbench: a key-mapping table, config mapping, import and export.

Nothing here imports transformers: an HF directory is read as files (config.json + safetensors or
pytorch_model.bin + vocab.txt or tokenizer.json), and the exported directory is plain files too.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bertbench.config import ModelConfig
from bertbench.errors import BertbenchError

# ours → HF; "{i}" is the layer index. qkv is ours fused: it maps to three HF tensors concatenated on dim 0.
LAYER_KEYS: dict[str, str | tuple[str, ...]] = {
    "attn.qkv.weight": ("attention.self.query.weight", "attention.self.key.weight", "attention.self.value.weight"),
    "attn.qkv.bias": ("attention.self.query.bias", "attention.self.key.bias", "attention.self.value.bias"),
    "attn.out.weight": "attention.output.dense.weight",
    "attn.out.bias": "attention.output.dense.bias",
    "attn.norm.weight": "attention.output.LayerNorm.weight",
    "attn.norm.bias": "attention.output.LayerNorm.bias",
    "ffn.up.weight": "intermediate.dense.weight",
    "ffn.up.bias": "intermediate.dense.bias",
    "ffn.down.weight": "output.dense.weight",
    "ffn.down.bias": "output.dense.bias",
    "ffn.norm.weight": "output.LayerNorm.weight",
    "ffn.norm.bias": "output.LayerNorm.bias",
}
TOP_KEYS: dict[str, str] = {
    "bert.embeddings.word.weight": "bert.embeddings.word_embeddings.weight",
    "bert.embeddings.position.weight": "bert.embeddings.position_embeddings.weight",
    "bert.embeddings.token_type.weight": "bert.embeddings.token_type_embeddings.weight",
    "bert.embeddings.norm.weight": "bert.embeddings.LayerNorm.weight",
    "bert.embeddings.norm.bias": "bert.embeddings.LayerNorm.bias",
    "bert.pooler.weight": "bert.pooler.dense.weight",
    "bert.pooler.bias": "bert.pooler.dense.bias",
    "mlm.dense.weight": "cls.predictions.transform.dense.weight",
    "mlm.dense.bias": "cls.predictions.transform.dense.bias",
    "mlm.norm.weight": "cls.predictions.transform.LayerNorm.weight",
    "mlm.norm.bias": "cls.predictions.transform.LayerNorm.bias",
    "mlm.bias": "cls.predictions.bias",
    "nsp.weight": "cls.seq_relationship.weight",
    "nsp.bias": "cls.seq_relationship.bias",
}
# Heads a plain BertModel / BertForMaskedLM checkpoint does not have: on import the pooler and the LM head are
# kept at their fresh init, and a model without `cls.seq_relationship` has no NSP head (checkpoint.has_nsp_head).
OPTIONAL_PREFIXES = ("bert.pooler.", "mlm.", "nsp.")
# HF keys that are derived or buffers, never weights of their own.
HF_IGNORED = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias", "bert.embeddings.position_ids")

CONFIG_KEYS = {  # ours → HF config.json
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size",
    "max_position_embeddings": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
    "dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
    "layer_norm_eps": "layer_norm_eps",
    "initializer_range": "initializer_range",
    "pad_token_id": "pad_token_id",
}


def config_from_hf(hf: dict[str, Any], where: str = "config.json") -> ModelConfig:
    if hf.get("model_type") != "bert":
        raise BertbenchError(f"{where}: not a BERT model (model_type {hf.get('model_type')!r}); only a BERT imports into "
                             "bertbench's encoder (`finetune --model FOLDER` fine-tunes any other encoder as it is)")
    act = hf.get("hidden_act", "gelu")
    if act != "gelu":
        raise BertbenchError(f"{where}: hidden_act {act!r} is not supported (BERT uses exact 'gelu')")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise BertbenchError(f"{where}: only absolute position embeddings are supported")
    kwargs = {ours: hf[theirs] for ours, theirs in CONFIG_KEYS.items() if theirs in hf}
    kwargs["causal"] = bool(hf.get("bertbench_causal", False))
    return ModelConfig(**kwargs)


def hf_architecture(nsp: bool) -> str:
    """The transformers class an exported folder is: BertForPreTraining with the NSP head; without it (a model
    pre-trained with the objective "mlm" or "clm") BertForMaskedLM, the LM head alone, so that loading it
    neither invents an NSP head at random init nor hides that there is none. The pooler's weights are still
    written (fine-tuning classes read them; BertForMaskedLM skips them)."""
    return "BertForPreTraining" if nsp else "BertForMaskedLM"


def config_to_hf(cfg: ModelConfig, nsp: bool = True) -> dict[str, Any]:
    hf = {theirs: getattr(cfg, ours) for ours, theirs in CONFIG_KEYS.items()}
    hf.update(model_type="bert", architectures=[hf_architecture(nsp)], hidden_act="gelu",
              position_embedding_type="absolute", tie_word_embeddings=True)
    if cfg.causal:
        # transformers has no causal BERT encoder; keep the flag so bertbench re-imports it faithfully.
        hf["bertbench_causal"] = True
    return hf


def _layer_map(num_layers: int) -> dict[str, str | tuple[str, ...]]:
    table: dict[str, str | tuple[str, ...]] = dict(TOP_KEYS)
    for i in range(num_layers):
        for ours, theirs in LAYER_KEYS.items():
            hf = tuple(f"bert.encoder.layer.{i}.{t}" for t in theirs) if isinstance(theirs, tuple) else f"bert.encoder.layer.{i}.{theirs}"
            table[f"bert.layers.{i}.{ours}"] = hf
    return table


def state_dict_from_hf(hf_sd: dict, cfg: ModelConfig, where: str = "weights") -> tuple[dict, list[str]]:
    """HF tensors → our state dict. Returns (state dict, our keys that were absent and stay at init)."""
    import torch

    # A saved BertModel has no "bert." prefix; normalise to the BertForPreTraining layout.
    if not any(k.startswith("bert.") for k in hf_sd):
        hf_sd = {f"bert.{k}": v for k, v in hf_sd.items()}
    table = _layer_map(cfg.num_layers)
    out, missing = {}, []
    for ours, theirs in table.items():
        names = theirs if isinstance(theirs, tuple) else (theirs,)
        if all(n in hf_sd for n in names):
            out[ours] = torch.cat([hf_sd[n] for n in names], 0) if len(names) > 1 else hf_sd[names[0]]
        elif ours.startswith(OPTIONAL_PREFIXES):
            missing.append(ours)
        else:
            absent = [n for n in names if n not in hf_sd]
            raise BertbenchError(f"{where}: not a BERT checkpoint of this shape, missing {absent[:3]}")
    known = {n for v in table.values() for n in (v if isinstance(v, tuple) else (v,))}
    unexpected = [k for k in hf_sd if k not in known and not k.startswith(HF_IGNORED)]
    if unexpected:
        raise BertbenchError(f"{where}: unexpected weights {unexpected[:5]} — is this a BERT checkpoint?")
    # The output bias may live only under the decoder's name in some exports.
    if "mlm.bias" in missing and "cls.predictions.decoder.bias" in hf_sd:
        out["mlm.bias"] = hf_sd["cls.predictions.decoder.bias"]
        missing.remove("mlm.bias")
    return out, missing


VOCAB_ROWS = ("bert.embeddings.word.weight", "mlm.bias")  # one row per token: padded inside the model


def state_dict_to_hf(sd: dict, cfg: ModelConfig) -> dict:
    """Our state dict → HF BertForPreTraining tensors (fused qkv split back, tied decoder written out); without
    `nsp.*` (a model without the NSP head) no `cls.seq_relationship.*`. Tensors of the model's padded
    vocabulary (a raw dict such as its gradients; `state_dict()` strips them already) lose the padding rows."""
    H = cfg.hidden_size
    sd = {k: v[: cfg.vocab_size] if k in VOCAB_ROWS and v.size(0) > cfg.vocab_size else v for k, v in sd.items()}
    out = {}
    for ours, theirs in _layer_map(cfg.num_layers).items():
        if ours not in sd and ours.startswith("nsp."):
            continue
        t = sd[ours]
        if isinstance(theirs, tuple):
            for name, part in zip(theirs, t.split(H, 0)):
                out[name] = part.contiguous()
        else:
            out[theirs] = t.contiguous()
    # safetensors stores no aliases, and transformers re-ties the decoder to the embeddings on load;
    # we still write the decoder weight so loaders that do not tie find it.
    out["cls.predictions.decoder.weight"] = out["bert.embeddings.word_embeddings.weight"].clone()
    out["cls.predictions.decoder.bias"] = out["cls.predictions.bias"].clone()
    return out


def read_hf_dir(hf_dir: Path) -> tuple[ModelConfig, dict]:
    """Read config.json + weights from an HF-format BERT directory."""
    hf_dir = Path(hf_dir)
    if not hf_dir.is_dir():
        raise BertbenchError(f"{hf_dir}: not a directory (expected a Hugging Face BERT folder)")
    cfg_file = hf_dir / "config.json"
    if not cfg_file.is_file():
        raise BertbenchError(f"{hf_dir}: no config.json — not a Hugging Face model directory")
    try:
        hf_cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise BertbenchError(f"{cfg_file}: not valid JSON ({err})") from None
    cfg = config_from_hf(hf_cfg, str(cfg_file))
    st, pt = hf_dir / "model.safetensors", hf_dir / "pytorch_model.bin"
    if st.is_file():
        from safetensors.torch import load_file

        sd = load_file(str(st))
    elif pt.is_file():
        import torch

        sd = torch.load(pt, map_location="cpu", weights_only=True)
    else:
        raise BertbenchError(f"{hf_dir}: no weights (looked for model.safetensors and pytorch_model.bin)")
    return cfg, sd


def write_hf_dir(model, tokenizer, out_dir: Path) -> None:
    """Write a folder that `BertForPreTraining.from_pretrained` (`BertForMaskedLM` for a model without the NSP
    head) and `AutoTokenizer.from_pretrained` load."""
    from bertbench.runtime.files import atomic_write_json

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    write_safetensors(out_dir, state_dict_to_hf(sd, model.cfg))
    atomic_write_json(out_dir / "config.json", config_to_hf(model.cfg, nsp=model.has_nsp))
    tokenizer.save(out_dir)


def write_safetensors(folder: Path, state_dict: dict) -> None:
    """`folder`/model.safetensors, written atomically (a temporary file renamed into place): an export's weights
    and a bertbench checkpoint's (checkpoint.save_checkpoint)."""
    import os

    from safetensors.torch import save_file

    from bertbench.runtime.files import new_file_mode

    tmp = folder / ".model.safetensors.tmp"
    save_file(state_dict, str(tmp), metadata={"format": "pt"})
    os.chmod(tmp, new_file_mode())  # safetensors writes 0600: the others of a shared folder could not read it
    tmp.replace(folder / "model.safetensors")
