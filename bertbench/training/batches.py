"""Deterministic, resumable batches: batch k is a pure function of (seed, k).

A map-style dataset whose item is a whole batch, keyed by the global step. The order of instances is a
fresh seeded permutation per pass over the data, and the masks are drawn from a generator seeded by
(seed, step). So a run resumed at step k draws exactly the batches an uninterrupted run would have —
the data position is just the step number — and it works the same with DataLoader workers and DDP
(each rank takes its own slice of the step's global batch).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler


def step_seed(seed: int, step: int, stream: int = 0) -> int:
    # SeedSequence mixes the parts well; independent streams for train masks (0) and eval masks (1).
    return int(np.random.SeedSequence([seed, stream, step]).generate_state(1)[0])


class StepBatchDataset(Dataset):
    def __init__(
        self,
        instances: Sequence[Any],
        collate: Callable[[list[Any]], dict[str, torch.Tensor]],
        batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
    ):
        if len(instances) == 0:
            raise ValueError("no training instances")
        self.instances = instances
        self.collate = collate
        self.batch_size = batch_size  # per rank
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self._perm_cache: dict[int, np.ndarray] = {}

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch not in self._perm_cache:
            self._perm_cache = {epoch: np.random.default_rng([self.seed, epoch]).permutation(len(self.instances))}
        return self._perm_cache[epoch]

    def indices(self, step: int, rank: Optional[int] = None) -> list[int]:
        """The instances of this rank's share of global batch `step` (rank None: the whole global batch)."""
        global_batch = self.batch_size * self.world_size
        start, size = step * global_batch, global_batch
        if rank is not None:
            start, size = start + rank * self.batch_size, self.batch_size
        n = len(self.instances)
        out = []
        for pos in range(start, start + size):
            epoch, offset = divmod(pos, n)
            out.append(int(self._permutation(epoch)[offset]))
        return out

    def __len__(self) -> int:  # a practically endless stream; the trainer stops at max_steps
        return 1 << 40

    def __getitem__(self, step: int) -> dict[str, torch.Tensor]:
        # The collator seeds its masks from (its seed, "epoch", the instance indices): keying the epoch by
        # the step makes batch k's masks a pure function of k, whatever ran before.
        if hasattr(self.collate, "set_epoch"):
            self.collate.set_epoch(step)
        if self.world_size == 1:
            return self.collate([self.instances[i] for i in self.indices(step)])
        # Several processes: each collates the whole global batch and keeps its rows, so the masks (drawn
        # per batch) are the ones one process would draw: N processes train what one process trains.
        whole = self.collate([self.instances[i] for i in self.indices(step)])
        rows = slice(self.rank * self.batch_size, (self.rank + 1) * self.batch_size)
        return {k: v[rows] for k, v in whole.items()}


class StepSampler(Sampler[int]):
    """Yields step numbers start, start+1, …, end-1, but reports the length of the whole run (`end`).

    Why `end` and not `end - start`: a resumed Lightning fit loop adds the batches it had fetched before
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
