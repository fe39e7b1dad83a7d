"""How a fine-tuning is set up, defined once.

`bertbench finetune`'s options, a preset's `finetune:` block and the request that `run_finetune` carries out
all hold these fields by inheriting this class, and all are checked by `FinetuneSettings.check`, so adding a
fine-tuning setting means adding one field here (and, for the CLI, its option). `None` means "the task's own
value" (its hyper-parameters in tasks/*.yaml). Light on purpose: importing it must not pull in torch.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from bertbench.errors import BertbenchError

# Integer settings where 0 or a negative number is always a mistake: 0 once read as "unset" (batch size,
# which recorded 32) or ran no step at all (a loop waiting for batches that never came).
_POSITIVE_INTS = ("batch_size", "max_seq_len", "max_steps", "max_train_examples", "max_eval_examples")


@dataclass(kw_only=True)
class FinetuneSettings:
    seeds: Optional[list[int]] = None  # None: the task's own seeds (several for RTE, MRPC, STS-B, CoLA)
    grid: str = "none"  # "none": one lr; "heldout": the lr grid, selected on a slice held out of train;
    #                     "paper": the lr grid selected on dev, as the paper did (bertbench.training.selection)
    lr: Optional[float] = None  # with grid "none" (default: the grid's first, largest value)
    lrs: Optional[list[float]] = None  # the grid for "heldout"/"paper" (default: the task's learning_rates)
    epochs: Optional[float] = None
    batch_size: Optional[int] = None
    max_seq_len: Optional[int] = None
    max_steps: Optional[int] = None  # CPU budgets, recorded in every result
    max_train_examples: Optional[int] = None
    train_caps: dict[str, int] = field(default_factory=dict)  # task -> at most this many train examples (SST-2)
    max_eval_examples: Optional[int] = None

    def check(self, name: Callable[[str], str]) -> None:
        """Raise one line for the first bad value; `name(field)` says how the caller spells it
        (`--batch-size` on the command line, `preset.yaml: finetune.batch_size` in a preset)."""
        from bertbench.training.selection import GRIDS

        if self.grid not in GRIDS:
            raise BertbenchError(f"{name('grid')} {self.grid!r}: expected one of {', '.join(GRIDS)}")
        for key in _POSITIVE_INTS:
            value = getattr(self, key)
            if value is not None and value < 1:
                raise BertbenchError(f"{name(key)} {value}: expected an integer ≥ 1")
        if self.lr is not None and not self.lr > 0:
            raise BertbenchError(f"{name('lr')} {self.lr}: expected a positive learning rate")
        if self.epochs is not None and not self.epochs > 0:
            raise BertbenchError(f"{name('epochs')} {self.epochs}: expected a positive number of epochs")
        if self.lrs is not None and (self.grid == "none" or not self.lrs or any(not lr > 0 for lr in self.lrs)):
            raise BertbenchError(f"{name('lrs')} {self.lrs}: needs grid heldout or paper and positive learning rates")
        bad = {task: n for task, n in self.train_caps.items() if not isinstance(n, int) or n < 1}
        if bad:
            raise BertbenchError(f"{name('train_caps')} {bad}: each cap must be a positive number of examples")
        if self.seeds is not None and (not self.seeds or any(s < 0 for s in self.seeds)):
            raise BertbenchError(f"{name('seeds')} {self.seeds}: expected one or more seeds ≥ 0")

    def settings(self) -> dict[str, Any]:
        """Just the fine-tuning settings (not a subclass's own fields), to hand on to another holder."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(FinetuneSettings)}


def flag_name(key: str) -> str:
    """How the command line spells a setting: max_train_examples → --max-train-examples."""
    return "--" + key.replace("_", "-")
