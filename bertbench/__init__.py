"""bertbench: pre-train BERT, fine-tune it on every task of the paper, and report beside the paper.

Importing the package is cheap: torch is only imported when a model is actually needed.
"""
from __future__ import annotations

from bertbench.runtime.provenance import __version__

__all__ = ["__version__", "load_checkpoint"]


def __getattr__(name: str):
    # Lazy so that `import bertbench` (and `bertbench --help`) never pays for torch.
    if name == "load_checkpoint":
        from bertbench.model.checkpoint import load_checkpoint

        return load_checkpoint
    raise AttributeError(f"module 'bertbench' has no attribute {name!r}")
