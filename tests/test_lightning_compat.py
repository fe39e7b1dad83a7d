"""bertbench.training.lightning_compat: every Lightning workaround in one list, each private name hooked falls
back to the public path when a release removes it (slower, not broken: the run still trains), Lightning comes
without torchmetrics' optional integrations, and importing torchmetrics first is an error, not a silent no-op."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bertbench"

PROBE = """
import sys
from bertbench.training.lightning_compat import NOT_FOR_TORCHMETRICS, lightning
import lightning_utilities.core.imports as checks
loaded = sorted(m for m in sys.modules if m.split(".")[0] in NOT_FOR_TORCHMETRICS)
print(loaded, "torchmetrics" in sys.modules, lightning.pytorch.Trainer.__name__,
      checks.package_available("scipy"), bool(checks.RequirementCache("matplotlib")))
"""
# A lightning_utilities that renamed RequirementCache._check_requirement (its own caller follows the new name).
RENAMED = """
import lightning_utilities.core.imports as checks
cache = checks.RequirementCache
cache._check_requirement_v2 = cache._check_requirement
del cache._check_requirement
def _check_available(self):
    if hasattr(self, "available"):
        return
    if self.requirement:
        self._check_requirement_v2()
    if getattr(self, "available", True) and self.module:
        self._check_module()
cache._check_available = _check_available
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)


def test_lightning_comes_without_scipy_matplotlib_or_transformers_and_the_checks_are_restored():
    r = _python(PROBE)
    assert r.returncode == 0, r.stderr[-2000:]
    # nothing of the three is loaded; torchmetrics and Lightning are; the checks answer truly again afterwards
    assert r.stdout.split() == ["[]", "True", "Trainer", "True", "True"], r.stdout


def test_without_check_requirement_the_public_bool_is_hooked_and_a_run_still_trains(tmp_path):
    from tests.test_pretrain import TINY, write_corpus

    corpus = write_corpus(tmp_path / "docs")
    run = (RENAMED + PROBE + "from bertbench.cli import app\napp(sys.argv[1:])\n")
    r = _python(run, "pretrain", "--corpus", str(corpus), "--max-steps", "2", "--objective", "mlm", *TINY,
                "--compile", "off", "--out", str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[:5] == ["[]", "True", "Trainer", "True", "True"], r.stdout  # still lean, via __bool__
    assert (tmp_path / "run" / "summary.json").is_file()


def test_importing_torchmetrics_first_is_an_error_naming_the_fix():
    r = _python("import torchmetrics\nimport bertbench.training.lightning_compat")
    assert r.returncode != 0 and "ImportError" in r.stderr
    assert "import Lightning from bertbench.training.lightning_compat first" in r.stderr


@pytest.mark.parametrize("name", ["_broadcast_sigterm_tensor", "_signal_connector"])
def test_a_private_name_gone_falls_back_and_the_run_still_trains(name, tmp_path, monkeypatch):
    import json

    from bertbench.training import lightning_compat
    from lightning.pytorch.loops.training_epoch_loop import _TrainingEpochLoop
    from tests.test_pretrain import TINY, pretrain, write_corpus

    calls = []
    hook = lightning_compat.quiet_lightning_sigterm
    if name == "_broadcast_sigterm_tensor":  # Lightning calls it with several processes only: gone from the class
        monkeypatch.delattr(_TrainingEpochLoop, name)
        monkeypatch.setattr(lightning_compat, "quiet_lightning_sigterm", lambda t, s: (calls.append(t), hook(t, s)))
    else:  # Lightning itself reads it during fit: gone for the hook's call only, where the hook looks for it
        def without(trainer, signals):
            connector = trainer._signal_connector
            monkeypatch.delattr(trainer, name)
            try:
                calls.append(trainer)
                hook(trainer, signals)
            finally:
                trainer._signal_connector = connector

        monkeypatch.setattr(lightning_compat, "quiet_lightning_sigterm", without)
    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    pretrain(["--corpus", str(write_corpus(tmp_path / "docs")), "--max-steps", "3", "--objective", "mlm", *TINY,
              "--compile", "off", "--out", str(tmp_path / "run")], monkeypatch)
    assert len(calls) == 1  # the hook ran, with the name gone
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 3


def test_every_workaround_is_listed_once_and_marked_where_it_is():
    from bertbench.training.lightning_compat import WORKAROUNDS

    marked: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for name in re.findall(r"lightning workaround: ([a-z0-9-]+)", path.read_text(encoding="utf-8")):
            marked.setdefault(name, set()).add(str(path.relative_to(PACKAGE)))
    listed = {w.name: w.where for w in WORKAROUNDS}
    assert len(listed) == len(WORKAROUNDS)
    assert {n: {w} for n, w in listed.items()} == marked


def test_the_installed_lightning_is_within_the_pinned_ranges():
    import tomllib
    from importlib.metadata import version

    from packaging.requirements import Requirement

    deps = [Requirement(d) for d in tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]["dependencies"]]
    pinned = {d.name: d.specifier for d in deps if d.name in ("lightning", "lightning-utilities")}
    assert set(pinned) == {"lightning", "lightning-utilities"}
    for name, spec in pinned.items():
        assert spec and any(s.operator == "<" for s in spec), f"{name}: no upper bound"
        assert spec.contains(version(name)), (name, version(name), spec)
