"""Every place bertbench works around Lightning, listed here with its reason and the versions it was tested on;
the workarounds that hook Lightning's private names live here too, each with its public fallback.

Import Lightning from here (`from bertbench.training.lightning_compat import lightning as L`), before any other
`lightning` or `torchmetrics` import in the process: this module imports torchmetrics without its optional
integrations (below). A process that imported torchmetrics first gets an ImportError naming the fix, not a
silently slower start.

The versions tested, and each private name's public fallback when a release renames it: docs/lightning.md.

Each workaround carries the comment `# lightning workaround: <name>` where it is; WORKAROUNDS lists them all
(a test checks the two agree):
"""
from __future__ import annotations

import signal
import sys
from dataclasses import dataclass

# The packages torchmetrics imports at start-up only to offer metrics bertbench never calls.
NOT_FOR_TORCHMETRICS = frozenset({"scipy", "matplotlib", "transformers"})


@dataclass(frozen=True)
class Workaround:
    name: str
    where: str  # the module (under bertbench/) that carries its marker comment
    reason: str
    private: str = ""  # the private name it hooks, if any (its fallback: the public path)


WORKAROUNDS = (
    Workaround("lean-torchmetrics", "training/lightning_compat.py",
               "`import lightning` imports torchmetrics, whose __init__ imports scipy.signal, matplotlib and "
               "transformers (~2.5 s of ~6 s, in every rank, worker and job); torchmetrics is told they are absent "
               "while it is imported", private="RequirementCache._check_requirement"),
    Workaround("no-sigterm-broadcast", "training/lightning_compat.py",
               "with several processes Lightning's loop broadcasts a SIGTERM flag from rank 0 before every batch (a "
               "collective and a host wait per step); the run agrees on signals at its log rows instead",
               private="_TrainingEpochLoop._broadcast_sigterm_tensor"),
    Workaround("early-sigterm-handover", "training/lightning_compat.py",
               "a SIGTERM Lightning's handler caught between the start of fit and the first batch is handed to "
               "bertbench's signals, so it stops at a row with a checkpoint like any other",
               private="Trainer._signal_connector"),
    Workaround("own-signal-handlers", "training/stop_signals.py",
               "fit installs Lightning's SIGTERM handler (a silent exit 0) and turns Ctrl-C into exit 1; ours are "
               "re-installed at on_train_start"),
    Workaround("module-clips-fused-adamw", "training/pretrain_module.py",
               "Lightning's precision plugin refuses to clip gradients for a fused optimizer, bf16 included "
               "(Lightning issue #21435): the module clips"),
    Workaround("sampler-whole-run-length", "training/batches.py",
               "a resumed fit loop adds the batches fetched before the stop to its count and ends the epoch at "
               "len(loader): the sampler reports the whole run's length"),
    Workaround("mid-epoch-resume-warning", "training/pretrain_run.py",
               "Lightning warns on every resume that the checkpoint ended mid-epoch; our loader resumes by "
               "construction (batch k is a function of k)"),
    Workaround("no-fp16-on-cpu", "training/pretrain_run.py",
               "Lightning runs bf16 when asked for 16-mixed on a CPU, and the run would record 16-mixed"),
    Workaround("trainer-errors-one-line", "training/pretrain_run.py",
               "Lightning's checks of accelerator, devices and strategy raise long tracebacks: one error line"),
    Workaround("progress-bar-from-run-log", "training/progress_lines.py",
               "Lightning's bar says 'Epoch 0/-2' for a run counted in steps or minutes, and reads every logged "
               "metric back from the device at every batch: ours shows the run log's last row"),
)


def _lean_check(check, requirement_of):
    """A requirement check that answers "absent" for NOT_FOR_TORCHMETRICS and asks `check` otherwise."""
    from packaging.requirements import Requirement

    def lean(self, *args):
        requirement = requirement_of(self)
        if requirement and Requirement(requirement).name in NOT_FOR_TORCHMETRICS:
            self.available = False
            self.message = f"{requirement!r}: not imported for torchmetrics (bertbench.training.lightning_compat)"
            return False
        return check(self, *args)

    return lean


def _import_torchmetrics_lean() -> None:
    """torchmetrics asks lightning_utilities in two ways (a `RequirementCache`, `package_available`): both say
    NOT_FOR_TORCHMETRICS is absent while it is imported. Its modules keep what they were told (and the
    `package_available` they bound); lightning_utilities is restored for everyone else. The cache's check is
    hooked at the private `_check_requirement`, else at the public `__bool__` (docs/lightning.md).
    # lightning workaround: lean-torchmetrics"""
    import lightning_utilities.core.imports as checks

    cache, available = checks.RequirementCache, checks.package_available
    hooked = "_check_requirement" if "_check_requirement" in vars(cache) else "__bool__"
    original = vars(cache)[hooked]
    setattr(cache, hooked, _lean_check(original, lambda c: getattr(c, "requirement", None)))

    def lean_available(name: str) -> bool:
        return name.split(".")[0] not in NOT_FOR_TORCHMETRICS and available(name)

    checks.package_available = lean_available
    try:
        import torchmetrics  # noqa: F401
    finally:
        setattr(cache, hooked, original)
        checks.package_available = available


def quiet_lightning_sigterm(trainer, signals) -> None:
    """Called at on_train_start, once `signals.defer()` has replaced Lightning's SIGTERM handler: a SIGTERM
    Lightning caught before that is handed to `signals`, and its per-batch broadcast of its SIGTERM flag (it
    would broadcast nothing now) is switched off for this trainer's loop. Without the private names: the
    fallbacks in docs/lightning.md.
    # lightning workaround: early-sigterm-handover
    # lightning workaround: no-sigterm-broadcast"""
    connector = getattr(trainer, "_signal_connector", None)
    if connector is not None and hasattr(connector, "received_sigterm"):
        caught = bool(connector.received_sigterm)
        connector.received_sigterm = False
    else:
        caught = bool(getattr(trainer, "received_sigterm", False))
    if caught:
        signals.received = signals.received or signal.SIGTERM
    loop = trainer.fit_loop.epoch_loop
    if hasattr(loop, "_broadcast_sigterm_tensor"):
        loop._broadcast_sigterm_tensor = lambda: None  # this trainer's loop only


if "torchmetrics" in sys.modules:  # its integrations are loaded already: nothing here could undo that
    raise ImportError("torchmetrics (with Lightning) was imported before bertbench.training.lightning_compat, so "
                      "it loaded scipy, matplotlib and transformers: import Lightning from "
                      "bertbench.training.lightning_compat first")
_import_torchmetrics_lean()

import lightning  # noqa: E402

__all__ = ["NOT_FOR_TORCHMETRICS", "WORKAROUNDS", "lightning", "quiet_lightning_sigterm"]
