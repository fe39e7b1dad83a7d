"""`bertbench pretrain` (not implemented yet)."""
from __future__ import annotations

import typer


def pretrain() -> None:
    """Not implemented yet."""
    typer.echo("bertbench pretrain: not implemented yet", err=True)
    raise typer.Exit(code=2)
