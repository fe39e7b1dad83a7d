"""`bertbench data …` (not implemented yet)."""
from __future__ import annotations

import typer


def _todo() -> None:
    """Not implemented yet."""
    typer.echo("bertbench data: not implemented yet", err=True)
    raise typer.Exit(code=2)


COMMANDS = {"todo": _todo}
