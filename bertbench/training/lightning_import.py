"""`lightning`, imported without torchmetrics' optional integrations: import it from here, before any other
`lightning` import in the process (`from bertbench.training.lightning_import import lightning as L`).

Lightning imports torchmetrics (for its `Metric` type, and to read its version), and torchmetrics' `__init__`
imports every metric family, and with them scipy.signal, matplotlib and transformers where they are installed
(its audio metrics, its plots, BERTScore). Measured here, that is ~2.5 s of the ~6 s `import lightning`, paid by
every pre-training process: each DDP rank, each study worker, each Slurm job. bertbench uses no torchmetrics
metric, so while torchmetrics is first imported its requirement checks report those three packages absent.
Only torchmetrics' own flags keep that answer; every other check is as before, and bertbench itself still
imports matplotlib (plots) and transformers (the HF bridge) where it needs them.
"""
from __future__ import annotations

import sys

# The packages torchmetrics imports at start-up only to offer metrics bertbench never calls.
NOT_FOR_TORCHMETRICS = frozenset({"scipy", "matplotlib", "transformers"})


def _import_torchmetrics_lean() -> None:
    """torchmetrics asks lightning_utilities in two ways (a `RequirementCache`, `package_available`): both say
    NOT_FOR_TORCHMETRICS is absent while it is imported. Its modules keep what they were told (and the
    `package_available` they bound); lightning_utilities is restored for everyone else."""
    import lightning_utilities.core.imports as checks
    from packaging.requirements import Requirement

    check, available = checks.RequirementCache._check_requirement, checks.package_available

    def lean_check(self) -> None:
        if self.requirement and Requirement(self.requirement).name in NOT_FOR_TORCHMETRICS:
            self.available = False
            self.message = f"{self.requirement!r}: not imported for torchmetrics (bertbench.training.lightning_import)"
            return
        check(self)

    def lean_available(name: str) -> bool:
        return name.split(".")[0] not in NOT_FOR_TORCHMETRICS and available(name)

    checks.RequirementCache._check_requirement, checks.package_available = lean_check, lean_available
    try:
        import torchmetrics  # noqa: F401
    finally:
        checks.RequirementCache._check_requirement, checks.package_available = check, available


if "torchmetrics" not in sys.modules:
    _import_torchmetrics_lean()

import lightning  # noqa: E402

__all__ = ["NOT_FOR_TORCHMETRICS", "lightning"]
