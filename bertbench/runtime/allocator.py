"""glibc malloc tuned for training, set by the CLI for its own process (no LD_PRELOAD, no apt).

Why: glibc serves allocations above its mmap threshold (≥ 128 kB, rising to 32 MB at most) with a fresh
mmap and returns them with munmap on free. A training step allocates and frees the same large activation
and logits buffers every step, so each step page-faults its working set in again: 22k minor faults and
54 ms of system time per BERT-mini step here. tcmalloc avoided that (1.3–1.7× faster steps), but only
where it was installed by hand. `mallopt` gets the same effect inside glibc: no mmap for large blocks and
no trimming of the heap top, so freed memory is reused instead of returned (1.3k faults, 3 ms per step).
The cost is that the process keeps its peak heap until it exits, which a training process does anyway.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

# From glibc's <malloc.h>.
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_MAX = -4

DISABLE_ENV = "BERTBENCH_MALLOC_TUNING"  # "0": leave glibc's defaults (for measuring what the tuning buys)

_state = {"tuned": False}


def tcmalloc_preloaded() -> bool:
    """Whether tcmalloc is mapped into this process (LD_PRELOAD=…libtcmalloc_minimal.so.4)."""
    try:
        return "tcmalloc" in Path("/proc/self/maps").read_text()
    except OSError:
        return "tcmalloc" in os.environ.get("LD_PRELOAD", "")


def tune_glibc_malloc() -> bool:
    """Keep large blocks on the heap and the heap from shrinking; True when applied. Idempotent, and a
    no-op where another allocator is preloaded, where libc is not glibc, or when DISABLE_ENV=0."""
    if _state["tuned"]:
        return True
    if os.environ.get(DISABLE_ENV, "1") == "0" or tcmalloc_preloaded():
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl, macOS: no mallopt
        return False
    ok = (
        mallopt(M_MMAP_MAX, 0) == 1  # large blocks from the heap, reused after free
        and mallopt(M_TRIM_THRESHOLD, 2**31 - 1) == 1  # (a C int) never give the heap top back mid-run
        and mallopt(M_TOP_PAD, 64 << 20) == 1  # grow the heap in 64 MB steps, not page by page
    )
    _state["tuned"] = ok
    return ok


def allocator_name() -> str:
    """What serves this process's allocations: 'tcmalloc', 'glibc-tuned' or 'glibc' (recorded by bench)."""
    if tcmalloc_preloaded():
        return "tcmalloc"
    return "glibc-tuned" if _state["tuned"] else "glibc"
