"""The clone's root folder, not the package (that is bertbench/ inside it).

A script saved beside a clone folder named `bertbench/` runs `import bertbench` with that folder's parent first
on sys.path, so Python finds this folder before the installed package. Without this file the folder became an
empty namespace package, and the README's `bertbench.load_checkpoint(...)` failed with an AttributeError. Here
the import is handed over to the package Python would have found without this folder (the installed one,
editable or not), else to the package inside this clone. Imported under any other name (a clone named
otherwise), it does nothing; the package itself never imports it.
"""
import sys
from pathlib import Path

if __name__ == "bertbench":
    import importlib.machinery
    import importlib.util

    def _real_package_spec():
        here = Path(__file__).resolve().parent
        others = [p for p in sys.path if Path(p or ".").resolve() != here.parent]
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is None or finder is importlib.machinery.BuiltinImporter:
                continue
            spec = find("bertbench", others if finder is importlib.machinery.PathFinder else None)
            if spec is not None and spec.origin is not None and Path(spec.origin).resolve() != Path(__file__).resolve():
                return spec  # a regular package elsewhere (a namespace spec has no origin)
        inner = here / "bertbench"
        return importlib.util.spec_from_file_location("bertbench", inner / "__init__.py",
                                                      submodule_search_locations=[str(inner)])

    _spec = _real_package_spec()
    _package = importlib.util.module_from_spec(_spec)
    sys.modules["bertbench"] = _package  # the import statement returns what sys.modules holds once this file ran
    _spec.loader.exec_module(_package)
