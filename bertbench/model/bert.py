"""The original BERT encoder (Devlin et al. 2018) in plain PyTorch, with its pre-training and task heads.

Read top to bottom: embeddings, attention, feed-forward, layer, encoder, pooler, heads, then the models.
Post-LN layers, exact (erf) GELU, LayerNorm eps 1e-12 — numerically the same network as
`transformers.BertForPreTraining` (tests/test_hf_parity.py checks it to 1e-5). `causal=True` turns the
same encoder into the paper's left-to-right baseline ("LTR & No NSP", GPT's bet): one switch, one model.

Shapes: B batch, T sequence length, H hidden, nh heads, hs head size, V vocabulary, N selected positions.
No Lightning import here: training wraps this module from outside.

Attention runs through `F.scaled_dot_product_attention` on CUDA. On CPU it runs as explicit matmuls with
an fp32 softmax, and dropout uses a cheaper random-bit kernel. Both were measured faster there by
`bertbench bench pretrain`, and tests/test_model.py checks them against SDPA and the dropout definition.

Two fast paths change no result at the positions anyone reads (tests/test_packing.py checks outputs and
gradients against the plain path and against transformers):
- batches with ≥ 10% padding run *packed*: position-wise work on the real tokens only (see Packing);
- the last layer computes its outputs only where a head reads them (see BertModel.forward): the pooled
  token for sequence-level heads (`pooled_only`), [CLS] and the prediction slots for the masked LM.

One pre-training forward (BertForPreTraining.forward) serves training, held-out evaluation and the benchmark.
The masked LM's labels come in P prediction slots per row (`lm_positions`, made by the collator). With
`static=True` the forward reads no value back to the host between the batch and the loss, and every shape
is set by the batch's: what a GPU and `torch.compile(fullgraph=True)` need (`compile_step`). On CPU the
dynamic form does less work and stays the default (docs/performance-gpu.md: the static training step).

Training and held-out evaluation take the LM loss from the head fused with it (forward's `logits=False`:
bertbench.model.fused_head), which never makes the batch's logits; tests/test_fused_head.py checks it against
the unfused head below.

The vocabulary is padded inside the model to a multiple of VOCAB_MULTIPLE rows, which never leave it
(docs/performance-gpu.md: the padded vocabulary).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from bertbench.config import ModelConfig
from bertbench.data import IGNORE_INDEX  # positions without a loss
from bertbench.data.masking import fixed_slots, slot_count
from bertbench.model import fused_head
from bertbench.model.fused_head import linear_cross_entropy
from bertbench.model.packing import Packing, attention_mask_for_sdpa  # noqa: F401 (re-exported)

VOCAB_MULTIPLE = 64  # the word embedding / decoder rows are padded to a multiple of this inside the model


def padded_vocab(vocab_size: int) -> int:
    return -(-vocab_size // VOCAB_MULTIPLE) * VOCAB_MULTIPLE


# The hooks of the two modules holding vocabulary rows (Embeddings, MLMHead: the tensor under their `PADDED` key).
# Module-level functions: models stay picklable.
def _strip_rows(m: nn.Module, state_dict: dict, prefix: str, _meta) -> None:
    """state_dict hook: the padded tensor → its first `m.vocab_size` rows (a copy: saved files hold only the real
    vocabulary, not the padded storage behind a view)."""
    key, t = prefix + m.PADDED, state_dict.get(prefix + m.PADDED)
    if t is not None and t.size(0) > m.vocab_size:
        state_dict[key] = t[:m.vocab_size].clone()


def _pad_rows(m: nn.Module, state_dict: dict, prefix: str, *_) -> None:
    """load_state_dict pre-hook: a real-vocabulary tensor → zero-padded to the padded vocabulary's rows."""
    key, rows = prefix + m.PADDED, padded_vocab(m.vocab_size)
    t = state_dict.get(key)
    if t is not None and t.dim() >= 1 and t.size(0) < rows:
        state_dict[key] = F.pad(t, (0, 0) * (t.dim() - 1) + (0, rows - t.size(0)))


class _BitsDropout(torch.autograd.Function):
    """Dropout with four elements per 64-bit random draw (16 bits each). The 0/1 mask is kept in x's dtype: a
    multiply by a bool mask is a type-promoting one, several times slower on CPU than a same-dtype multiply
    (measured here). The scale stays a Python float, applied at fp32 precision (a bf16 mask holding 1/(1-p)
    would round it: 1/0.9 → 1.109)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float) -> torch.Tensor:
        n = x.numel()
        bits = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-(2**63), None)
        keep = bits.view(torch.int16)[:n].view(x.shape) >= -32768 + round(p * 65536)  # P(keep) = 1 - p ± 1e-5
        mask = keep.to(x.dtype)
        ctx.save_for_backward(mask)
        ctx.scale = 1.0 / (1.0 - p)
        return x.mul(mask).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (mask,) = ctx.saved_tensors
        return grad.mul(mask).mul_(ctx.scale), None


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """F.dropout, faster on CPU: torch's CPU kernel draws one Bernoulli sample per element (~25% of a mini
    step measured here); 16 random bits per element are plenty for p = 0.1."""
    if not training or p == 0.0:
        return x
    if x.device.type == "cpu" and not torch.compiler.is_compiling():  # compiled, inductor fuses its own RNG
        return _BitsDropout.apply(x, p)
    return F.dropout(x, p, True)


class Dropout(nn.Module):
    """nn.Dropout with the faster CPU kernel above; no parameters, so state dicts are unchanged."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


class Embeddings(nn.Module):
    PADDED = "word.weight"  # the rows of the padded vocabulary

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.word = nn.Embedding(cfg.vocab_size, cfg.hidden_size, padding_idx=cfg.pad_token_id)
        # Padded after construction, with zero rows: the random draws stay those of the unpadded model.
        self.vocab_size, extra = cfg.vocab_size, padded_vocab(cfg.vocab_size) - cfg.vocab_size
        if extra:
            self.word.weight = nn.Parameter(F.pad(self.word.weight.detach(), (0, 0, 0, extra)))
            self.word.num_embeddings += extra
        self.register_state_dict_post_hook(_strip_rows)
        self.register_load_state_dict_pre_hook(_pad_rows)
        self.position = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = Dropout(cfg.dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, packing: Optional[Packing] = None) -> torch.Tensor:
        if packing is None:
            positions = torch.arange(input_ids.size(1), device=input_ids.device)  # (T,)
        else:  # the real tokens only
            input_ids, token_type_ids = packing.pack(input_ids).squeeze(1), packing.pack(token_type_ids).squeeze(1)  # (N,)
            positions = packing.positions  # (N,)
        x = self.word(input_ids) + self.token_type(token_type_ids) + self.position(positions)  # (B, T, H) or (N, H)
        return self.dropout(self.norm(x))


class SelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.nh = cfg.num_heads
        # q, k and v in one matmul: one larger GEMM is faster than three small ones on CPU and GPU.
        self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size)
        self.out = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.attn_dropout = cfg.attention_dropout
        self.dropout = Dropout(cfg.dropout)
        self.norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(
        self, x: torch.Tensor, mask: Optional[torch.Tensor], is_causal: bool, packing: Optional[Packing] = None
    ) -> torch.Tensor:
        """x: (B, T, H), or (N, H) packed real tokens; returns the same shape."""
        qkv = self.qkv(x)  # (B, T, 3H) or (N, 3H)
        if packing is None:
            y = self.grid_attention(qkv, mask, is_causal)  # (B, T, H)
        else:  # bucket by bucket, each on its own shorter grid
            y = packing.merge([self.grid_attention(packing.grid(qkv, b), b.mask, b.is_causal) for b in packing.buckets])  # (N, H)
        return self.norm(x + self.dropout(self.out(y)))  # post-LN, as the original

    def grid_attention(self, qkv: torch.Tensor, mask: Optional[torch.Tensor], is_causal: bool) -> torch.Tensor:
        B, T, H = qkv.size(0), qkv.size(1), qkv.size(2) // 3
        q, k, v = (t.view(B, T, self.nh, H // self.nh).transpose(1, 2) for t in qkv.split(H, dim=2))  # 3 × (B, nh, T, hs)
        return self.attend(q, k, v, mask, is_causal).transpose(1, 2).reshape(B, T, H)  # (B, T, H)

    def forward_at(self, x: torch.Tensor, at: torch.Tensor, keys: Optional[torch.Tensor], packing: Optional[Packing]) -> torch.Tensor:
        """The output at Q chosen positions per row only, (B, Q, H); keys and values still come from every token.

        For the last layer, when only some positions are read: [CLS] for sequence heads, [CLS] and the
        prediction slots for the masked LM. x: (B, T, H), or (N, H) packed; at: (B, Q) positions; keys:
        (B, 1, 1, T) the real tokens, or None. Every shape is set by (B, Q, T) alone."""
        H, (B, Q) = x.size(-1), at.shape
        if packing is None:
            xs = x.gather(1, at[:, :, None].expand(B, Q, H))  # (B, Q, H) the residual stream at the chosen positions
        else:  # an unused slot on padding reads row 0 instead: finite, never read
            xs = x[packing.rows_of(at + packing.T * torch.arange(B, device=at.device)[:, None]).clamp_min(0)]
        q = F.linear(xs, self.qkv.weight[:H], self.qkv.bias[:H])  # (B, Q, H): queries only where asked
        kv = F.linear(x, self.qkv.weight[H:], self.qkv.bias[H:])  # (B, T, 2H) or (N, 2H)
        kv = kv if packing is None else packing.pad(kv)  # (B, T, 2H)
        T, hs = kv.size(1), H // self.nh
        qh = q.view(B, Q, self.nh, hs).transpose(1, 2)  # (B, nh, Q, hs)
        k, v = (t.view(B, T, self.nh, hs).transpose(1, 2) for t in kv.split(H, dim=2))  # 2 × (B, nh, T, hs)
        y = self.attend(qh, k, v, keys, False).transpose(1, 2).reshape(B, Q, H)  # (B, Q, H)
        return self.norm(xs + self.dropout(self.out(y)))  # (B, Q, H)

    def attend(self, q, k, v, mask: Optional[torch.Tensor], is_causal: bool) -> torch.Tensor:
        if q.device.type == "cpu":
            return self.explicit_attention(q, k, v, mask, is_causal)  # (B, nh, Tq, hs)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.attn_dropout if self.training else 0.0, is_causal=is_causal
        )  # (B, nh, Tq, hs)

    def explicit_attention(self, q, k, v, mask: Optional[torch.Tensor], is_causal: bool) -> torch.Tensor:
        """softmax(q kᵀ/√hs) v as plain matmuls. On CPU this beats SDPA (measured by `bertbench bench`:
        its CPU flash kernel is 1.7–2.9× slower in bf16, fwd+bwd, T 128–512, and with dropout it falls
        back to an unfused path); on CUDA, SDPA's kernels win and are used."""
        T = q.size(-2)
        scores = (q * q.size(-1) ** -0.5) @ k.transpose(-2, -1)  # (B, nh, T, T)
        if is_causal:
            mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()  # (T, T)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32)  # fp32 softmax, as SDPA's kernels
        probs = dropout(probs, self.attn_dropout, self.training)
        return probs.to(v.dtype) @ v  # (B, nh, T, hs)


class FeedForward(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.up = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.down = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.dropout = Dropout(cfg.dropout)
        self.norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # exact erf GELU, as BERT's released checkpoints were trained with (not the tanh approximation)
        return self.norm(x + self.dropout(self.down(F.gelu(self.up(x)))))  # (B, T, H)


class Layer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn = SelfAttention(cfg)
        self.ffn = FeedForward(cfg)

    def forward(
        self, x: torch.Tensor, mask: Optional[torch.Tensor], is_causal: bool, packing: Optional[Packing] = None
    ) -> torch.Tensor:
        return self.ffn(self.attn(x, mask, is_causal, packing))  # the FFN is position-wise: packed or not

    def forward_at(self, x: torch.Tensor, at: torch.Tensor, keys: Optional[torch.Tensor], packing: Optional[Packing]) -> torch.Tensor:
        return self.ffn(self.attn.forward_at(x, at, keys, packing))  # (B, Q, H)


@dataclass
class EncoderOutput:
    last_hidden_state: Optional[torch.Tensor]  # (B, T, H); None when the last layer ran at chosen positions only
    pooled: torch.Tensor  # (B, H)
    hidden_states: Optional[list[torch.Tensor]] = None  # embeddings + each layer, when asked for
    selected: Optional[torch.Tensor] = None  # (B, P, H) final states at `outputs_at`, when asked for


class BertModel(nn.Module):
    """Embeddings + encoder layers + pooler: the part every task shares."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embeddings = Embeddings(cfg)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.num_layers))
        self.pooler = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        output_hidden_states: bool = False,
        pooled_only: bool = False,
        outputs_at: Optional[torch.Tensor] = None,
        static: bool = False,
    ) -> EncoderOutput:
        """Only what is read, computed: the last layer's output is needed only where a head reads it.

        pooled_only: sequence-level heads read the pooled token alone. outputs_at: (B, P) positions per row
        whose final states are wanted (the masked LM's prediction slots), returned as `selected` (B, P, H);
        the pooled output is always computed. Either way the last layer runs its queries, output projection
        and FFN at those positions only (keys and values still come from every real token): the same numbers
        for up to ~1/L less work. Batches with ≥ 10% padding run packed (see Packing), unless `static`: then
        nothing is read back to the host (no packing, the mask always passed; see the module's docstring).
        """
        B, T = input_ids.shape
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        partial = pooled_only or outputs_at is not None
        if partial and output_hidden_states:
            raise ValueError("pooled_only/outputs_at skip the per-token states that output_hidden_states returns")
        if outputs_at is not None and self.cfg.causal:
            raise ValueError("prediction slots are the masked LM's; a causal model runs its last layer in full")
        mask, is_causal = attention_mask_for_sdpa(attention_mask, T, self.cfg.causal, input_ids.device, static)
        packing = None if static or not Packing.worth_it(attention_mask) else Packing(attention_mask, self.cfg.causal)
        x = self.embeddings(input_ids, token_type_ids, packing)  # (B, T, H), or (N, H) packed
        unpack = (lambda t: t) if packing is None else packing.pad  # noqa: E731
        states = [unpack(x)] if output_hidden_states else None
        for layer in self.layers[:-1] if partial else self.layers:
            x = layer(x, mask, is_causal, packing)
            if states is not None:
                states.append(unpack(x))
        if not partial:
            x = unpack(x)  # (B, T, H)
            return EncoderOutput(x, self.pool(x, attention_mask), states)
        at = self.pooled_position(attention_mask, B, T, input_ids.device)[:, None]  # (B, 1)
        at = at if outputs_at is None else torch.cat([at, outputs_at], 1)  # (B, 1 + P): the pooled token first
        # every real key: [CLS] and the masked positions see them all, as does a causal model's last real token
        keys = None if attention_mask is None else attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
        h = self.layers[-1].forward_at(x, at, keys, packing)  # (B, 1 + P, H)
        return EncoderOutput(None, torch.tanh(self.pooler(h[:, 0])), None, None if outputs_at is None else h[:, 1:])

    def pooled_position(self, attention_mask: Optional[torch.Tensor], B: int, T: int, device) -> torch.Tensor:
        """(B,) the token the pooler reads: [CLS]; a causal model has seen the whole input only at its last real token."""
        if not self.cfg.causal:
            return torch.zeros(B, dtype=torch.long, device=device)
        if attention_mask is None:
            return torch.full((B,), T - 1, dtype=torch.long, device=device)
        return attention_mask.long().sum(1) - 1

    def pool(self, hidden: torch.Tensor, attention_mask: Optional[torch.Tensor]) -> torch.Tensor:
        """dense + tanh at pooled_position."""
        B, T, _ = hidden.shape
        first = hidden[torch.arange(B, device=hidden.device), self.pooled_position(attention_mask, B, T, hidden.device)]  # (B, H)
        return torch.tanh(self.pooler(first))


class MLMHead(nn.Module):
    """dense + GELU + LayerNorm, then the decoder tied to the word embeddings, plus an output bias."""

    PADDED = "bias"  # the rows of the padded vocabulary

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.vocab_size = cfg.vocab_size
        self.bias = nn.Parameter(torch.zeros(padded_vocab(cfg.vocab_size)))  # padded as the word embedding
        self.register_state_dict_post_hook(_strip_rows)
        self.register_load_state_dict_pre_hook(_pad_rows)

    def transform(self, h: torch.Tensor) -> torch.Tensor:
        return self.norm(F.gelu(self.dense(h)))  # (..., H)

    def forward(self, h: torch.Tensor, word_weight: torch.Tensor) -> torch.Tensor:
        """(..., V_padded) logits, -inf in the padding columns: a softmax over them is the real vocabulary's,
        and no gradient reaches the padding rows. Slice [..., :vocab_size] for the real logits."""
        # The decoder weight is passed in, not stored: tied to the word embeddings without a second
        # state-dict entry (safetensors refuses aliased tensors).
        h = self.transform(h)  # (..., H)
        bias, extra = self.bias, self.bias.numel() - self.vocab_size
        if extra:
            bias = torch.cat([bias[: self.vocab_size], bias.new_full((extra,), float("-inf"))])
        return F.linear(h, word_weight, bias)  # (..., V_padded)

    def loss(self, h: torch.Tensor, word_weight: torch.Tensor, targets: torch.Tensor,
             predictions: bool = False) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """(the mean cross-entropy over targets ≠ IGNORE_INDEX, the argmax per position when `predictions`):
        forward's logits fed to F.cross_entropy, without the logits (bertbench.model.fused_head)."""
        return linear_cross_entropy(self.transform(h), word_weight, self.bias, targets, self.vocab_size, predictions)


@dataclass
class PreTrainingOutput:
    """Also subscriptable (`out["lm_logits"]`), like transformers' ModelOutput. `lm_*` is the language model
    of either objective: the masked LM's, or the causal LM's next-token predictions."""

    last_hidden_state: Optional[torch.Tensor]  # (B, T, H); None with MLM labels (last layer at masked positions only)
    lm_logits: Optional[torch.Tensor]  # (B, T, V), or (N, V) at the N labelled positions when labels were given;
    # None when the fused head computed the loss (forward's logits=False)
    nsp_logits: Optional[torch.Tensor]  # (B, 2); None for a model without the NSP head
    loss: Optional[torch.Tensor] = None
    lm_loss: Optional[torch.Tensor] = None
    nsp_loss: Optional[torch.Tensor] = None
    lm_targets: Optional[torch.Tensor] = None  # (N,) labels matching lm_logits' rows when labels were given
    # The static step gives lm_logits (B, P, V) at the fixed slots and lm_targets (B, P), IGNORE_INDEX at
    # unused slots (a causal model: (B, T, V) and its (B, T) labels).
    lm_predictions: Optional[torch.Tensor] = None  # argmax per row of lm_targets' shape, when asked for

    def __getitem__(self, key: str):
        return getattr(self, key)


class BertForPreTraining(nn.Module):
    """BERT with its pre-training heads: the LM head (masked LM, or next-token LM when causal) and, with
    `nsp=True` (the objective "mlm+nsp", `config.trains_nsp`), the NSP head. A model trained without NSP has
    no NSP head at all: no parameters, no state-dict keys, nothing computed.

    `static` (see the module's docstring) is an argument of the call, not a mode of the model: tests/test_static_step.py
    checks both forms' loss and gradients against each other and transformers.

    The LM head stays `self.mlm` for either objective: its state-dict keys (`mlm.*`) are what checkpoints
    hold and map to HF's `cls.predictions.*`, the head transformers uses for its masked and causal LMs alike."""

    def __init__(self, cfg: ModelConfig, nsp: bool = True):
        super().__init__()
        self.cfg = cfg
        self.bert = BertModel(cfg)
        self.mlm = MLMHead(cfg)
        # The NSP head is built and initialised even when it is dropped: the random draws stay those of BERT
        # with both heads, so a seed gives a model without the head the very weights (and the training run
        # after it the very dropout stream) that it gave before the head was optional.
        nsp_head = nn.Linear(cfg.hidden_size, 2)
        self.nsp = nsp_head if nsp else None
        self.apply(self._init_weights)
        if not nsp:
            self._init_weights(nsp_head)  # where apply() would have reached it: last

    @property
    def has_nsp(self) -> bool:
        return self.nsp is not None

    def _init_weights(self, module: nn.Module) -> None:
        # BERT's initialisation: N(0, 0.02) weights, zero biases, LayerNorm (1, 0), zero padding row.
        std = self.cfg.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            rows = self.cfg.vocab_size if module is self.bert.embeddings.word else module.num_embeddings
            nn.init.normal_(module.weight[:rows], 0.0, std)  # the vocabulary's padding rows stay zero
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(self, input_ids: torch.Tensor, token_type_ids: Optional[torch.Tensor] = None,
                attention_mask: Optional[torch.Tensor] = None, lm_labels: Optional[torch.Tensor] = None,
                nsp_labels: Optional[torch.Tensor] = None, lm_positions: Optional[torch.Tensor] = None,
                static: bool = False, logits: bool = True, predictions: bool = False) -> PreTrainingOutput:
        """The pre-training forward: training, held-out evaluation and `bench pretrain` call it (compile_step compiles it).

        Masked LM: lm_labels (B, P), the labels of P prediction slots per row at lm_positions (B, P), as the
        collators make them (`bertbench.data.masking.fixed_slots`); (B, T) labels without positions are put
        in slots here. The last layer runs at [CLS] and the slots only. Causal LM: lm_labels (B, T).
        static: no value read back to the host (see the module's docstring): lm_logits and lm_targets keep
        the labels' shape, (B, P|T, V) and (B, P|T), IGNORE_INDEX where nothing is predicted. Otherwise only
        the labelled positions are projected onto the vocabulary: (N, V) and (N,), row-major. Either way the
        LM loss is the mean over the labelled positions, and NSP's is added (the paper: mean MLM + mean NSP).
        logits=False (training and held-out evaluation), with labels: the loss comes from the head fused with it
        (bertbench.model.fused_head: the same numbers, without the logits) where it pays off (not an fp32 CPU
        step: fused_head.pays_off), and lm_logits is None; the caller needs no logits either way. predictions:
        lm_predictions holds the argmax per row (lm_targets' shape) for accuracies."""
        if nsp_labels is not None and not self.has_nsp:
            raise ValueError("nsp_labels given to a model without an NSP head (built with nsp=False)")
        if lm_labels is not None and lm_positions is None and not self.cfg.causal:
            if static or lm_labels.shape != input_ids.shape:
                raise ValueError("lm_labels: (B, T), or (B, P) prediction slots with lm_positions (always when static)")
            lm_positions, lm_labels = fixed_slots(lm_labels, slot_count(lm_labels))
        if lm_positions is not None and (lm_labels is None or lm_positions.shape != lm_labels.shape):
            raise ValueError("lm_positions: (B, P) slots of a masked LM, with lm_labels of the same shape")
        enc = self.bert(input_ids, token_type_ids, attention_mask, outputs_at=lm_positions, static=static)
        h = enc.last_hidden_state if lm_positions is None else enc.selected  # (B, T|P, H)
        nsp_logits = None if self.nsp is None else self.nsp(enc.pooled)  # (B, 2)
        targets = lm_labels
        if lm_labels is not None and not static:  # ~15% of MLM's positions: for small models most of the FLOPs
            selected = lm_labels != IGNORE_INDEX
            h, targets = h[selected], lm_labels[selected]  # (N, H), (N,)
        loss = lm_loss = nsp_loss = lm_logits = lm_predictions = None
        word = self.bert.embeddings.word.weight
        # inductor fuses its own; an fp32 CPU step was measured faster unfused (fused_head.pays_off)
        if lm_labels is not None and not logits and not torch.compiler.is_compiling() and fused_head.pays_off(h):
            loss, lm_predictions = self.mlm.loss(h, word, targets, predictions)
        else:
            lm_logits = self.mlm(h, word)  # (..., V_padded)
        if lm_labels is not None and lm_logits is not None:
            loss = F.cross_entropy(lm_logits.flatten(0, -2).float(), targets.reshape(-1), ignore_index=IGNORE_INDEX)
        lm_loss = loss
        if predictions and lm_logits is not None:
            lm_predictions = lm_logits[..., : self.cfg.vocab_size].argmax(-1)
        if nsp_labels is not None:
            nsp_loss = F.cross_entropy(nsp_logits.float(), nsp_labels)
            loss = nsp_loss if loss is None else loss + nsp_loss
        if lm_logits is not None:
            lm_logits = lm_logits[..., : self.cfg.vocab_size]  # a view without the padding columns
        return PreTrainingOutput(enc.last_hidden_state, lm_logits, nsp_logits, loss, lm_loss, nsp_loss, targets, lm_predictions)


# ----------------------------------------------------------------------------------------------
# Task heads for fine-tuning: one small output layer per task *type* on the shared encoder.


class SequenceHead(nn.Module):
    """Classification (num_labels ≥ 2) or regression (num_labels = 1) from the pooled output."""

    def __init__(self, cfg: ModelConfig, num_labels: int):
        super().__init__()
        self.dropout = Dropout(cfg.dropout)
        self.out = nn.Linear(cfg.hidden_size, num_labels)

    def forward(self, enc: EncoderOutput) -> torch.Tensor:
        return self.out(self.dropout(enc.pooled))  # (B, num_labels)


class MultipleChoiceHead(SequenceHead):
    """One score per choice from the pooled output; the caller reshapes (B·C,) → (B, C)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg, 1)

    def forward(self, enc: EncoderOutput) -> torch.Tensor:
        return self.out(self.dropout(enc.pooled)).squeeze(-1)  # (B·C,)


class SpanHead(nn.Module):
    """Start and end logits at every position (SQuAD); [CLS] doubles as the no-answer span."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.out = nn.Linear(cfg.hidden_size, 2)

    def forward(self, enc: EncoderOutput) -> torch.Tensor:
        return self.out(enc.last_hidden_state)  # (B, T, 2)


class TokenHead(SequenceHead):
    """A label per position (NER); only each word's first sub-token carries a loss."""

    def forward(self, enc: EncoderOutput) -> torch.Tensor:
        return self.out(self.dropout(enc.last_hidden_state))  # (B, T, num_labels)


def compile_step(model: BertForPreTraining, on_compiled: Optional[Callable[[float], None]] = None,
                 **options) -> Callable[..., PreTrainingOutput]:
    """The pre-training forward under torch.compile, for the training step to call with static=True; the model
    itself is untouched (evaluation calls it eagerly; parameters and state dict are the model's own).

    fullgraph: the whole step is one graph or an error (a host sync would break it); dynamic=False: one graph
    per input shape, and the static batches have one shape per phase, so one compile per phase. Forward and
    loss are compiled, and AOTAutograd compiles their backward; the optimiser step stays eager. The compile
    happens at the first call: `on_compiled(seconds)` is told how long that call took on the host (the compile,
    and the launch of the step's kernels)."""
    compiled = torch.compile(model.forward, fullgraph=True, dynamic=False, **options)
    timed = on_compiled is not None

    def step(*args, **kwargs) -> PreTrainingOutput:
        nonlocal timed
        t0 = time.perf_counter()
        out = compiled(*args, **kwargs)
        if timed:
            timed = False
            on_compiled(time.perf_counter() - t0)
        return out

    return step


def init_head(head: nn.Module, std: float = 0.02) -> nn.Module:
    for m in head.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, std)
            nn.init.zeros_(m.bias)
    return head


def count_parameters(module: nn.Module) -> int:
    """Parameters of the real vocabulary: the padding rows (zeros, never trained) are not counted."""
    padding = sum(m.word.weight[m.vocab_size:].numel() for m in module.modules() if isinstance(m, Embeddings))
    padding += sum(m.bias.numel() - m.vocab_size for m in module.modules() if isinstance(m, MLMHead))
    return sum(p.numel() for p in module.parameters()) - padding


def flops_per_token(cfg: ModelConfig, seq_len: int, predicted_share: float = 1.0, last_layer_share: float = 1.0,
                    vocab_padding: bool = True) -> float:
    """Training FLOPs per token (forward + backward = 3× forward), counting matmuls only.

    predicted_share: the share of positions that go through the vocabulary projection.
    last_layer_share: the share of positions at which the last layer computes its output (queries, output
    projection, FFN); its keys and values are computed at every position (see BertModel.forward).
    vocab_padding: the decoder projects onto the padded vocabulary (what the unfused head executes: a compiled
    step, or a caller asking for logits); False counts the real vocabulary (what the head fused with its loss
    executes, and an unpadded model, transformers').
    """
    H, L, I = cfg.hidden_size, cfg.num_layers, cfg.intermediate_size
    V = padded_vocab(cfg.vocab_size) if vocab_padding else cfg.vocab_size
    attention = 2 * 2 * seq_len * H  # QKᵀ and AV, per query
    queries_out_ffn = 2 * (H * H + H * H + 2 * H * I)
    keys_values = 2 * (2 * H * H)
    per_layer = keys_values + queries_out_ffn + attention
    last = keys_values + last_layer_share * (queries_out_ffn + attention)
    head = predicted_share * 2 * (H * H + H * V)
    return 3.0 * ((L - 1) * per_layer + last + head)


__all__ = ["Packing", "BertModel", "BertForPreTraining", "EncoderOutput", "PreTrainingOutput", "SequenceHead",
           "MultipleChoiceHead", "SpanHead", "TokenHead", "IGNORE_INDEX", "init_head", "count_parameters",
           "flops_per_token", "padded_vocab", "VOCAB_MULTIPLE", "compile_step"]
