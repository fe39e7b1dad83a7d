"""`bertbench report` (not implemented yet)."""
from __future__ import annotations

import typer


def report() -> None:
    """Not implemented yet."""
    typer.echo("bertbench report: not implemented yet", err=True)
    raise typer.Exit(code=2)
