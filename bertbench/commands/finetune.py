"""`bertbench finetune` (not implemented yet)."""
from __future__ import annotations

import typer


def finetune() -> None:
    """Not implemented yet."""
    typer.echo("bertbench finetune: not implemented yet", err=True)
    raise typer.Exit(code=2)
