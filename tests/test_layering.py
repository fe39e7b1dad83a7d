"""The package's architecture as a test: imports run one way, down the layers below, and never in a circle.

Every import counts, also one inside a function (a lazy import is still a dependency; laziness only keeps
`bertbench --help` fast). A module belongs to the layer of the longest prefix that names it; a module that
no layer names fails the test, so a new module gets a place on purpose.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Mapping, Optional

PACKAGE = Path(__file__).resolve().parent.parent / "bertbench"

# Bottom first. A module may import its own layer and the layers below it, never one above.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base: errors, paths, the process and its files", ("bertbench.errors", "bertbench.paths", "bertbench.runtime")),
    ("configuration: typed configs, paper numbers, metrics, tasks",
     ("bertbench.config_files", "bertbench.config", "bertbench.reference", "bertbench.metrics", "bertbench.tasks")),
    ("typed run outputs: result records, pre-training summaries, a study's stages file",
     ("bertbench.results", "bertbench.stages")),
    # Below the report and the studies alike: what a claim states and a study's pre-registration are read by the
    # report (which judges them) and written and checked by the studies (which must not reach into the report).
    ("what a study states before it runs: claims, the names they give a variant, the pre-registration's file",
     ("bertbench.claims", "bertbench.registration")),
    ("data: corpus, instances, masking, task readers and features", ("bertbench.data",)),
    ("model: the network, tokenizer, checkpoints, HF interchange", ("bertbench.model",)),
    ("training: pre-training and fine-tuning runs, their settings", ("bertbench.training",)),
    ("benchmarks: `bertbench bench`", ("bertbench.benchmarks",)),
    ("report statistics (pure)", ("bertbench.report.stats", "bertbench.report.multibootstrap")),
    ("report data model and result tables", ("bertbench.report", "bertbench.report.model")),
    ("report tables built on the model, the claims' judge", ("bertbench.report.tables", "bertbench.report.claims")),
    ("the whole report", ("bertbench.report.build",)),
    ("report renderers: markdown, terminal, plots", ("bertbench.report.render",)),
    ("the run's report (`bertbench report` as a function) and the seed plan", ("bertbench.report.run", "bertbench.report.plan")),
    ("studies: presets, plan, scheduler", ("bertbench.studies",)),
    ("command line and the package's front door",
     ("bertbench.cli_options", "bertbench.commands", "bertbench.cli", "bertbench.__main__", "bertbench")),
)
EXACT_ONLY = {"bertbench"}  # the front door names itself only, not every module under it
MAX_TOP_LEVEL_MODULES = 15
MAX_FUNCTION_LINES = 100


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """{dotted module name: file} for every .py under the package (a package is its __init__.py)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imported_names(module: str, path: Path, node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:  # relative: resolve against this module's package
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([base] if base else []))
    # `from bertbench.report import model` imports a module; `from bertbench.errors import X` a name
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def import_graph(files: Mapping[str, Path]) -> dict[str, set[str]]:
    """{module: the bertbench modules it imports anywhere in its body}."""
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        deps = graph.setdefault(module, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            names = _imported_names(module, path, node)
            targets = [n for n in names[:-1] if n in files] if isinstance(node, ast.ImportFrom) else []
            if not targets:  # a name imported from a module: the dependency is the (longest existing) module
                for name in names if isinstance(node, ast.Import) else names[-1:]:
                    while name and name not in files:
                        name = name.rpartition(".")[0]
                    if name:
                        targets.append(name)
            deps.update(t for t in targets if t != module)
    return graph


def layer_of(module: str) -> Optional[int]:
    best: Optional[tuple[int, int]] = None  # (prefix length, layer index)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or (prefix not in EXACT_ONLY and module.startswith(prefix + ".")):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index)
    return None if best is None else best[1]


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # recursion depth is bounded by the package's size (~100 modules)
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def upward_imports(graph: Mapping[str, set[str]]) -> list[str]:
    out = []
    for module, deps in sorted(graph.items()):
        for dep in sorted(deps):
            low, high = layer_of(module), layer_of(dep)
            if low is not None and high is not None and high > low:
                out.append(f"{module} ({LAYERS[low][0]}) imports {dep} ({LAYERS[high][0]})")
    return out


def test_every_module_has_a_layer():
    unplaced = [m for m in module_files() if layer_of(m) is None]
    assert unplaced == [], f"give these modules a layer in tests/test_layering.py LAYERS: {unplaced}"


def test_no_import_cycle():
    found = cycles(import_graph(module_files()))
    assert found == [], "modules that import each other in a circle:\n" + "\n".join(" ↔ ".join(c) for c in found)


def test_no_import_from_a_lower_layer_to_a_higher_one():
    found = upward_imports(import_graph(module_files()))
    assert found == [], "imports against the layers (tests/test_layering.py LAYERS):\n" + "\n".join(found)


def long_functions(files: Mapping[str, Path], limit: int = MAX_FUNCTION_LINES, root: Path = PACKAGE.parent) -> list[str]:
    """'path:line name (n lines)' for every function or method longer than `limit` lines (decorators
    included), nested ones too."""
    out = []
    for path in files.values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                n = node.end_lineno - first + 1
                if n > limit:
                    out.append(f"{path.relative_to(root).as_posix()}:{node.lineno} {node.name} ({n} lines)")
    return sorted(out)


def test_no_function_over_100_lines():
    found = long_functions(module_files())
    assert found == [], "split these into named steps:\n" + "\n".join(found)


def test_top_level_holds_at_most_15_modules():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} modules directly under bertbench/: {top}"


# --- the checker itself, on small made-up packages ---------------------------------------------------------


def _package(tmp_path: Path, modules: Mapping[str, str]) -> dict[str, Path]:
    for name, source in modules.items():
        path = tmp_path.joinpath(*name.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return module_files(tmp_path / "bertbench")


def test_the_checker_sees_lazy_relative_and_from_imports(tmp_path):
    files = _package(tmp_path, {
        "bertbench.__init__": "",
        "bertbench.errors": "",
        "bertbench.report.__init__": "",
        "bertbench.report.model": "from bertbench.errors import BertbenchError\n",
        "bertbench.report.build": "def f():\n    from . import model\n",
        "bertbench.report.run": "from bertbench.report import build\nimport bertbench.report.model as m\n",
    })
    graph = import_graph(files)
    assert graph["bertbench.report.model"] == {"bertbench.errors"}
    assert graph["bertbench.report.build"] == {"bertbench.report.model"}  # inside a function, relative
    assert graph["bertbench.report.run"] == {"bertbench.report.build", "bertbench.report.model"}


def test_the_checker_finds_a_cycle_and_an_upward_import(tmp_path):
    files = _package(tmp_path, {
        "bertbench.__init__": "",
        "bertbench.errors": "def f():\n    from bertbench.report.model import Table\n",  # upward, lazy
        "bertbench.report.__init__": "",
        "bertbench.report.model": "from bertbench.report.tables.claims import claims_table\n",
        "bertbench.report.tables.__init__": "",
        "bertbench.report.tables.claims": "from bertbench.report.model import Table\n",
    })
    graph = import_graph(files)
    assert cycles(graph) == [["bertbench.report.model", "bertbench.report.tables.claims"]]
    assert upward_imports(graph) == [
        "bertbench.errors (base: errors, paths, the process and its files) imports bertbench.report.model "
        "(report data model and result tables)",
        "bertbench.report.model (report data model and result tables) imports bertbench.report.tables.claims "
        "(report tables built on the model, the claims' judge)",
    ]


def test_layers_put_the_front_door_on_top_and_studies_above_the_report():
    assert layer_of("bertbench") == layer_of("bertbench.cli") == len(LAYERS) - 1
    assert layer_of("bertbench.errors") == 0  # "bertbench" names the front door only
    assert layer_of("bertbench.report.run") < layer_of("bertbench.studies.scheduler") < layer_of("bertbench.commands.run")
    assert layer_of("bertbench.unknown_module") is None



def test_the_checker_measures_functions_with_their_decorators(tmp_path):
    def body(indent: str) -> str:  # 97 lines; with the def line and a return line, 99
        return "".join(f"{indent}x{i} = {i}\n" for i in range(97))

    source = (f"@staticmethod\ndef at_limit():\n{body('    ')}    return 0\n\n\n"  # 100 lines with its decorator
              f"class A:\n    def m(self):\n        def inner():\n{body(' ' * 12)}            return 0\n"
              f"        return inner\n\n\n"  # m: 101 lines; inner: 99
              f"@staticmethod\n@staticmethod\ndef over():\n{body('    ')}    return 0\n")  # 101 lines
    files = _package(tmp_path, {"bertbench.__init__": "", "bertbench.long": source})
    assert long_functions(files, root=tmp_path) == ["bertbench/long.py:104 m (101 lines)",
                                                     "bertbench/long.py:209 over (101 lines)"]
