"""Atomic file writes: write to a temporary file in the same folder, then rename over the target."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from bertbench.errors import BertbenchError


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


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def replace_marked_block(document: str, begin: str, end: str, body: str, where: str = "document") -> str:
    """Replace what lies between the marker lines `begin` and `end` (each present exactly once) with `body`."""
    from bertbench.errors import BertbenchError

    if document.count(begin) != 1 or document.count(end) != 1 or document.index(begin) > document.index(end):
        raise BertbenchError(f"{where}: needs exactly one pair of markers '{begin}' … '{end}'")
    head, rest = document.split(begin, 1)
    _, tail = rest.split(end, 1)
    return head + begin + "\n" + body.rstrip("\n") + "\n" + end + tail
