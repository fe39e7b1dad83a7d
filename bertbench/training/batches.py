"""Deterministic, resumable batches: global batch k is a pure function of (seed, k), whoever collates it.

A map-style dataset whose item is one rank's micro-batch, keyed by the micro-step. The order of instances
is a fresh seeded permutation per pass over the data: global row r of optimiser step k is the instance at
position k·G + r of that stream (G the global batch). Each rank collates only its own rows (rank r holds
rows [r·G/W, (r+1)·G/W), cut into `grad_accum` micro-batches), and the collator draws each row's mask from
a generator keyed by (seed, step, global row, instance) (data.masking.row_draws): so the number of
processes, nodes or micro-batches changes who computes a row, never what the row is. A run resumed at step
k, on any device count that divides G, draws the batches an uninterrupted run would have.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from bertbench.data import IGNORE_INDEX
from bertbench.errors import BertbenchError

# Counts every micro-batch carries as host integers (never tensors: Lightning moves tensors to the device, and
# reading a count back from there makes the host wait for the step). The step's counts are global, over every
# rank and micro-batch of the optimiser step: the run log adds them up, and the LM loss is weighted by them
# (PretrainModule.training_step), with no collective (see StepBatchDataset.__getitem__).
LOSS_TOKENS = "loss_tokens"  # this micro-batch's loss tokens
STEP_TOKENS = "step_tokens"  # the step's real (unpadded) tokens
STEP_LOSS_TOKENS = "step_loss_tokens"  # the step's loss tokens


def step_seed(seed: int, step: int, stream: int = 0) -> int:
    # SeedSequence mixes the parts well; independent streams for train masks (0) and eval masks (1).
    return int(np.random.SeedSequence([seed, stream, step]).generate_state(1)[0])


def device_batch(global_batch: int, world_size: int, grad_accum: int) -> int:
    """Rows one process handles per micro-batch: the global batch split over processes and micro-batches."""
    parts = world_size * grad_accum
    if global_batch % parts:
        raise BertbenchError(f"batch_size {global_batch} is the global batch and does not split over {world_size} "
                             f"process(es) × grad_accum {grad_accum}: choose a batch size divisible by {parts}, or a "
                             f"process count × grad_accum that divides {global_batch}")
    return global_batch // parts


class StepBatchDataset(Dataset):
    def __init__(self, instances: Sequence[Any], collate: Callable[..., dict[str, torch.Tensor]], global_batch: int,
                 seed: int, rank: int = 0, world_size: int = 1, grad_accum: int = 1):
        if len(instances) == 0:
            raise ValueError("no training instances")
        self.instances, self.collate, self.seed = instances, collate, seed
        self.global_batch = global_batch  # rows per optimiser step, over every process and micro-batch
        self.batch_size = device_batch(global_batch, world_size, grad_accum)  # rows per item (this rank)
        self.rank, self.world_size, self.grad_accum = rank, world_size, grad_accum
        self._perm_cache: dict[int, np.ndarray] = {}
        self._step_cache: tuple[int, dict[tuple[int, int], dict[str, torch.Tensor]]] = (-1, {})

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch not in self._perm_cache:
            self._perm_cache = {epoch: np.random.default_rng([self.seed, epoch]).permutation(len(self.instances))}
        return self._perm_cache[epoch]

    def rows(self, micro_step: int, rank: int) -> tuple[int, range]:
        """(optimiser step, the global rows of `rank`'s micro-batch `micro_step`)."""
        step, micro = divmod(micro_step, self.grad_accum)
        first = rank * self.batch_size * self.grad_accum + micro * self.batch_size
        return step, range(first, first + self.batch_size)

    def indices(self, step: int, rows: Sequence[int]) -> list[int]:
        """The instances at global rows `rows` of optimiser step `step`."""
        n = len(self.instances)
        return [int(self._permutation(epoch)[offset])
                for epoch, offset in (divmod(step * self.global_batch + row, n) for row in rows)]

    def __len__(self) -> int:  # a practically endless stream; the trainer stops at max_steps
        return 1 << 40

    def __getitem__(self, micro_step: int) -> dict[str, Any]:
        step, micro = divmod(micro_step, self.grad_accum)
        cached_step, batches = self._step_cache
        if cached_step != step:
            batches = self._collate_step(step)
            self._step_cache = (step, batches)
        own = batches[(self.rank, micro)]
        return {**own, LOSS_TOKENS: loss_tokens(own), STEP_TOKENS: sum(map(real_tokens, batches.values())),
                STEP_LOSS_TOKENS: sum(map(loss_tokens, batches.values()))}

    def _collate_step(self, step: int) -> dict[tuple[int, int], dict[str, torch.Tensor]]:
        """(rank, micro-batch) → batch, for every micro-batch whose counts the step's global counts need.

        The LM loss of a micro-batch is weighted by its share of the step's loss tokens, over every rank and
        micro-batch (PretrainModule.training_step): so each rank collates the step's other micro-batches, its
        own and, with several processes, every other rank's, to count them (once per step and process: a
        DataLoader worker given one micro-batch of a step collates the step's others too). Counting here costs
        the collation of the global batch on each rank, in its loader (off the step on a GPU, in workers);
        the alternative, an all-reduce of the count in every step, is a collective between forward and
        backward that every rank waits on. Without accumulation or other ranks, only the batch itself."""
        first = step * self.grad_accum
        return {(r, m): collate_rows(self.collate, self.instances, step, self.rows(first + m, r)[1], self.indices)
                for r in range(self.world_size) for m in range(self.grad_accum)}


def loss_tokens(batch: dict[str, torch.Tensor]) -> int:
    return int((batch["lm_labels"] != IGNORE_INDEX).sum())


def real_tokens(batch: dict[str, torch.Tensor]) -> int:
    return int(batch["attention_mask"].sum()) if "attention_mask" in batch else batch["input_ids"].numel()


def collate_rows(collate, instances, step: int, rows: Sequence[int], indices) -> dict[str, torch.Tensor]:
    # The collator keys each row's mask by (its seed, the step, the global row, the instance): batch k's
    # masks are a pure function of k, whatever ran before and whichever rank collates them.
    if hasattr(collate, "set_epoch"):
        collate.set_epoch(step)
    samples = [instances[i] for i in indices(step, rows)]
    return collate(samples, rows=list(rows))


class StepSampler(Sampler[int]):
    """Yields step numbers start, start+1, …, end-1, but reports the length of the whole run (`end`).

    Why `end` and not `end - start` (lightning workaround: sampler-whole-run-length): a resumed Lightning fit loop adds the batches it had fetched before
    the stop (`batch_progress.current.ready`) to its fetch count and ends the epoch when that count reaches
    `len(loader)`. With the remainder as the length, a resume from step k < end/2 ended the epoch after
    end-2k batches and began a new one at `start` again (steps 0,1,2,3,**1** for k=1 of 5).
    """

    def __init__(self, start: int, end: int):
        if not 0 <= start <= end:
            raise ValueError(f"StepSampler: start {start} outside [0, {end}]")
        self.start, self.end = start, end

    def __iter__(self):
        return iter(range(self.start, self.end))

    def __len__(self) -> int:
        return self.end


class PhasedBatches:
    """Dispatch a step to the dataset of its phase (seq 128 for 90% of steps, then 512, say).

    Phases fixed in steps know their first steps up front. Phases on the clock begin at `begin_next`:
    the next batch not yet fetched is the new phase's first (the loader fetches one batch ahead, so a
    switch asked for after step s starts at s + 2), and `starts` — saved in the checkpoint — makes a
    resumed run switch at the very same step."""

    def __init__(self, starts: list[Optional[int]], datasets: list[Any], grad_accum: int):
        self.starts, self.datasets, self.grad_accum = list(starts), datasets, grad_accum
        self.fetched = 0  # optimiser steps whose batches were handed out

    def __len__(self) -> int:
        return 1 << 40

    def phase_of(self, step: int) -> int:
        return max(i for i, s in enumerate(self.starts) if s is not None and s <= step)

    def begin_next(self) -> Optional[int]:
        """Start the next phase at the first step not yet fetched; returns that step (None: no phase left)."""
        k = next((i for i, s in enumerate(self.starts) if s is None), None)
        if k is None:
            return None
        self.starts[k] = self.fetched
        return self.fetched

    def __getitem__(self, micro_step: int):
        step = micro_step // self.grad_accum
        self.fetched = max(self.fetched, step + 1)
        return self.datasets[self.phase_of(step)][micro_step]
