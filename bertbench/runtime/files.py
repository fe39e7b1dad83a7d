"""Atomic file writes (write to a temporary file in the same folder, then rename over the target), and the lock
under which one process builds a cache that several may want at once."""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

from bertbench.errors import BertbenchError


def current_umask() -> int:
    """This process's umask, read without changing it (Linux: /proc), else by setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode a new file gets under this process's umask (0644 under 022): for files made by a library that
    writes 0600 whatever the umask (tempfile.mkstemp, safetensors)."""
    return 0o666 & ~current_umask()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, then rename: a reader sees the old file or the new, never half.
    A folder in the way, a full disk or a missing permission is one line naming the file; the old file stays."""
    path = Path(path)
    if path.is_dir():
        raise BertbenchError(f"{path}: is a folder; expected a file name to write")
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        # mkstemp makes the file 0600 whatever the umask: a checkpoint in a shared folder would be unreadable to
        # the others; the file gets the mode any new file gets (0644 under umask 022)
        os.fchmod(fd, new_file_mode())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(err, OSError):
            raise BertbenchError(f"{path}: cannot write ({err.strerror or err}); any earlier file is unchanged") from None
        raise


def build_once(final: Path, build: Callable[[], None], echo: Optional[Callable[[str], None]] = None) -> None:
    """Run `build` to make the cache folder `final` unless it is there already, finished (its `meta.json` is
    written last), under a lock: another process that wants the same folder (every rank of a multi-process
    pre-training starts the same way, as do the parallel stages of a study) waits, then finds it built, instead
    of building it again beside it. A lock file beside the folder, `flock`ed: the kernel releases it when the
    holder exits, however it ends, so a killed build never blocks the next one. The holder removes the file
    before it lets go: a waiter then holds a lock on a name no one else can open, which is harmless, because
    every builder writes into its own temporary folder and the first finished one is kept; the lock only spares
    the work. Where `fcntl` does not exist the builds run side by side that way."""
    final = Path(final)
    if (final / "meta.json").is_file():
        return
    try:
        import fcntl
    except ImportError:  # not POSIX
        build()
        return
    lock = final.parent / f".lock-{final.name}"
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lock, "a+b")
    except OSError as err:  # a file where the folder should be, a read-only place: one line, not a traceback
        why = "a file, not a folder" if final.parent.is_file() else err.strerror or err
        raise BertbenchError(f"{final.parent}: cannot keep the cache here ({why}); set BERTBENCH_CACHE_DIR to a "
                             "writable folder") from None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if echo:
                echo(f"waiting for another process that is building {final}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            if not (final / "meta.json").is_file():  # checked again: the process waited for has usually just built it
                build()
        finally:
            with contextlib.suppress(OSError):
                lock.unlink()
            fcntl.flock(fh, fcntl.LOCK_UN)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def replace_marked_block(document: str, begin: str, end: str, body: str, where: str = "document") -> str:
    """Replace what lies between the marker lines `begin` and `end` (each present exactly once) with `body`."""
    if document.count(begin) != 1 or document.count(end) != 1 or document.index(begin) > document.index(end):
        raise BertbenchError(f"{where}: needs exactly one pair of markers '{begin}' … '{end}'")
    head, rest = document.split(begin, 1)
    _, tail = rest.split(end, 1)
    return head + begin + "\n" + body.rstrip("\n") + "\n" + end + tail
