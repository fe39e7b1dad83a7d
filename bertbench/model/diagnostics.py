"""What a pre-trained encoder learnt that its held-out losses do not show, read off its attention.

`cross_segment_match`: how much attention a token of segment B puts on the same token in segment A, for the
head of the model that does this most. Comparing two sentences token by token (STS-B, MRPC, QNLI) needs such
a head, and pre-training grows one only sometimes. In the cpu-hour study, three tiny MLM+NSP checkpoints of
the same recipe, with the same held-out MLM (30.1-30.8%) and NSP accuracy (76-81%), scored 71, 37 and 27 on
STS-B after fine-tuning; the one at 71 has a layer-0 head that puts 19% of a segment-B token's attention on
its twin in segment A (this function, on 512 STS-B dev pairs; 6.9% on the held-out pre-training pairs,
where half of B is another document's), the others 0.1% and 0.8% (0.1% and 0.1%). The same
pre-training seeds under another phase split landed the same way, so the head is settled early, and
fine-tuning on STS-B's 5.7k pairs (longer, smaller batches, a higher lr) did not grow it. Recorded with the
held-out metrics, it says which checkpoints of a study can compare sentences before any fine-tuning is spent.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

import torch
import torch.nn.functional as F


@torch.no_grad()
def cross_segment_match_sums(
    bert, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attention_mask: Optional[torch.Tensor],
    ignore_ids: Iterable[int],
) -> tuple[torch.Tensor, int]:
    """((L, nh) summed attention, n): over the segment-B tokens that also occur in segment A (special tokens and
    `ignore_ids`, e.g. [MASK], never count), each head's attention mass on those same tokens in A, summed; n is
    the number of such tokens. The mean is sums / n. `bert` is a `BertModel`; computed in fp32."""
    real = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()  # (B, T)
    ignore = torch.tensor(sorted(set(ignore_ids)), dtype=input_ids.dtype, device=input_ids.device)
    usable = real & ~torch.isin(input_ids, ignore)
    in_a, in_b = usable & (token_type_ids == 0), usable & (token_type_ids == 1)
    same = (input_ids[:, :, None] == input_ids[:, None, :]) & in_b[:, :, None] & in_a[:, None, :]  # (B, Tq, Tk)
    queries = same.any(-1)  # (B, T): a B token whose twin is in A
    n_layers, nh = len(bert.layers), bert.layers[0].attn.nh
    if not queries.any():  # one segment (contiguous text, a causal LM's input): nothing to measure, no forward
        return torch.zeros(n_layers, nh, device=input_ids.device), 0
    enc = bert(input_ids, token_type_ids, attention_mask, output_hidden_states=True)
    sums = []
    for layer, x in zip(bert.layers, enc.hidden_states[:-1]):  # each layer's input: embeddings, then layer outputs
        attn = layer.attn
        B, T, H = x.shape
        qkv = F.linear(x.float(), attn.qkv.weight.float(), attn.qkv.bias.float())  # (B, T, 3H)
        q, k = (t.view(B, T, attn.nh, H // attn.nh).transpose(1, 2) for t in qkv.split(H, dim=2)[:2])  # (B, nh, T, hs)
        scores = (q * q.size(-1) ** -0.5) @ k.transpose(-2, -1)  # (B, nh, T, T)
        probs = torch.softmax(scores.masked_fill(~real[:, None, None, :], float("-inf")), dim=-1)
        mass = (probs * same[:, None]).sum(-1)  # (B, nh, T): each query's attention on its twins in A
        sums.append((mass * queries[:, None]).sum((0, 2)))  # (nh,)
    return torch.stack(sums), int(queries.sum())


def cross_segment_match(bert, batches: Iterable[dict], ignore_ids: Iterable[int]) -> Optional[float]:
    """The largest mean over any (layer, head), in percent; None when no batch has a B token with a twin in A
    (one-segment inputs: a masked LM on contiguous text, a causal LM)."""
    ignore_ids = list(ignore_ids)
    device = next(bert.parameters()).device
    total, n = None, 0
    for b in batches:
        if b.get("token_type_ids") is None:
            continue
        mask = b.get("attention_mask")
        sums, count = cross_segment_match_sums(bert, b["input_ids"].to(device), b["token_type_ids"].to(device),
                                               None if mask is None else mask.to(device), ignore_ids)
        total = sums if total is None else total + sums
        n += count
    return None if not n else 100.0 * float((total / n).max())
