"""`bertbench run` (not implemented yet)."""
from __future__ import annotations

import typer


def run() -> None:
    """Not implemented yet."""
    typer.echo("bertbench run: not implemented yet", err=True)
    raise typer.Exit(code=2)
