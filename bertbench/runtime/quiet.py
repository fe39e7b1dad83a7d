"""A quiet terminal: bertbench's own lines and progress, not the notices of its libraries.

Each notice below is one a user can do nothing about, silenced where it comes from (its own logger, or one
warning matched by its text), never by hiding all logging or all warnings. `bertbench --verbose` keeps them.
"""
from __future__ import annotations

import logging
import sys
import warnings

# Loggers whose INFO lines are start-up banners: "GPU available: False, used: False", "TPU available…",
# "Using bfloat16 Automatic Mixed Precision (AMP)", and the advertisement for a logging service.
BANNER_LOGGERS = (
    "lightning.pytorch.utilities.rank_zero",
    "lightning.fabric.utilities.rank_zero",
    "lightning.fabric.utilities.distributed",  # DDP's "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2", each rank
)

# Warnings raised inside libraries about their own internals (a deprecation between Lightning and torch's
# pytree; not ours to fix, and gone when Lightning updates).
LIBRARY_WARNINGS = (
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",
    # Lightning's hint on every command where Slurm is installed (a login node, a job's own step): bertbench's
    # Slurm jobs start their ranks with srun themselves (studies/launcher.py)
    r"The `srun` command is available on your system but is not used",
)


_silenced = False


def silence_library_noise() -> None:
    global _silenced
    _silenced = True
    for name in BANNER_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for pattern in LIBRARY_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)


# torch.compile's notices of graph breaks (a dozen lines each: where, and which setting would capture the
# op). They are warnings of torch's own logger tree, whose levels torch sets when it is imported: so this is set
# after the import, where a command compiles (`silence_compiler_notices`).
COMPILER_LOGGER = "torch._dynamo"


def silence_compiler_notices() -> None:
    """Call after importing torch, before compiling: the compiler's warnings (graph breaks) go unless --verbose."""
    if _silenced:
        logging.getLogger(COMPILER_LOGGER).setLevel(logging.ERROR)


def is_quiet() -> bool:
    """Whether this process silenced the libraries (a worker process it starts should do the same)."""
    return _silenced


def library_progress_bars() -> bool:
    """Whether a library may draw its own progress bars (tokenizers' trainer): on a terminal, with --verbose or
    when bertbench is used as a library; never on bertbench's quiet terminal, where they would be the only
    lines not ours, nor into a log, where each bar leaves an empty line (three at the top of a --verbose log)."""
    return not _silenced and sys.stdout.isatty()
