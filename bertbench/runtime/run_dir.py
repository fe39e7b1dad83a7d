"""Run folders: checked where they enter (`--out`), and one process at a time in each.

The lock is `fcntl.flock` on RUN/.lock: the kernel drops it when the process ends, however it ends, so a
crashed or killed run never leaves a folder locked. Only the first process of a multi-process run takes
it; the others are that run's own ranks (Lightning starts them with LOCAL_RANK/NODE_RANK set).
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from bertbench.errors import BertbenchError
from bertbench.runtime.devices import first_process

LOCK_FILE = ".lock"


def prepare_run_dir(out_dir: Path, flag: str = "--out") -> None:
    """Create the folder, or say in one line why it cannot be one (a file, no permission, a full disk)."""
    out_dir = Path(out_dir)
    for p in (out_dir, *out_dir.parents):
        if p.exists() and not p.is_dir():
            raise BertbenchError(f"{flag} {out_dir}: {p} is a file, not a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BertbenchError(f"{flag} {out_dir}: cannot create the folder ({err.strerror})") from None
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise BertbenchError(f"{flag} {out_dir}: the folder is not writable")


def is_spawned_rank() -> bool:
    """Not the first process of a multi-process run: another rank of the run that holds the folder (the rule is
    `devices.first_process`, and `devices.RANK_VARIABLES` are its)."""
    return not first_process()


@contextlib.contextmanager
def lock_run_dir(out_dir: Path) -> Iterator[None]:
    """Hold RUN/.lock for the block; a second process on the same folder gets one clear line."""
    if is_spawned_rank():
        yield
        return
    import fcntl

    path = Path(out_dir) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "another process"
            raise BertbenchError(
                f"{out_dir}: in use by process {holder} (one run per folder); wait for it or choose another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
