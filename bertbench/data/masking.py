"""Masked-LM masking (the paper's procedure, vectorised) and the batch collators.

Per sequence, as google-research/bert: candidates are all non-special tokens ([PAD] [UNK] [CLS] [SEP]
[MASK] never are); the number to predict is min(max_predictions_per_seq, max(1, round(n_candidates ×
mask_ratio))) — the original rounds len(tokens) × ratio, [CLS]/[SEP] included; we count candidates only,
so `mask_ratio` is exactly the share of real tokens predicted. Candidates (whole words with
`whole_word_mask`: a word is a piece plus the "##" pieces after it) are taken in a random order, a word
being skipped when it would overshoot the budget. Each selected position independently becomes [MASK]
with p = MASK%, keeps its token with p = SAME%, else a token drawn uniformly from the vocabulary without
special and `[unusedN]`-style bracketed tokens (the original draws from the whole vocabulary).

Selection is a random score per word + a sort per row (plus a cumulative sum over word lengths with
`whole_word_mask`) — torch ops over the whole batch, no loop per token.

Determinism: the collator draws each row's mask from its own counter-based stream (`RowDraws`), keyed by
`batch_seed(seed, epoch, [global row, instance index])`; the value at position t depends on the key and t
alone, never on the batch's other rows or its padded width. Call `collator.set_epoch(epoch)` each epoch (or
step, like `DistributedSampler.set_epoch`) and pass the rows' places in the global batch (`rows=`): a
resumed run, a run on any number of processes, or one with any number of DataLoader workers draws the same
masks for the same global rows.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F

from bertbench.config import DataConfig, check_objective, is_causal, trains_nsp
from bertbench.data import IGNORE_INDEX


@dataclass
class TokenTables:
    """Vocabulary lookups as tensors, indexed by token id (small and picklable: no tokenizer inside)."""

    is_special: torch.Tensor  # (V,) bool — never selected: [PAD] [UNK] [CLS] [SEP] [MASK]
    is_continuation: torch.Tensor  # (V,) bool — "##" pieces, for whole-word masking
    random_ids: torch.Tensor  # (K,) long — replacement vocabulary: no special or bracketed tokens
    pad_id: int
    mask_id: int

    @classmethod
    def from_tokenizer(cls, tokenizer) -> "TokenTables":
        vocab = tokenizer.vocab()
        size = max(vocab.values()) + 1
        is_special = torch.zeros(size, dtype=torch.bool)
        is_special[list(tokenizer.special_ids)] = True
        is_continuation = torch.zeros(size, dtype=torch.bool)
        is_continuation[[i for token, i in vocab.items() if token.startswith("##")]] = True
        bracketed = torch.zeros(size, dtype=torch.bool)
        bracketed[[i for token, i in vocab.items()
                   if len(token) > 2 and token.startswith("[") and token.endswith("]")]] = True
        random_ids = torch.nonzero(~(is_special | bracketed)).squeeze(1)
        return cls(is_special, is_continuation, random_ids, tokenizer.pad_id, tokenizer.mask_id)


class RowDraws:
    """Random numbers for a (B, ·) batch, one counter-based stream per row (SplitMix64 at position
    (call, t) of the row's key): row i's values depend on keys[i] alone, so a row draws the same mask
    whatever batch it is collated in, whatever that batch's padded width. Each call takes the next stream."""

    _GOLDEN = np.uint64(0x9E3779B97F4A7C15)

    def __init__(self, keys):
        self.keys = np.asarray(keys, dtype=np.uint64)
        self.calls = 0

    def bits(self, shape: tuple[int, int]) -> np.ndarray:
        B, T = shape
        if B != len(self.keys):
            raise ValueError(f"RowDraws: {len(self.keys)} row keys for a batch of {B} rows")
        counter = np.uint64(self.calls << 40) + np.arange(1, T + 1, dtype=np.uint64)  # (T,)
        self.calls += 1
        z = self.keys[:, None] + counter[None, :] * self._GOLDEN  # (B, T); uint64 arithmetic wraps
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return (z ^ (z >> np.uint64(31))) >> np.uint64(11)  # 53 random bits

    def uniform(self, shape: tuple[int, int]) -> torch.Tensor:
        return torch.from_numpy(self.bits(shape).astype(np.float64) * 2.0**-53)

    def integers(self, n: int, shape: tuple[int, int]) -> torch.Tensor:
        return torch.from_numpy((self.bits(shape) % np.uint64(n)).astype(np.int64))  # bias < n / 2^53


def _uniform(generator, shape: tuple[int, int]) -> torch.Tensor:
    return generator.uniform(shape) if isinstance(generator, RowDraws) else torch.rand(shape, generator=generator)


def _integers(generator, n: int, shape: tuple[int, int]) -> torch.Tensor:
    return (generator.integers(n, shape) if isinstance(generator, RowDraws)
            else torch.randint(n, shape, generator=generator))


def select_positions(input_ids: torch.Tensor, tables: TokenTables, params: DataConfig, generator) -> torch.Tensor:
    """(B, T) bool: the positions to predict."""
    B, T = input_ids.shape
    cand = ~tables.is_special[input_ids]  # (B, T)
    n_cand = cand.sum(1)  # (B,)
    n_pred = torch.round(n_cand.double() * params.mask_ratio).long().clamp(min=1)  # round half to even, as Python
    if params.max_predictions_per_seq is not None:
        n_pred = n_pred.clamp(max=params.max_predictions_per_seq)
    n_pred = torch.minimum(n_pred, n_cand)
    if params.whole_word_mask:
        cont = tables.is_continuation[input_ids] & cand
        prev_cand = F.pad(cand[:, :-1], (1, 0), value=False)
        start = cand & ~(cont & prev_cand)  # a "##" piece right after [SEP] starts its own word
    else:
        start = cand
    word = torch.cumsum(start.long(), 1) - 1  # (B, T) word index of each position
    word = torch.where(cand, word, torch.full_like(word, T))  # non-candidates → dummy word T
    word_len = torch.zeros(B, T + 1, dtype=torch.long).scatter_add_(1, word, torch.ones_like(word))
    word_len[:, T] = 0
    scores = _uniform(generator, (B, T + 1))
    scores.masked_fill_(word_len == 0, 2.0)  # empty word slots sort last
    order = scores.argsort(dim=1, stable=True)  # (B, T+1) words in random order; ties by word index, not by width
    lens = word_len.gather(1, order)
    chosen = torch.zeros(B, T + 1, dtype=torch.bool)
    budget = n_pred.clone()
    while True:  # take words in order while they fit, skipping those that overshoot (≤ a few passes)
        eligible = ~chosen & (lens > 0) & (lens <= budget[:, None])
        csum = torch.cumsum(lens * eligible, 1)
        take = eligible & (csum <= budget[:, None])
        if not bool(take.any()):
            break
        chosen |= take
        budget -= (lens * take).sum(1)
    word_chosen = torch.zeros_like(chosen).scatter_(1, order, chosen)
    return word_chosen.gather(1, word) & cand


def mask_tokens(input_ids: torch.Tensor, tables: TokenTables, params: DataConfig, generator
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """(masked input_ids, lm_labels) for a (B, T) batch; labels are -100 except at selected positions.
    generator: a torch.Generator (one stream for the batch) or RowDraws (one per row)."""
    selected = select_positions(input_ids, tables, params, generator)
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    p_mask, p_same = params.mask_procedure[0] / 100, params.mask_procedure[1] / 100
    u = _uniform(generator, tuple(input_ids.shape))
    draws = _integers(generator, len(tables.random_ids), tuple(input_ids.shape))
    out = input_ids.masked_fill(selected & (u < p_mask), tables.mask_id)
    out = torch.where(selected & (u >= p_mask + p_same), tables.random_ids[draws], out)
    return out, labels


def prediction_slots(params: DataConfig) -> int:
    """P, the most positions a row of `params`' batches predicts: the fixed slots of the static step.

    select_positions predicts min(cap, max(1, round(n_candidates × ratio)), n_candidates) per row, and
    n_candidates < max_seq_len, so this bound holds for every row (static masks are drawn the same way)."""
    most = max(1, round(params.max_seq_len * params.mask_ratio))
    return most if params.max_predictions_per_seq is None else min(most, params.max_predictions_per_seq)


def fixed_slots(lm_labels: torch.Tensor, slots: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) labels → (positions (B, P), labels (B, P)), P = `slots`: each row's labelled positions in order,
    then unused slots (at unlabelled positions, labelled IGNORE_INDEX). Shapes and ops fixed, no host sync:
    usable on a GPU as well as in a collator. Rows with more than P labels lose the rest: slot_count first."""
    B, T = lm_labels.shape
    labelled = lm_labels != IGNORE_INDEX
    order = torch.argsort((~labelled).to(torch.uint8), dim=1, stable=True)[:, :slots]  # labelled first
    labels = lm_labels.gather(1, order)  # IGNORE_INDEX at the unlabelled positions past a row's labels
    if slots > T:  # more slots than positions: the rest point at position 0, unlabelled
        order, labels = F.pad(order, (0, slots - T)), F.pad(labels, (0, slots - T), value=IGNORE_INDEX)
    return order, labels


def slot_count(lm_labels: torch.Tensor, cap: Optional[int] = None) -> int:
    """P for a (B, T) batch of labels: its rows' most labels (at least 1: no batch without a slot), or `cap`
    (the static step's, prediction_slots) once no row has more (on the host, in the collator)."""
    most = int((lm_labels != IGNORE_INDEX).sum(1).max()) if lm_labels.numel() else 0
    if cap is not None and most > cap:
        from bertbench.errors import BertbenchError

        raise BertbenchError(f"a batch row has {most} labelled positions, more than the {cap} prediction slots of "
                             "the static step (max_seq_len × mask_ratio, capped by max_predictions_per_seq)")
    return max(1, most) if cap is None else cap


def dense_labels(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """A batch's (B, T) labels, IGNORE_INDEX where nothing is predicted: a masked LM's from its slots."""
    if "lm_positions" not in batch:  # a causal LM's are (B, T) already
        return batch["lm_labels"]
    return torch.full_like(batch["input_ids"], IGNORE_INDEX).scatter_(1, batch["lm_positions"], batch["lm_labels"])


def pad_further(batch: dict[str, torch.Tensor], length: int, pad_id: int) -> dict[str, torch.Tensor]:
    """A collated (B, T) batch padded on the right to `length` (the static step's fixed length per phase)."""
    extra = length - batch["input_ids"].size(1)
    if extra <= 0:
        return batch
    fill = {"input_ids": pad_id, "lm_labels": IGNORE_INDEX}  # token types and the attention mask: 0
    return {k: F.pad(v, (0, extra), value=fill.get(k, 0)) if v.dim() == 2 else v for k, v in batch.items()}


def batch_seed(seed: int, epoch: int, indices) -> int:
    """The seed of one batch: a hash of (seed, epoch, the batch's instance indices)."""
    arr = np.asarray([seed, epoch, *indices], dtype=np.int64)
    return int.from_bytes(hashlib.blake2b(arr.tobytes(), digest_size=8).digest(), "little") & (2**63 - 1)


def pad_batch(samples: list[dict[str, Any]], pad_id: int, multiple: int = 8, max_len: Optional[int] = None) -> dict[str, torch.Tensor]:
    """Pad to the longest sample, rounded up to `multiple` (never beyond `max_len` when given)."""
    longest = max(len(s["input_ids"]) for s in samples)
    T = -(-longest // multiple) * multiple
    if max_len is not None:
        T = max(longest, min(T, max_len))
    fills = {"input_ids": pad_id, "token_type_ids": 0, "attention_mask": 0}
    if "lm_labels" in samples[0]:
        fills["lm_labels"] = IGNORE_INDEX
    out = {k: np.full((len(samples), T), fill, dtype=np.int64) for k, fill in fills.items()}
    for i, s in enumerate(samples):
        n = len(s["input_ids"])
        for k, rows in out.items():
            rows[i, :n] = 1 if k == "attention_mask" else s[k]
    return {k: torch.from_numpy(v) for k, v in out.items()}


class MaskingCollator:
    """DataLoader `collate_fn` for the masked LM (+ NSP): pads, masks dynamically (or passes static masks through).

    Batch keys: input_ids, token_type_ids, attention_mask (B, T) long; lm_positions and lm_labels (B, P), each
    row's masked positions in order and their labels in P prediction slots (fixed_slots: unused slots
    IGNORE_INDEX; dense_labels gives them back as (B, T)); nsp_labels (B,) long when `nsp` (the objective
    "mlm+nsp"). Samples without an "index" key fall back to a call counter (not resumable).

    P is the batch's own most labels per row: no slot more than the step needs. With `static` (the static
    step's batches) every batch of a phase has one shape: padded to max_len, P = prediction_slots(params).
    The masks are drawn the same way either way.
    """

    def __init__(self, tables: TokenTables, params: DataConfig, seed: int = 0, nsp: bool = True,
                 pad_to_multiple_of: int = 8, max_len: Optional[int] = None, static: bool = False):
        self.tables, self.params, self.seed, self.nsp = tables, params, seed, nsp
        self.pad_to_multiple_of, self.max_len = pad_to_multiple_of, max_len
        self.slots = prediction_slots(params) if static else None
        self.fixed_len = (params.max_seq_len if max_len is None else max_len) if static else None
        self.epoch = 0
        self._calls = 0

    @classmethod
    def from_config(cls, data_cfg, tokenizer, seed: Optional[int] = None, nsp: bool = False,
                    static: bool = False) -> "MaskingCollator":
        return cls(TokenTables.from_tokenizer(tokenizer), data_cfg,
                   data_cfg.seed if seed is None else seed, nsp=nsp, max_len=data_cfg.max_seq_len, static=static)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __call__(self, samples: list[dict[str, Any]], rows: Optional[list[int]] = None) -> dict[str, torch.Tensor]:
        """rows: the samples' places in the global batch (default 0, 1, …): with the epoch and the instance
        index they key each row's mask, so a row's mask does not depend on who collates it beside what."""
        batch = pad_batch(samples, self.tables.pad_id, self.pad_to_multiple_of, self.max_len)
        if "lm_labels" not in batch:
            rows = list(range(len(samples))) if rows is None else rows
            if "index" in samples[0]:
                keys = [batch_seed(self.seed, self.epoch, [r, s["index"]]) for r, s in zip(rows, samples)]
            else:
                keys = [batch_seed(self.seed, self.epoch, [-1, self._calls, r]) for r in rows]
                self._calls += 1
            draws = RowDraws(keys)
            batch["input_ids"], batch["lm_labels"] = mask_tokens(batch["input_ids"], self.tables, self.params, draws)
        if self.fixed_len is not None:  # padded further after masking: the masks are those of the dynamic batches
            batch = pad_further(batch, self.fixed_len, self.tables.pad_id)
        slots = slot_count(batch["lm_labels"], self.slots)
        batch["lm_positions"], batch["lm_labels"] = fixed_slots(batch["lm_labels"], slots)
        if self.nsp:
            batch["nsp_labels"] = torch.tensor([s["nsp_label"] for s in samples], dtype=torch.long)
        return batch


class CausalCollator:
    """DataLoader `collate_fn` for the left-to-right LM: lm_labels[t] = input_ids[t + 1]; the last real
    position and padding get -100 (the model computes the loss at labelled positions)."""

    def __init__(self, pad_id: int, pad_to_multiple_of: int = 8, max_len: Optional[int] = None, static: bool = False):
        # static: every batch padded to max_len (the static step's fixed length); labels are (B, T) already
        self.pad_id, self.max_len = pad_id, max_len
        self.pad_to_multiple_of = max_len if static and max_len else pad_to_multiple_of

    def set_epoch(self, epoch: int) -> None:  # nothing random here; same interface as MaskingCollator
        pass

    def __call__(self, samples: list[dict[str, Any]], rows: Optional[list[int]] = None) -> dict[str, torch.Tensor]:
        batch = pad_batch(samples, self.pad_id, self.pad_to_multiple_of, self.max_len)  # rows: unused (no draws)
        ids, attn = batch["input_ids"], batch["attention_mask"]
        labels = torch.full_like(ids, IGNORE_INDEX)
        labels[:, :-1] = torch.where(attn[:, 1:].bool(), ids[:, 1:], IGNORE_INDEX)
        batch["lm_labels"] = labels
        return batch


def make_collator(data_cfg, tokenizer, objective: str = "mlm+nsp", seed: Optional[int] = None, static: bool = False):
    """The collator for `objective`: the masked LM's MaskingCollator (NSP labels only for "mlm+nsp"), or the
    causal LM's CausalCollator. static: batches for the static step (fixed length, fixed prediction slots)."""
    check_objective(objective)
    if is_causal(objective):
        return CausalCollator(tokenizer.pad_id, max_len=data_cfg.max_seq_len, static=static)
    return MaskingCollator.from_config(data_cfg, tokenizer, seed, nsp=trains_nsp(objective), static=static)


class StaticMasks:
    """Static masking (`masking: static`) without a masked copy of the data: instance i's mask is drawn by
    the same `mask_tokens` from a generator seeded by (seed, i), so it is the same every time it is read.
    With `dupe_factor` copies, each copy's instances have indices, and so masks, of their own."""

    def __init__(self, tables: TokenTables, params: DataConfig, seed: int):
        self.tables, self.params, self.seed = tables, params, seed

    def __call__(self, index: int, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g = torch.Generator().manual_seed(batch_seed(self.seed, 0, [index]))
        masked, labels = mask_tokens(torch.from_numpy(ids)[None], self.tables, self.params, g)  # (1, T)
        return masked[0].numpy(), labels[0].numpy()


def masking_counts(original: torch.Tensor, masked: torch.Tensor, labels: torch.Tensor, tables: TokenTables) -> dict[str, int]:
    """Counts for statistics: candidates, selected, and how the selected were replaced."""
    selected = labels != IGNORE_INDEX
    is_mask, kept = selected & (masked == tables.mask_id), selected & (masked == original)
    random = selected & ~is_mask & ~kept
    return {"candidates": int((~tables.is_special[original]).sum()), "selected": int(selected.sum()),
            "mask": int(is_mask.sum()), "kept": int(kept.sum()), "random": int(random.sum()),
            "selected_special": int((selected & tables.is_special[original]).sum()),
            "random_special": int((random & tables.is_special[masked]).sum())}
