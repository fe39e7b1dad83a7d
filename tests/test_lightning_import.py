"""bertbench.training.lightning_import: a pre-training process imports Lightning without torchmetrics' optional
integrations (scipy.signal, matplotlib, transformers: ~4 s of every pre-training process's start here), and
leaves lightning_utilities' checks as they were for everything else."""
from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from bertbench.training.lightning_import import NOT_FOR_TORCHMETRICS, lightning
import lightning_utilities.core.imports as checks
loaded = sorted(m for m in sys.modules if m.split(".")[0] in NOT_FOR_TORCHMETRICS)
print(loaded, "torchmetrics" in sys.modules, lightning.pytorch.Trainer.__name__,
      checks.package_available("scipy"), bool(checks.RequirementCache("matplotlib")))
"""


def test_lightning_comes_without_scipy_matplotlib_or_transformers_and_the_checks_are_restored():
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    # nothing of the three is loaded; torchmetrics and Lightning are; the checks answer truly again afterwards
    assert r.stdout.split() == ["[]", "True", "Trainer", "True", "True"], r.stdout
