"""`bertbench data cache`: where the tokenised corpora are kept, how much room they take, and clearing them
(docs/first-day.md, "The cache"). Each is `<cache>/corpus-<key>/` with its instance indexes (`bertbench.data.corpus`).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Annotated, Any

import typer

# What bertbench writes into the cache folder (a corpus folder, its temporary build folder, its lock file):
# `--clear` removes these and nothing else, so a cache folder shared with other files loses only ours
OURS = ("corpus-*", ".tmp-corpus-*", ".lock-corpus-*", "vocab-*", ".tmp-vocab-*")  # vocab-*: model/vocab_cache.py


def folder_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def cache_entries(root: Path) -> list[Path]:
    return sorted({p for pattern in OURS for p in root.glob(pattern)}) if root.is_dir() else []


def describe(root: Path) -> dict[str, Any]:
    entries = cache_entries(root)
    corpora = []
    for p in entries:
        if not p.name.startswith("corpus-"):
            continue
        try:
            meta = json.loads((p / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        corpora.append(dict(folder=str(p), bytes=folder_bytes(p), corpus=meta.get("corpus"),
                            documents=meta.get("documents"), tokens=meta.get("tokens")))
    return dict(folder=str(root), bytes=sum(folder_bytes(p) for p in entries), corpora=corpora)


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def cache(
    clear: Annotated[bool, typer.Option("--clear", help="Delete the tokenised corpora (rebuilt by the next run that needs them).")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON only.")] = False,
) -> None:
    """Where tokenised corpora are cached ($BERTBENCH_CACHE_DIR, else ~/.cache/bertbench), their size, and --clear."""
    from bertbench.data.corpus import default_cache_dir

    root = default_cache_dir()
    info = describe(root)
    if clear:
        for p in cache_entries(root):
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        typer.echo(f"cleared {root}: {_mb(info['bytes'])} freed ({len(info['corpora'])} tokenised corpora)")
        return
    if json_out:
        typer.echo(json.dumps(info, indent=2))
        return
    typer.echo(f"cache folder: {root}  (set BERTBENCH_CACHE_DIR to move it)")
    typer.echo(f"{len(info['corpora'])} tokenised corpora, {_mb(info['bytes'])}")
    for c in info["corpora"]:
        what = ", ".join(c["corpus"]) if c["corpus"] else "(unfinished build)"
        docs = f"{c['documents']:,} documents, " if c["documents"] is not None else ""
        typer.echo(f"  {Path(c['folder']).name}  {_mb(c['bytes'])}  {docs}{what}")
    typer.echo("clear it with: bertbench data cache --clear  (the next run tokenises its corpus again)")
