"""`bertbench tasks ls` and `bertbench tasks validate`: look at the task files without running a model."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from bertbench.cli_options import TasksDirOption

DataDirOption = Annotated[
    Optional[Path],
    typer.Option("--data-dir", help="Where the task data lives (default: $BERTBENCH_DATA_DIR, else ../shared/data)."),
]


def ls(data_dir: DataDirOption = None, tasks_dir: TasksDirOption = None) -> None:
    """List every task: family, type, primary metric, eval kind, version, and whether its local data is present."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from bertbench.paths import default_data_dir
    from bertbench.tasks import task_registry

    data_dir = data_dir or default_data_dir()
    registry = task_registry(tasks_dir)
    tasks = registry.tasks
    table = Table(title=f"bertbench tasks (local data: {escape(str(data_dir))})")
    for col in ("task", "family", "type", "metric", "eval", "v"):
        table.add_column(col, no_wrap=True)
    table.add_column("local data")
    for t in sorted(tasks.values(), key=lambda t: (t.family, t.name)):
        missing = t.missing_local_files(data_dir)
        if t.local is None:
            local = "[dim]none (hub only)[/dim]"
        elif not missing:
            local = "[green]present[/green]"
        else:
            shown = escape(", ".join(str(p.relative_to(data_dir) if p.is_relative_to(data_dir) else p)
                                     for p in missing))
            local = f"[red]missing[/red] {shown}" + (" [dim](hub)[/dim]" if t.hub is not None else "")
        table.add_row(t.name, t.family, t.type, t.primary_metric, t.eval_kind, str(t.version), local)
    console = Console()
    if not console.is_terminal:  # piped or captured: wide enough that no column is squeezed to nothing
        console = Console(width=200)
    console.print(table)
    for name in registry.broken:  # listed, not fatal: a bad file fails only the command that asks for its task
        typer.secho(f"not loaded: {name} ({registry.broken[name]}); see bertbench tasks validate", fg="red", err=True)


def validate(tasks_dir: TasksDirOption = None) -> None:
    """Load every task file and report every problem at once (exit code 2 if there is any)."""
    from bertbench.tasks import collect_tasks

    tasks, problems = collect_tasks(tasks_dir)
    for p in problems:
        typer.secho(p, fg="red", err=True)
    if problems:
        typer.secho(f"{len(problems)} problem(s); {len(tasks)} task(s) valid", fg="red", err=True)
        raise typer.Exit(code=2)
    typer.echo(f"ok: {len(tasks)} tasks valid ({', '.join(sorted(tasks))})")


COMMANDS = {"ls": ls, "validate": validate}
