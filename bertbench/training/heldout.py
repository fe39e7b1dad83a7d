"""Held-out evaluation: one evaluator for the pre-training run's curve (metrics.csv, summary.json) and for
`bench quality`'s probe, so the two cannot diverge again.

`score` runs a model over fixed batches, in eval mode and without gradients, and counts the language model's
loss and accuracy by its labels (padding and unused prediction slots are no positions). It calls the model
through one function, `model_counts`: the model's own loss and logits, whichever head computes them (a fused
vocabulary head swaps in there, and both users follow). `bench quality`'s Hugging Face side passes its own
counting function and is summed the same way. `make_eval_fn` is the run's.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import astuple, dataclass, replace
from typing import Any, Optional

from bertbench.config import PAPER_MASK_PROCEDURE, PAPER_MASK_RATIO, DataConfig, PretrainConfig, is_causal, is_masked

STANDARD_MASKING = dict(mask_ratio=PAPER_MASK_RATIO, mask_procedure=list(PAPER_MASK_PROCEDURE), whole_word_mask=False)


@dataclass
class Counts:
    """Sums over labelled positions (and NSP pairs) of some batches."""

    loss_sum: float = 0.0  # cross-entropy (nats), summed over the labelled positions
    correct: float = 0.0  # labelled positions whose argmax is the label
    positions: int = 0
    nsp_correct: float = 0.0
    nsp_pairs: int = 0

    def add(self, other: "Counts") -> "Counts":
        return Counts(*(a + b for a, b in zip(astuple(self), astuple(other))))


@dataclass
class Score:
    loss: float  # mean cross-entropy over the labelled positions (nats)
    accuracy: float  # % of them predicted
    positions: int
    nsp_accuracy: Optional[float]  # % of NSP pairs, None without NSP labels


def model_counts(model, batch: dict[str, Any]) -> Counts:
    """The one place held-out evaluation calls a bertbench model: its own LM loss (a mean over its labelled
    positions) and argmax per position (the head fused with its loss, model.fused_head: no logits kept), and its NSP
    logits where the batch has NSP labels."""
    from bertbench.data import IGNORE_INDEX

    out = model(input_ids=batch["input_ids"], token_type_ids=batch.get("token_type_ids"),
                attention_mask=batch.get("attention_mask"), lm_labels=batch["lm_labels"],
                lm_positions=batch.get("lm_positions"), logits=False, predictions=True)
    labelled = out.lm_targets != IGNORE_INDEX  # counted by its labels: padding and unused slots are none
    n = int(labelled.sum())
    counts = Counts(float(out.lm_loss) * n, float(((out.lm_predictions == out.lm_targets) & labelled).sum()), n)
    if "nsp_labels" in batch and out.nsp_logits is not None:
        counts.nsp_correct = float((out.nsp_logits.argmax(-1) == batch["nsp_labels"]).sum())
        counts.nsp_pairs = batch["nsp_labels"].numel()
    return counts


def score(model, batches: Sequence[dict[str, Any]], precision: str = "32-true",
          counts: Callable[[Any, dict[str, Any]], Counts] = model_counts) -> Score:
    """`model` on `batches`: eval mode (restored after), no gradients, bf16 autocast where `precision` is bf16."""
    import torch

    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total = Counts()
    try:
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision.startswith("bf16")):
            for b in batches:
                total = total.add(counts(model, {k: v.to(device) if torch.is_tensor(v) else v for k, v in b.items()}))
    finally:
        model.train(was_training)
    n = max(1, total.positions)
    return Score(total.loss_sum / n, 100.0 * total.correct / n, total.positions,
                 100.0 * total.nsp_correct / total.nsp_pairs if total.nsp_pairs else None)


def make_eval_fn(cfg: PretrainConfig, data, tokenizer, precision: str) -> Optional[Callable[[Any], dict[str, float]]]:
    """The run's held-out metrics on fixed batches (same masks every time, so points of the curve compare), at its
    training precision and masking (and at the paper's where that differs); None without held-out instances."""
    batches = fixed_batches(cfg, data.heldout, tokenizer)
    if batches is None:
        return None
    own = batches(cfg.data)
    standard = None
    if is_masked(cfg.objective) and any(getattr(cfg.data, k) != v for k, v in STANDARD_MASKING.items()):
        standard = batches(replace(cfg.data, **STANDARD_MASKING))

    def evaluate(model) -> dict[str, float]:
        from bertbench.model.diagnostics import cross_segment_match

        ours = score(model, own, precision)
        if is_causal(cfg.objective):
            return {"clm_loss": ours.loss, "clm_accuracy": ours.accuracy}
        paper = score(model, standard, precision) if standard is not None else ours
        result = {"mlm_loss": ours.loss, "mlm_accuracy": ours.accuracy, "mlm_loss_paper_masking": paper.loss,
                  "mlm_accuracy_paper_masking": paper.accuracy}
        if ours.nsp_accuracy is not None:
            result["nsp_accuracy"] = ours.nsp_accuracy
        match = cross_segment_match(model.bert, own, tokenizer.special_ids)  # None on one-segment input
        if match is not None:
            result["cross_segment_match"] = match
        return result

    def run(model) -> dict[str, float]:
        import torch

        from bertbench.runtime.progress import Heartbeat, every_seconds, say

        was_training = model.training
        model.eval()
        try:
            with torch.no_grad(), Heartbeat(every_seconds(), say, "pretrain: held-out evaluation"):
                return evaluate(model)
        finally:
            model.train(was_training)

    return run


def fixed_batches(cfg: PretrainConfig, heldout: Sequence[Any], tokenizer) -> Optional[Callable[[DataConfig], list]]:
    """A function of a masking (DataConfig) to the run's held-out batches: at most `eval_batches` of
    min(batch_size, 32) instances, masked by the eval stream's seed; None without held-out instances."""
    from bertbench.data.masking import make_collator
    from bertbench.training.batches import step_seed

    if len(heldout) == 0:
        return None
    bs = min(cfg.batch_size, 32)
    n_batches = max(1, min(cfg.eval_batches, (len(heldout) + bs - 1) // bs))
    chunks = [[heldout[j] for j in range(i * bs, min(len(heldout), (i + 1) * bs))] for i in range(n_batches)]

    def batches(data_cfg: DataConfig) -> list:
        collate = make_collator(data_cfg, tokenizer, cfg.objective, seed=step_seed(cfg.seed, 0, stream=1))
        out = []
        for i, c in enumerate(chunks):
            collate.set_epoch(i)
            out.append(collate(c))
        return out

    return batches
