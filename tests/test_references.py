"""Every bertbench name the project cites exists: the names tests import, the skipped ones too (CUDA, Slurm), and
the dotted `bertbench.…` names and "`bertbench/….py`'s `NAME`" that the docs, the README, the scripts and the
package's own comments and help texts give. A skipped test never runs here, so a name a change moved would first
fail on the lent GPU machine, inside its short device time (tests/test_cuda.py imported `GPU_PEAK_TFLOPS` from
the benchmarks after it had moved to runtime.devices; `bench pretrain --accelerator`'s help and docs/scale.md
named the old place too)."""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from tests.conftest import ROOT

DOTTED = re.compile(r"\bbertbench(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
FILE_NAME = re.compile(r"`(bertbench/[A-Za-z0-9_/]+\.py)`'s `([A-Za-z_][A-Za-z0-9_]*)`")


def missing_imports(test_file: Path) -> list[str]:
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


def resolves(dotted: str) -> bool:
    """Whether `bertbench.a.b.c` is a module, or a module's attribute (and its attributes'), that exists."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def missing_citations(text: str, where: str) -> list[str]:
    """The dotted bertbench names and "`bertbench/….py`'s `NAME`" in `text` that do not exist."""
    missing = [f"{where}: {m.group(0)}" for m in DOTTED.finditer(text)
               if "__main__" not in m.group(0) and not resolves(m.group(0))]
    for m in FILE_NAME.finditer(text):
        path = ROOT / m.group(1)
        if not (path.is_file() and re.search(rf"^(def |class )?{m.group(2)}\b", path.read_text(encoding="utf-8"), re.M)):
            missing.append(f"{where}: {m.group(0)}")
    return missing


def test_every_bertbench_name_a_test_imports_exists():
    files = sorted((ROOT / "tests").glob("*.py"))
    assert len(files) > 50
    assert [m for f in files for m in missing_imports(f)] == []


def test_every_bertbench_name_the_docs_scripts_and_package_cite_exists():
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "scripts").glob("*.py")),
             *sorted((ROOT / "bertbench").rglob("*.py"))]
    texts = {f.relative_to(ROOT).as_posix(): f.read_text(encoding="utf-8") for f in files}
    assert sum(len(DOTTED.findall(t)) for t in texts.values()) > 500  # the check reads what it should
    assert [m for where, t in texts.items() for m in missing_citations(t, where)] == []


def test_the_checks_find_a_name_that_moved(tmp_path):
    test_file = tmp_path / "test_moved.py"
    test_file.write_text("def test_x():\n    from bertbench.errors import BertbenchError, NoSuchName\n", encoding="utf-8")
    assert missing_imports(test_file) == ["test_moved.py:2 bertbench.errors.NoSuchName"]
    cited = ("see `bertbench.benchmarks.common.GPU_PEAK_TFLOPS`, `bertbench.runtime.devices.GPU_PEAK_TFLOPS`, "
             "`bertbench/benchmarks/common.py`'s `GPU_PEAK_TFLOPS` and `bertbench/runtime/devices.py`'s `GPU_PEAK_TFLOPS`")
    assert missing_citations(cited, "a page") == ["a page: bertbench.benchmarks.common.GPU_PEAK_TFLOPS",
                                                  "a page: `bertbench/benchmarks/common.py`'s `GPU_PEAK_TFLOPS`"]
