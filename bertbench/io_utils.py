"""Atomic file writes: write to a temporary file in the same folder, then rename over the target."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
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
