"""`--help` at 80 columns shows every option's names whole (issue 40: `--tokenizer-vocab-size…`)."""
from __future__ import annotations

import click
import pytest
import typer.main
from typer.testing import CliRunner

from bertbench.cli import app

runner = CliRunner()


def _commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*prefix, name))
        else:
            yield (*prefix, name), cmd


COMMANDS = list(_commands(typer.main.get_command(app)))


@pytest.mark.parametrize("path, cmd", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_option_name_is_whole_at_80_columns(path, cmd):
    r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.output.splitlines()) <= 80
    words = {w.strip("│ ,") for line in r.output.splitlines() for w in line.split()}
    for param in (p for p in cmd.params if not getattr(p, "hidden", False)):
        for name in (*param.opts, *param.secondary_opts):
            if name.startswith("--"):
                assert name in words, f"{' '.join(path)}: {name} is not shown whole"
    assert not any(w.startswith("--") and w.endswith("…") for w in words)
