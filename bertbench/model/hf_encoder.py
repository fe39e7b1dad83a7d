"""Any Hugging Face encoder (RoBERTa, ELECTRA, DistilBERT, DeBERTa-v2, …) as a fine-tuning backbone.

A folder whose config.json is not a BERT cannot be mapped into bertbench's encoder (hf_compat): it loads
through `transformers`' `AutoModel` and `AutoTokenizer` (a fast tokenizer: the feature builders read its
offsets and word ids), and `HFEncoder` gives the task heads what bertbench's BertModel gives them
(`EncoderOutput`: the last hidden states, a pooled first token, every layer's states when asked). A BERT
folder keeps the fast path (imported into bertbench's own encoder); `transformers` is needed here only, as
the `[hf]` extra.

The pooled output is dense + tanh over the first token, as BERT's pooler (and RoBERTa's classification
head): the model's own pooler weights when it has a pooler, else a fresh layer initialised like the heads.
Dropout is the model's own (its config's); the heads use its hidden dropout.
"""
from __future__ import annotations

import copy
import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

from bertbench.errors import BertbenchError
from bertbench.model.bert import EncoderOutput
from bertbench.model.tokenizer import WordPieceTokenizer

EXTRA_HINT = "pip install -e '.[hf]'"


def is_generic_folder(folder: Path) -> bool:
    """An HF folder (config.json, no bertbench model_config.json) whose model bertbench's encoder cannot be: not a
    BERT, or a BERT of another activation or position scheme (hf_compat.config_from_hf refuses those)."""
    folder = Path(folder)
    cfg = folder / "config.json"
    if not folder.is_dir() or not cfg.is_file() or (folder / "model_config.json").is_file():
        return False
    try:
        hf = json.loads(cfg.read_text(encoding="utf-8"))
        return (hf.get("model_type") != "bert" or hf.get("hidden_act", "gelu") != "gelu"
                or hf.get("position_embedding_type", "absolute") != "absolute")
    except (OSError, ValueError, AttributeError):
        return False  # the BERT loader names a bad config.json in one line


def import_transformers():
    """transformers, or one line naming the extra that installs it."""
    try:
        import transformers
    except ImportError:
        raise BertbenchError(f"this model needs the Hugging Face `transformers` library: {EXTRA_HINT}") from None
    transformers.logging.set_verbosity_error()  # its load reports (fresh pooler, unused LM head) are not errors
    transformers.logging.disable_progress_bar()  # nor is a bar for loading a few tensors
    return transformers


def check_encoder_config(hf_config, where: str) -> None:
    """Refuse what is not a bidirectional encoder: a decoder-only model (GPT-2, Llama) or an encoder-decoder."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    kind = hf_config.model_type
    if getattr(hf_config, "is_encoder_decoder", False):
        raise BertbenchError(f"{where}: model_type {kind!r} is an encoder-decoder model; bertbench fine-tunes "
                             "encoders (bert, roberta, electra, distilbert, deberta-v2, …)")
    if getattr(hf_config, "is_decoder", False) or kind not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        raise BertbenchError(f"{where}: model_type {kind!r} is not a bidirectional (masked-LM) encoder; a "
                             "decoder-only model cannot be fine-tuned here (bert, roberta, electra, distilbert, "
                             "deberta-v2, … can)")


class HFTokenizer:
    """A transformers fast tokenizer, seen as bertbench's feature builders see a WordPieceTokenizer: `.backend` (a
    `tokenizers.Tokenizer` whose post-processor adds the model's own special tokens), `encode_batch`, pad/unk ids;
    `segments` False when the model has no token type embeddings (the features then carry none)."""

    def __init__(self, fast, segments: bool):
        self.fast = fast
        self.backend = copy.deepcopy(fast.backend_tokenizer)  # encode_batch toggles truncation on it
        self.backend.no_padding()
        self.backend.no_truncation()
        self.segments = segments
        self.pad_id = fast.pad_token_id if fast.pad_token_id is not None else 0
        # a byte-level BPE has no unknown token: a word it erased (none can be) would take the pad id
        self.unk_id = fast.unk_token_id if fast.unk_token_id is not None else self.pad_id
        self.word_backend = _word_backend(self.backend)

    # the WordPiece tokenizer's own: they read only `self.backend`
    encode_batch = WordPieceTokenizer.encode_batch
    vocab_size = WordPieceTokenizer.vocab_size
    convert_ids_to_tokens = WordPieceTokenizer.convert_ids_to_tokens

    @property
    def kind(self) -> str:
        """'BPE (byte-level)', 'WordPiece', 'Unigram': what the record says of the tokenizer."""
        spec = json.loads(self.backend.to_str())
        model = str((spec.get("model") or {}).get("type") or "unknown")  # tokenizers' model: BPE, WordPiece, Unigram
        return f"{model} (byte-level)" if _byte_level(spec.get("pre_tokenizer")) else model


def _byte_level(pre) -> list[dict]:
    """The ByteLevel steps of a serialised pre-tokenizer, inside a Sequence too."""
    if not isinstance(pre, dict):
        return []
    own = [pre] if pre.get("type") == "ByteLevel" else []
    return own + [q for p in pre.get("pretokenizers") or [] for q in _byte_level(p)]


def _word_backend(backend):
    """The backend for pre-split words (NER): a byte-level BPE marks each word as following a space
    (add_prefix_space), as the words of running text are; transformers' RoBERTa asks the same of split words."""
    spec = json.loads(backend.to_str())
    steps = _byte_level(spec.get("pre_tokenizer"))
    if not steps:
        return backend
    from tokenizers import Tokenizer

    for step in steps:
        step["add_prefix_space"] = True
    return Tokenizer.from_str(json.dumps(spec))


class HFEncoder(nn.Module):
    """An AutoModel behind BertModel's call: (input_ids, token_type_ids, attention_mask) → EncoderOutput."""

    def __init__(self, model, cfg, pad_id: int, segments: bool):
        super().__init__()
        self.model = model
        self.cfg = cfg  # bertbench ModelConfig: the shape and dropout the heads read
        self.pad_id = pad_id
        self.segments = segments  # load_generic: token type embeddings, and a forward that takes them
        self.pooler = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        own = getattr(getattr(model, "pooler", None), "dense", None)
        if isinstance(own, nn.Linear) and own.weight.shape == self.pooler.weight.shape:
            # a copy: the model's own pooler stays (not every model's forward allows it None), unread, no gradient
            self.pooler.load_state_dict(own.state_dict())
        else:
            self.pooler.weight.data.normal_(0.0, cfg.initializer_range)
            self.pooler.bias.data.zero_()

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, output_hidden_states: bool = False,
                pooled_only: bool = False) -> EncoderOutput:
        """BertModel's call; `pooled_only` (bertbench's last-layer shortcut) computes the whole last layer here."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        # the batches pad with 0; RoBERTa numbers its positions from the non-pad tokens, so pad with its pad id
        ids = input_ids.masked_fill(attention_mask == 0, self.pad_id)
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": attention_mask}
        if self.segments and token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        out = self.model(**kwargs, output_hidden_states=output_hidden_states, return_dict=True)
        h = out.last_hidden_state  # (B, T, H)
        states = list(out.hidden_states) if output_hidden_states else None
        return EncoderOutput(h, torch.tanh(self.pooler(h[:, 0])), states)


@dataclass
class GenericEncoder:
    """A loaded HF encoder folder: the model (kept as loaded; each seed fine-tunes a copy), its tokenizer, its shape."""

    model: Any
    tokenizer: HFTokenizer
    config: Any  # bertbench ModelConfig: shape, usable positions, the heads' dropout
    model_type: str

    def backbone(self, seed: int) -> HFEncoder:
        torch.manual_seed(seed)  # the fresh pooler (and the heads after it) depend on the seed
        model = copy.deepcopy(self.model)
        model.train()
        return HFEncoder(model, self.config, self.tokenizer.pad_id, self.tokenizer.segments)


def _shape(hf_config, max_positions: int):
    from bertbench.config import ModelConfig

    def first(*names, default=None):
        return next((getattr(hf_config, n) for n in names if getattr(hf_config, n, None) is not None), default)

    hidden = first("hidden_size")
    dropout = first("hidden_dropout_prob", "dropout", default=0.1)
    return ModelConfig(
        vocab_size=first("vocab_size"), hidden_size=hidden, num_layers=first("num_hidden_layers"),
        num_heads=first("num_attention_heads"), intermediate_size=first("intermediate_size", "hidden_dim",
                                                                        default=4 * hidden),
        max_position_embeddings=max_positions, type_vocab_size=max(1, first("type_vocab_size", default=1)),
        dropout=dropout, attention_dropout=first("attention_probs_dropout_prob", "attention_dropout", default=dropout),
        initializer_range=first("initializer_range", default=0.02), pad_token_id=first("pad_token_id", default=0) or 0,
    )


def _usable_positions(model, hf_config) -> int:
    """Positions a sequence may fill: RoBERTa's count from its pad id + 1 (514 embeddings hold 512 tokens)."""
    n = getattr(hf_config, "max_position_embeddings", None) or 512
    embeddings = getattr(model, "embeddings", None)
    padding_idx = getattr(embeddings, "padding_idx", None)
    if isinstance(padding_idx, int) and getattr(hf_config, "position_embedding_type", "absolute") == "absolute":
        n -= padding_idx + 1
    return n


def load_generic(folder: Path) -> GenericEncoder:
    """An HF encoder folder → model, fast tokenizer and shape; one `error:` line for what cannot be fine-tuned."""
    transformers = import_transformers()
    folder = Path(folder)
    where = str(folder / "config.json")
    try:
        hf_config = transformers.AutoConfig.from_pretrained(folder)
    except (OSError, ValueError, KeyError) as err:
        raise BertbenchError(f"{where}: transformers cannot read it ({str(err).splitlines()[0]})") from None
    check_encoder_config(hf_config, where)
    fast = _fast_tokenizer(transformers, folder)
    try:
        model = transformers.AutoModel.from_pretrained(folder)
    except (OSError, ValueError) as err:
        raise BertbenchError(f"{folder}: the model's weights do not load ({str(err).splitlines()[0]})") from None
    model.eval()
    # segment ids only for a model with token type embeddings that takes them
    segments = ((getattr(hf_config, "type_vocab_size", 0) or 0) > 1
                and "token_type_ids" in inspect.signature(model.forward).parameters)
    tokenizer = HFTokenizer(fast, segments)
    if tokenizer.vocab_size > hf_config.vocab_size:
        raise BertbenchError(f"{folder}: the tokenizer has {tokenizer.vocab_size} tokens but config.json says "
                             f"vocab_size {hf_config.vocab_size}")
    return GenericEncoder(model, tokenizer, _shape(hf_config, _usable_positions(model, hf_config)), hf_config.model_type)


# What a fast tokenizer is built from: its own file, or the vocabulary files transformers converts. transformers 5
# makes an empty tokenizer (the special tokens alone) for a folder holding none of them: it must not get that far.
TOKENIZER_SOURCES = ("tokenizer.json", "vocab.txt", "vocab.json", "spm.model", "sentencepiece.bpe.model",
                     "tokenizer.model")


def _fast_tokenizer(transformers, folder: Path):
    missing = f"{folder}: no fast tokenizer (tokenizer.json) for this model; bertbench reads a fast tokenizer's " \
              "offsets and word ids (save one beside the model with the tokenizer's `save_pretrained`)"
    if not any((folder / name).is_file() for name in TOKENIZER_SOURCES):
        raise BertbenchError(missing)
    try:
        fast = transformers.AutoTokenizer.from_pretrained(folder, use_fast=True)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, ImportError):
        raise BertbenchError(missing) from None
    if not getattr(fast, "is_fast", False):
        raise BertbenchError(missing)
    return fast


HUB_PREFIX = "hub:"  # `--model hub:NAME`: a model of the Hugging Face hub, as `--corpus hub:NAME` a dataset
# what a fine-tuning reads of a hub model: its config, weights (safetensors first) and tokenizer files
HUB_FILES = ["config.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "merges.txt",
             *TOKENIZER_SOURCES]


def hub_folder(spec: str) -> Path:
    """`hub:NAME` → the local folder of its snapshot (downloaded where the network allows; with HF_HUB_OFFLINE=1
    the hub cache alone), which then loads as any folder; one `error:` line when it cannot be had."""
    name = spec[len(HUB_PREFIX):]
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise BertbenchError(f"--model {spec}: a hub model needs `huggingface_hub`: {EXTRA_HINT}") from None
    try:
        folder = Path(snapshot_download(name, allow_patterns=[*HUB_FILES, "*.safetensors"]))
        if not any(folder.glob("*.safetensors")):  # an older upload: its PyTorch weights
            folder = Path(snapshot_download(name, allow_patterns=[*HUB_FILES, "pytorch_model.bin"]))
    except Exception as err:  # noqa: BLE001 — hub, network and cache errors alike: one line naming the model
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise BertbenchError(f"--model {spec}: not available from the Hugging Face hub ({first}); offline, "
                             "HF_HUB_OFFLINE=1 reads the hub cache alone, or give the model's folder") from None
    return folder


__all__ = ["EXTRA_HINT", "GenericEncoder", "HFTokenizer", "HUB_PREFIX", "hub_folder", "is_generic_folder",
           "load_generic"]
