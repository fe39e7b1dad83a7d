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
  token for sequence-level heads (`pooled_only`), the masked positions and [CLS] for MLM (+ NSP).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from bertbench.config import ModelConfig
from bertbench.data import IGNORE_INDEX  # positions without a loss


class _BitsDropout(torch.autograd.Function):
    """Dropout with four elements per 64-bit random draw (16 bits each); keeps the bool mask for backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float) -> torch.Tensor:
        n = x.numel()
        bits = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-(2**63), None)
        keep = bits.view(torch.int16)[:n].view(x.shape) >= -32768 + round(p * 65536)  # P(keep) = 1 - p ± 1e-5
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - p)
        return x.mul(keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """F.dropout, faster on CPU: torch's CPU kernel draws one Bernoulli sample per element (~25% of a mini
    step measured here); 16 random bits per element are plenty for p = 0.1."""
    if not training or p == 0.0:
        return x
    return _BitsDropout.apply(x, p) if x.device.type == "cpu" else F.dropout(x, p, True)


class Dropout(nn.Module):
    """nn.Dropout with the faster CPU kernel above; no parameters, so state dicts are unchanged."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


@dataclass
class Bucket:
    """Rows of similar length, attended together on their own (nb, T_b) grid."""

    rows: torch.Tensor  # (nb,) batch rows in this bucket
    T: int  # the grid's length: the furthest real token among these rows, + 1
    src: torch.Tensor  # (n,) packed rows of the bucket's real tokens, in grid order
    dst: torch.Tensor  # (n,) where they go in the flattened (nb·T) grid
    mask: Optional[torch.Tensor]  # attention mask for the grid, as attention_mask_for_sdpa makes it
    is_causal: bool


class Packing:
    """The real tokens of a padded (B, T) batch, so that no work is spent on padding.

    Everything in a layer except attention's QKᵀ and AV acts on each position alone, so it runs on the N
    real tokens packed as (N, H) instead of (B, T, H). On GLUE-like batches (lengths 20–128, padded to the
    longest) that skips ~40% of the FLOPs. For attention the rows are sorted by length into a few buckets,
    and each bucket's q, k, v are scattered onto its own (nb, T_b) grid (zeros at padding, masked as keys):
    the padded QKᵀ, softmax and dropout shrink with T_b². The unpadding idea of FlashAttention's varlen
    kernels and Hugging Face's padding-free path, in plain tensor ops. Outputs at padded positions come back
    as zeros rather than the finite garbage a padded model computes there; nothing reads them (heads and
    losses skip padding). tests/test_packing.py checks outputs and gradients against the padded path and HF.
    """

    MIN_PADDING = 0.1  # below this share of padding the gathers cost more than they save (bench finetune)
    BUCKETS = 4  # attention buckets per batch, each of at least MIN_BUCKET_ROWS rows
    MIN_BUCKET_ROWS = 4

    def __init__(self, attention_mask: torch.Tensor, causal: bool = False):
        self.B, self.T = B, T = attention_mask.shape
        dev = attention_mask.device
        real = attention_mask.bool()
        self.index = real.reshape(-1).nonzero().squeeze(1)  # (N,) flat positions of real tokens
        self.positions = self.index % T  # (N,) position ids of the packed tokens
        n = self.index.numel()
        self.row_of = torch.full((B * T,), -1, dtype=torch.long, device=dev)  # flat position → packed row
        self.row_of[self.index] = torch.arange(n, device=dev)
        extent = (real * torch.arange(1, T + 1, device=dev)).amax(1)  # (B,) last real position + 1
        order = extent.argsort(descending=True)
        groups = max(1, min(self.BUCKETS, B // self.MIN_BUCKET_ROWS))
        self.buckets: list[Bucket] = []
        for rows in order.tensor_split(groups):
            Tb = max(1, int(extent[rows].max()))  # a host sync per bucket, once per forward
            m = attention_mask[rows, :Tb]  # (nb, Tb)
            dst = m.reshape(-1).bool().nonzero().squeeze(1)  # (n_b,)
            src = self.row_of[(rows[:, None] * T + torch.arange(Tb, device=dev)).reshape(-1)[dst]]  # (n_b,)
            mask, is_causal = attention_mask_for_sdpa(m, Tb, causal, dev)
            self.buckets.append(Bucket(rows, Tb, src, dst, mask, is_causal))
        # merge() concatenates the buckets' tokens in bucket order; this puts them back
        self.token_order = self._inverse(torch.cat([b.src for b in self.buckets]))  # (N,)

    @staticmethod
    def _inverse(perm: torch.Tensor) -> torch.Tensor:
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(perm.numel(), device=perm.device)
        return inv

    @staticmethod
    def worth_it(attention_mask: Optional[torch.Tensor]) -> bool:
        if attention_mask is None:
            return False
        return float(attention_mask.float().mean()) <= 1.0 - Packing.MIN_PADDING  # one host sync per forward

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(self.B * self.T, -1).index_select(0, self.index)  # (B, T, C) → (N, C)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        out = x.new_zeros(self.B * self.T, x.size(-1)).index_copy(0, self.index, x)  # (N, C) → (B·T, C)
        return out.view(self.B, self.T, -1)  # (B, T, C)

    def grid(self, x: torch.Tensor, b: Bucket) -> torch.Tensor:
        """(N, C) packed → (nb, T_b, C), zeros at padding."""
        nb, C = b.rows.numel(), x.size(-1)
        picked = x.index_select(0, b.src)  # (n_b, C)
        if b.dst.numel() == nb * b.T:  # no padding in this bucket
            return picked.view(nb, b.T, C)
        return x.new_zeros(nb * b.T, C).index_copy(0, b.dst, picked).view(nb, b.T, C)

    def merge(self, grids: list[torch.Tensor]) -> torch.Tensor:
        """Each bucket's (nb, T_b, C) → the packed (N, C), real tokens only."""
        parts = [g.reshape(-1, g.size(-1)).index_select(0, b.dst) for g, b in zip(grids, self.buckets)]
        return torch.cat(parts).index_select(0, self.token_order)

    def rows_of(self, flat_positions: torch.Tensor) -> torch.Tensor:
        """Where flat padded positions (b·T + t, all real tokens) sit among the N packed rows."""
        return self.row_of[flat_positions]


class Embeddings(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.word = nn.Embedding(cfg.vocab_size, cfg.hidden_size, padding_idx=cfg.pad_token_id)
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

    def forward_at(self, x: torch.Tensor, where: "Queries", packing: Optional[Packing]) -> torch.Tensor:
        """The output at M chosen positions only, (M, H); keys and values still come from every real token.

        For the last layer, when only some positions are read: [CLS] for sequence heads, the masked positions
        (and [CLS]) for pre-training. Queries sit on a small (B, M_max) grid, one row per sequence.
        """
        H = x.size(-1)
        xs = x.reshape(-1, H)[where.rows]  # (M, H) the residual stream at the chosen positions
        q = F.linear(xs, self.qkv.weight[:H], self.qkv.bias[:H])  # (M, H): queries only where asked
        kv = F.linear(x, self.qkv.weight[H:], self.qkv.bias[H:])  # (B, T, 2H) or (N, 2H)
        if packing is not None:
            kv = packing.pad(kv)  # (B, T, 2H)
        B, T, hs = kv.size(0), kv.size(1), H // self.nh
        grid = q.new_zeros(B, where.width, H).index_put((where.batch, where.slot), q)  # (B, M_max, H)
        qh = grid.view(B, where.width, self.nh, hs).transpose(1, 2)  # (B, nh, M_max, hs)
        k, v = (t.view(B, T, self.nh, hs).transpose(1, 2) for t in kv.split(H, dim=2))  # 2 × (B, nh, T, hs)
        y = self.attend(qh, k, v, where.mask, False).transpose(1, 2).reshape(B, where.width, H)  # (B, M_max, H)
        y = y[where.batch, where.slot]  # (M, H)
        return self.norm(xs + self.dropout(self.out(y)))  # (M, H)

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

    def forward_at(self, x: torch.Tensor, where: "Queries", packing: Optional[Packing]) -> torch.Tensor:
        return self.ffn(self.attn.forward_at(x, where, packing))  # (M, H)


def attention_mask_for_sdpa(
    attention_mask: Optional[torch.Tensor], T: int, causal: bool, device: torch.device
) -> tuple[Optional[torch.Tensor], bool]:
    """Turn a (B, T) 1/0 padding mask into what SDPA takes: a bool mask (True = may attend) or None.

    Without padding we pass no mask at all (SDPA then picks its fastest kernel); SDPA refuses
    `is_causal` together with a mask, so causal + padding becomes one combined bool mask.
    """
    if attention_mask is None or bool(attention_mask.all()):
        return None, causal
    keys = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
    if causal:
        tri = torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)
        keys = keys & tri  # (B, 1, T, T)
    return keys, False


class Queries:
    """M chosen positions of a (B, T) batch, laid out for `SelfAttention.forward_at`.

    wanted: (B, T) bool. Each chosen position becomes a query in slot j of its row of a (B, M_max) grid;
    it attends every real key of its sequence, and only keys at or before it when causal. Unused slots
    attend the real keys too (finite, never read).
    """

    def __init__(self, wanted: torch.Tensor, attention_mask: Optional[torch.Tensor], causal: bool, packing: Optional[Packing]):
        B, T = wanted.shape
        dev = wanted.device
        self.batch, self.position = wanted.nonzero(as_tuple=True)  # (M,) each, row-major
        flat = self.batch * T + self.position  # (M,)
        self.rows = flat if packing is None else packing.rows_of(flat)  # (M,) rows of x's flattened form
        counts = torch.bincount(self.batch, minlength=B)  # (B,)
        self.width = max(1, int(counts.max()))  # M_max; a host sync, once per forward
        self.slot = torch.arange(self.batch.numel(), device=dev) - (counts.cumsum(0) - counts)[self.batch]  # (M,)
        keys = None if attention_mask is None else attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
        if causal:
            last = torch.full((B, self.width), T - 1, device=dev).index_put((self.batch, self.slot), self.position)  # (B, M_max)
            upto = torch.arange(T, device=dev)[None, None, :] <= last[:, :, None]  # (B, M_max, T)
            keys = upto[:, None] if keys is None else keys & upto[:, None]  # (B, 1, M_max, T)
        self.mask = keys


@dataclass
class EncoderOutput:
    last_hidden_state: Optional[torch.Tensor]  # (B, T, H); None when the last layer ran at chosen positions only
    pooled: torch.Tensor  # (B, H)
    hidden_states: Optional[list[torch.Tensor]] = None  # embeddings + each layer, when asked for
    selected: Optional[torch.Tensor] = None  # (M, H) final states at `outputs_at`, row-major, when asked for


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
    ) -> EncoderOutput:
        """Only what is read, computed: the last layer's output is needed only where a head reads it.

        pooled_only: sequence-level heads read the pooled token alone. outputs_at: (B, T) bool, the real
        positions whose final state is wanted (the masked positions of MLM), returned as `selected`; the
        pooled output is always computed. Either way the last layer runs its queries, output projection and
        FFN at those positions only (keys and values still come from every real token): the same numbers
        for up to ~1/L less work. Batches with ≥ 10% padding run packed (see Packing).
        """
        B, T = input_ids.shape
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        partial = pooled_only or outputs_at is not None
        if partial and output_hidden_states:
            raise ValueError("pooled_only/outputs_at skip the per-token states that output_hidden_states returns")
        mask, is_causal = attention_mask_for_sdpa(attention_mask, T, self.cfg.causal, input_ids.device)
        packing = Packing(attention_mask, self.cfg.causal) if Packing.worth_it(attention_mask) else None
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
        pool_at = self.pooled_position(attention_mask, B, T, input_ids.device)  # (B,)
        wanted = torch.zeros(B, T, dtype=torch.bool, device=input_ids.device)
        if outputs_at is not None:
            if attention_mask is not None and bool((outputs_at & ~attention_mask.bool()).any()):
                raise ValueError("outputs_at includes padded positions; labels belong on real tokens")
            wanted |= outputs_at
        wanted[torch.arange(B, device=wanted.device), pool_at] = True
        where = Queries(wanted, attention_mask, self.cfg.causal, packing)
        h = self.layers[-1].forward_at(x, where, packing)  # (M, H)
        row = torch.full((B, T), -1, dtype=torch.long, device=h.device)
        row[where.batch, where.position] = torch.arange(h.size(0), device=h.device)  # (B, T) → row of h
        pooled = torch.tanh(self.pooler(h[row[torch.arange(B, device=h.device), pool_at]]))  # (B, H)
        selected = None if outputs_at is None else h[row[outputs_at]]  # (M_sel, H), row-major
        return EncoderOutput(None, pooled, None, selected)

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

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def forward(self, h: torch.Tensor, word_weight: torch.Tensor) -> torch.Tensor:
        # The decoder weight is passed in, not stored: tied to the word embeddings without a second
        # state-dict entry (safetensors refuses aliased tensors).
        h = self.norm(F.gelu(self.dense(h)))  # (..., H)
        return F.linear(h, word_weight, self.bias)  # (..., V)


@dataclass
class PreTrainingOutput:
    """Also subscriptable (`out["lm_logits"]`), like transformers' ModelOutput. `lm_*` is the language model
    of either objective: the masked LM's, or the causal LM's next-token predictions."""

    last_hidden_state: Optional[torch.Tensor]  # (B, T, H); None with MLM labels (last layer at masked positions only)
    lm_logits: torch.Tensor  # (B, T, V), or (N, V) at the N labelled positions when labels were given
    nsp_logits: Optional[torch.Tensor]  # (B, 2); None for a model without the NSP head
    loss: Optional[torch.Tensor] = None
    lm_loss: Optional[torch.Tensor] = None
    nsp_loss: Optional[torch.Tensor] = None
    lm_targets: Optional[torch.Tensor] = None  # (N,) labels matching lm_logits' rows when labels were given

    def __getitem__(self, key: str):
        return getattr(self, key)


class BertForPreTraining(nn.Module):
    """BERT with its pre-training heads: the LM head (masked LM, or next-token LM when causal) and, with
    `nsp=True` (the objective "mlm+nsp", `config.trains_nsp`), the NSP head. A model trained without NSP has
    no NSP head at all: no parameters, no state-dict keys, nothing computed.

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
            nn.init.normal_(module.weight, 0.0, std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        lm_labels: Optional[torch.Tensor] = None,
        nsp_labels: Optional[torch.Tensor] = None,
    ) -> PreTrainingOutput:
        if nsp_labels is not None and not self.has_nsp:
            raise ValueError("nsp_labels given to a model without an NSP head (built with nsp=False)")
        selected = None if lm_labels is None else lm_labels != IGNORE_INDEX  # (B, T)
        # MLM reads ~15% of positions: the last layer runs only there (and at [CLS] for NSP). A causal LM's
        # loss covers every position, so it runs in full.
        sparse = selected is not None and not self.cfg.causal
        enc = self.bert(input_ids, token_type_ids, attention_mask, outputs_at=selected if sparse else None)
        h = enc.last_hidden_state  # (B, T, H), or None when the last layer ran at the masked positions only
        nsp_logits = None if self.nsp is None else self.nsp(enc.pooled)  # (B, 2)
        lm_loss = nsp_loss = loss = targets = None
        if lm_labels is None:
            lm_logits = self.mlm(h, self.bert.embeddings.word.weight)  # (B, T, V)
        else:
            # Project onto the vocabulary only where a label is: ~15% of positions for MLM. For small
            # models this projection is most of the step's FLOPs, and the rest would be thrown away.
            targets = lm_labels[selected]  # (N,)
            h_sel = enc.selected if sparse else h[selected]  # (N, H)
            lm_logits = self.mlm(h_sel, self.bert.embeddings.word.weight)  # (N, V)
            lm_loss = F.cross_entropy(lm_logits.float(), targets)
            loss = lm_loss
        if nsp_labels is not None:
            nsp_loss = F.cross_entropy(nsp_logits.float(), nsp_labels)
            loss = nsp_loss if loss is None else loss + nsp_loss  # the paper: mean MLM + mean NSP
        return PreTrainingOutput(h, lm_logits, nsp_logits, loss, lm_loss, nsp_loss, targets)


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


class MultipleChoiceHead(nn.Module):
    """One score per choice from the pooled output; the caller reshapes (B·C,) → (B, C)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.dropout = Dropout(cfg.dropout)
        self.out = nn.Linear(cfg.hidden_size, 1)

    def forward(self, enc: EncoderOutput) -> torch.Tensor:
        return self.out(self.dropout(enc.pooled)).squeeze(-1)  # (B·C,)


class SpanHead(nn.Module):
    """Start and end logits at every position (SQuAD); [CLS] doubles as the no-answer span."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.out = nn.Linear(cfg.hidden_size, 2)

    def forward(self, enc: EncoderOutput) -> torch.Tensor:
        return self.out(enc.last_hidden_state)  # (B, T, 2)


class TokenHead(nn.Module):
    """A label per position (NER); only each word's first sub-token carries a loss."""

    def __init__(self, cfg: ModelConfig, num_labels: int):
        super().__init__()
        self.dropout = Dropout(cfg.dropout)
        self.out = nn.Linear(cfg.hidden_size, num_labels)

    def forward(self, enc: EncoderOutput) -> torch.Tensor:
        return self.out(self.dropout(enc.last_hidden_state))  # (B, T, num_labels)


def init_head(head: nn.Module, std: float = 0.02) -> nn.Module:
    for m in head.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, std)
            nn.init.zeros_(m.bias)
    return head


def flops_per_token(cfg: ModelConfig, seq_len: int, predicted_share: float = 1.0, last_layer_share: float = 1.0) -> float:
    """Training FLOPs per token (forward + backward = 3× forward), counting matmuls only.

    predicted_share: the share of positions that go through the vocabulary projection.
    last_layer_share: the share of positions at which the last layer computes its output (queries, output
    projection, FFN); its keys and values are computed at every position (see BertModel.forward).
    """
    H, L, I, V = cfg.hidden_size, cfg.num_layers, cfg.intermediate_size, cfg.vocab_size
    attention = 2 * 2 * seq_len * H  # QKᵀ and AV, per query
    queries_out_ffn = 2 * (H * H + H * H + 2 * H * I)
    keys_values = 2 * (2 * H * H)
    per_layer = keys_values + queries_out_ffn + attention
    last = keys_values + last_layer_share * (queries_out_ffn + attention)
    head = predicted_share * 2 * (H * H + H * V)
    return 3.0 * ((L - 1) * per_layer + last + head)


__all__ = [
    "Packing", "BertModel", "BertForPreTraining", "EncoderOutput", "PreTrainingOutput", "SequenceHead",
    "MultipleChoiceHead", "SpanHead", "TokenHead", "IGNORE_INDEX", "init_head",
    "flops_per_token",
]
