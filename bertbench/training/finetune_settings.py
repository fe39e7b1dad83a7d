"""How a fine-tuning is set up, defined once.

`FinetuneSettings` holds every setting of a fine-tuning; a preset's `finetune:` block
(`studies.preset.FinetuneSpec`) and the request that `run_finetune` carries out (`FinetuneRequest`, below)
inherit it, `FinetuneSettings.check` checks all of them, and the `bertbench finetune` command's options
are generated from `FinetuneRequest`'s fields and their help (`bertbench.cli_options`). Adding a fine-tuning
setting means adding one field here. `None` means "the task's own value" (tasks/*.yaml).
Light on purpose: importing it must not pull in torch (the CLI imports it).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from bertbench.config import check_min_seq_len, required, setting  # noqa: F401 (setting, required: re-exported)
from bertbench.errors import BertbenchError
from bertbench.paths import TASKS_DIR_HELP, task_folders

# Integer settings where 0 or a negative number is always a mistake: 0 once read as "unset" (batch size,
# which recorded 32) or ran no step at all (a loop waiting for batches that never came).
_POSITIVE_INTS = ("batch_size", "max_seq_len", "max_steps", "max_train_examples", "max_eval_examples")
BUDGET = "CPU budgets (recorded in every result)"

# Fine-tuning learning rates of models narrower than the paper's, by hidden size: (the --grid none rate, the
# default grid). The paper's rates (5e-5 … 2e-5, the tasks' `learning_rates`) leave a tiny model predicting one
# class on RTE, QNLI and the like on every seed. Tiny (H 128): 3e-4, the rate the committed cpu-quick run's
# held-out rule chose in 9 of its 10 cells (grid {1e-4, 3e-4}; recipes/presets/cpu-quick.yaml), as cpu-hour's
# does; mini (H 256): 1e-4, gpu-quick's. Wider models (small … BERT-Base, large) keep the task's own, the paper's.
SMALL_MODEL_LRS: tuple[tuple[int, tuple[float, ...]], ...] = ((128, (3.0e-4, 1.0e-4)), (256, (1.0e-4, 5.0e-5)))


def default_lrs(hidden_size: int, task_lrs: list[float]) -> list[float]:
    """The lr grid a model of `hidden_size` gets when none is given (its first: the --grid none rate)."""
    return next((list(lrs) for widest, lrs in SMALL_MODEL_LRS if hidden_size <= widest), list(task_lrs))


@dataclass(kw_only=True)
class FinetuneSettings:
    seeds: Optional[list[int]] = setting(
        None, "Comma-separated seeds (default: the task's own; several for RTE, MRPC, STS-B, CoLA).")
    grid: str = setting(
        "none", "'heldout': sweep the lr grid, select on a slice held out of train, report on dev; 'paper': select "
        "on dev itself, as the paper did; 'none': one lr (bertbench.training.selection).")
    lr: Optional[float] = setting(
        None, "Learning rate when --grid none (default: by model width, 3e-4 for tiny (H 128), 1e-4 for mini (H 256); "
        "wider: the task's first, the paper's 5e-5).")
    lrs: Optional[list[float]] = setting(
        None, "The lr grid for --grid heldout or paper, comma-separated (default: 3e-4,1e-4 for tiny, 1e-4,5e-5 for "
        "mini; wider: the task's learning_rates, the paper's).")
    epochs: Optional[float] = setting(None, "Training epochs (default: the task's).")
    batch_size: Optional[int] = setting(None, "Training batch size (default: the task's).")
    max_seq_len: Optional[int] = setting(None, "Longest input in tokens (default: the task's).")
    max_steps: Optional[int] = setting(None, "Stop training after this many steps.", panel=BUDGET)
    max_train_examples: Optional[int] = setting(None, "Train on at most this many examples.", panel=BUDGET)
    train_caps: dict[str, int] = setting(
        help="task -> at most this many train examples (e.g. SST-2 at 20,000)", cli=False, factory=dict)
    max_eval_examples: Optional[int] = setting(None, "Evaluate on at most this many examples.", panel=BUDGET)

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
        if self.max_seq_len is not None:
            check_min_seq_len(self.max_seq_len, name("max_seq_len"))
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

    def train_cap(self, task: str) -> Optional[int]:
        """The stricter of the global and the per-task cap on training examples (recorded in the record)."""
        caps = [c for c in (self.max_train_examples, self.train_caps.get(task)) if c is not None]
        return min(caps) if caps else None

    def settings(self) -> dict[str, Any]:
        """Just the fine-tuning settings (not a subclass's own fields), to hand on to another holder."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(FinetuneSettings)}


@dataclass(kw_only=True)
class FinetuneRequest(FinetuneSettings):
    """One `bertbench finetune`: which model, which tasks, where to, plus the shared settings. Its fields are
    the command's options (`commands/finetune.py`)."""

    model: str = required("bertbench checkpoint or run folder, a Hugging Face encoder folder (BERT; RoBERTa, "
                          "ELECTRA, DeBERTa, … with the [hf] extra), hub:NAME, or random:<size> (the "
                          "no-pre-training control).")
    tasks: str = required("Comma-separated task names, families (glue, squad, swag, conll2003) or 'all'.")
    out: Path = required("Folder for result records and predictions files.")
    data_dir: Optional[Path] = setting(
        None, "Task data in the official layout (default: $BERTBENCH_DATA_DIR or ../shared/data).")
    tasks_dir: Optional[str] = setting(None, TASKS_DIR_HELP)
    append: bool = setting(
        False, "Add to an --out folder that holds another model's records (refused without it: a folder is one "
        "model's, so a study's claims never mix two models).")
    tokenizer: Optional[str] = setting(
        None, "vocab.txt or tokenizer folder (for random:<size>; default: the bert-base-uncased vocab).")
    precision: str = setting("auto", "auto (bf16 where native), 32, bf16-mixed.")
    feature_based: bool = setting(
        False, "NER only: frozen encoder, last four layers concatenated, 2-layer BiLSTM (paper Table 7).")
    source: str = setting("auto", "Task data: auto (local files, else the hub where its host resolves), local, or hub.")
    select_epoch: bool = setting(
        False, "With --grid heldout or paper: score every epoch and choose the (lr, epoch) pair by the same rule "
        "(early stopping; --epochs is then the most it trains).")

    def check(self, name: Callable[[str], str]) -> None:
        from bertbench.data.task_readers import check_source

        super().check(name)
        check_source(self.source, name("source"))
        task_folders(self.tasks_dir)  # each folder exists
        if self.select_epoch and self.grid == "none":
            raise BertbenchError(f"{name('select_epoch')}: needs --grid heldout or paper (a selection to make)")


def flag_name(key: str) -> str:
    """How the command line spells a setting: max_train_examples → --max-train-examples."""
    return "--" + key.replace("_", "-")
