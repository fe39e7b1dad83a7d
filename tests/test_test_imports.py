"""Every bertbench name a test imports exists, in the tests this machine skips too (CUDA, Slurm): a skipped test
never runs here, so a name a change moved would first fail on the lent GPU machine, inside its short device time
(tests/test_cuda.py imported `GPU_PEAK_TFLOPS` from the benchmarks after it had moved to runtime.devices)."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

from tests.conftest import ROOT


def missing_names(test_file: Path) -> list[str]:
    """'file:line module.name' for each `from bertbench... import name` in `test_file` that does not resolve."""
    missing = []
    for node in ast.walk(ast.parse(test_file.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("bertbench")):
            continue
        module = importlib.import_module(node.module)  # a module that does not import fails here, by its own error
        for alias in node.names:
            if hasattr(module, alias.name):
                continue
            try:  # `from bertbench.x import submodule`
                importlib.import_module(f"{node.module}.{alias.name}")
            except ModuleNotFoundError:
                missing.append(f"{test_file.name}:{node.lineno} {node.module}.{alias.name}")
    return missing


def test_every_bertbench_name_a_test_imports_exists():
    files = sorted((ROOT / "tests").glob("*.py"))
    assert len(files) > 50
    assert [m for f in files for m in missing_names(f)] == []


def test_the_check_finds_a_name_that_moved(tmp_path):
    test_file = tmp_path / "test_moved.py"
    test_file.write_text("def test_x():\n    from bertbench.errors import BertbenchError, NoSuchName\n", encoding="utf-8")
    assert missing_names(test_file) == ["test_moved.py:2 bertbench.errors.NoSuchName"]
