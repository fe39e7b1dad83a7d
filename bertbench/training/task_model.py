"""One pre-trained encoder + one small output layer per task *type* (the paper's claim, §3.2 and Fig. 4).

Types: classification, regression, multiple_choice, span_qa, token_classification — and the
feature-based NER of the paper's Table 7 (frozen encoder, chosen layers concatenated or summed,
a 2-layer BiLSTM on top). A causal (LTR) encoder keeps its causal mask; its pooled output comes from
the last real token (see BertModel.pool). The encoder is bertbench's BertModel, or any Hugging Face encoder
behind the same call (model.hf_encoder.HFEncoder): the heads read only its EncoderOutput and `cfg`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from bertbench.model.bert import (
    IGNORE_INDEX, BertModel, EncoderOutput, MultipleChoiceHead, SequenceHead, SpanHead, TokenHead, init_head,
)

TASK_TYPES = ("classification", "regression", "multiple_choice", "span_qa", "token_classification")


@dataclass
class FeatureBasedConfig:
    """Feature-based NER (paper Table 7): which layers, how combined, the BiLSTM on top."""

    layers: list[int] = field(default_factory=lambda: [-1, -2, -3, -4])  # "concat last four hidden"
    combine: str = "concat"  # or "sum"
    lstm_hidden: Optional[int] = None  # None: the encoder's hidden size (768 for BERT-Base, as the paper)

    def layers_for(self, num_layers: int) -> list[int]:
        """The chosen layers this encoder has (indices into its hidden states, whose 0 is the embedding output):
        "the last four" of a 2-layer model are its last two."""
        kept = [i for i in self.layers if 1 <= abs(i) <= num_layers]
        if not kept:
            raise ValueError(f"feature-based layers {self.layers}: none of them is a layer of a {num_layers}-layer encoder")
        return kept


class BiLSTMTagger(nn.Module):
    def __init__(self, in_dim: int, hidden: int, num_labels: int, dropout: float):
        super().__init__()
        self.lstm = nn.LSTM(in_dim, hidden, num_layers=2, batch_first=True, bidirectional=True, dropout=dropout)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(2 * hidden, num_labels)

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        lengths = attention_mask.sum(1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=x.size(1))  # (B, T, 2·hidden)
        return self.out(self.dropout(h))  # (B, T, num_labels)


class TaskModel(nn.Module):
    def __init__(self, bert: BertModel, task_type: str, num_labels: int = 2,
                 feature_based: Optional[FeatureBasedConfig] = None):
        """bert: bertbench's BertModel, or an HFEncoder: anything returning EncoderOutput, with a `cfg`."""
        super().__init__()
        if task_type not in TASK_TYPES:
            raise ValueError(f"unknown task type {task_type!r}")
        cfg = bert.cfg
        self.bert, self.task_type, self.feature_based = bert, task_type, feature_based
        if feature_based is not None:
            if task_type != "token_classification":
                raise ValueError("feature-based fine-tuning is implemented for token classification (NER) only")
            for p in self.bert.parameters():
                p.requires_grad_(False)  # frozen: features only
            self.feature_based = feature_based = replace(feature_based, layers=feature_based.layers_for(cfg.num_layers))
            in_dim = cfg.hidden_size * (len(feature_based.layers) if feature_based.combine == "concat" else 1)
            self.head = BiLSTMTagger(in_dim, feature_based.lstm_hidden or cfg.hidden_size, num_labels, cfg.dropout)
        elif task_type in ("classification", "regression"):
            self.head = SequenceHead(cfg, num_labels if task_type == "classification" else 1)
        elif task_type == "multiple_choice":
            self.head = MultipleChoiceHead(cfg)
        elif task_type == "span_qa":
            self.head = SpanHead(cfg)
        else:
            self.head = TokenHead(cfg, num_labels)
        init_head(self.head, cfg.initializer_range)

    def _encode(self, input_ids, token_type_ids, attention_mask) -> EncoderOutput:
        if self.feature_based is None:
            # Sequence-level heads read the pooled token alone: the last layer need not compute the others.
            pooled_only = self.task_type in ("classification", "regression", "multiple_choice")
            return self.bert(input_ids, token_type_ids, attention_mask, pooled_only=pooled_only)
        self.bert.eval()  # frozen encoder: no dropout in the features either
        with torch.no_grad():
            return self.bert(input_ids, token_type_ids, attention_mask, output_hidden_states=True)

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Returns (logits, loss). Logits: (B, L) cls · (B,) reg · (B, C) mc · (B, T, 2) span · (B, T, L) tokens."""
        ids, types, mask = batch["input_ids"], batch.get("token_type_ids"), batch.get("attention_mask")
        if self.task_type == "multiple_choice":
            B, C, T = ids.shape
            flat = lambda t: None if t is None else t.reshape(B * C, T)  # noqa: E731
            logits = self.head(self._encode(flat(ids), flat(types), flat(mask))).view(B, C)  # (B, C)
        elif self.feature_based is not None:
            enc = self._encode(ids, types, mask)
            chosen = [enc.hidden_states[i] for i in self.feature_based.layers]  # k × (B, T, H)
            x = torch.cat(chosen, -1) if self.feature_based.combine == "concat" else torch.stack(chosen).sum(0)
            logits = self.head(x, mask if mask is not None else torch.ones_like(ids))
        else:
            logits = self.head(self._encode(ids, types, mask))
            if self.task_type == "regression":
                logits = logits.squeeze(-1)  # (B,)
        return logits, self.loss(logits, batch)

    def loss(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> Optional[torch.Tensor]:
        logits = logits.float()
        if self.task_type == "span_qa":
            if "start_positions" not in batch:
                return None
            start, end = logits.unbind(-1)  # 2 × (B, T)
            if "attention_mask" in batch:  # never predict a padded position
                pad = batch["attention_mask"] == 0
                start, end = start.masked_fill(pad, -1e4), end.masked_fill(pad, -1e4)
            return (F.cross_entropy(start, batch["start_positions"]) + F.cross_entropy(end, batch["end_positions"])) / 2
        if "labels" not in batch:
            return None
        labels = batch["labels"]
        if self.task_type == "regression":
            return F.mse_loss(logits, labels.float())
        if self.task_type == "token_classification":
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=IGNORE_INDEX)
        return F.cross_entropy(logits, labels)
