"""The `bertbench` command line: one thin function per command, heavy imports inside the commands.

Each command lives in `bertbench/commands/<name>.py`; its typed signature *is* the CLI (LitGPT style).
Importing this module must not import torch, lightning, datasets or transformers (tested).
"""
from __future__ import annotations

import functools
import sys
from typing import Annotated, Optional

import typer

from bertbench import __version__
from bertbench.commands import bench, convert, data, finetune, plan, pretrain, report, run, tasks
from bertbench.errors import BertbenchError

app = typer.Typer(name="bertbench", no_args_is_help=True, add_completion=False,
                  help="Pre-train BERT, fine-tune it on the paper's tasks, and report beside the paper's numbers.",
                  pretty_exceptions_enable=False)


def _flags_show_no_value_placeholder() -> None:
    """Typer puts `<bool>` after an on/off flag in --help, which reads as if it took a value (`--whole-word-mask
    true` then fails): a flag's type column stays empty, for every command at once."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich

    def display_type_rich(self, ctx):
        return None if self.is_flag and not self.count else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich


_flags_show_no_value_placeholder()


def _option_names_never_cut() -> None:
    """Typer's help tables make their columns on the first row, and such a column cuts a word too long for it
    with an ellipsis: at 80 columns `--tokenizer-vocab-size,--vocab-size` read `--tokenizer-vocab-size…`. Here an
    option's names (its aliases and its --no- form) go one per line in its first column, and every column but
    the help text (which wraps) is unbreakable: every name is shown whole, and the help keeps its width."""
    from rich.table import Table
    from typer import rich_utils

    class WholeNamesTable(Table):
        def add_row(self, *cells, **kwargs):
            cells = list(cells)
            if len(cells) >= 6:  # an option: [required], names, short names, --no- names, short --no-, type, help
                i = len(cells) - 6
                names = [n for cell in (cells[i], cells[i + 2]) for n in str(cell).split(",") if n]
                cells[i], cells[i + 2] = rich_utils.highlighter("\n".join(names)), ""
            if not self.columns:
                for k in range(len(cells)):
                    self.add_column(no_wrap=k < len(cells) - 1)
            super().add_row(*cells, **kwargs)

    rich_utils.Table = WholeNamesTable


_option_names_never_cut()


def user_errors(fn):
    """Turn a `BertbenchError` into one red line on stderr and exit code 2 — never a traceback. In a
    multi-process (DDP) run every rank meets the same error: the first process says it, the others only exit
    with the same code (a rank is known from the launchers' environment, `run_dir.is_spawned_rank`)."""
    from bertbench.runtime.run_dir import is_spawned_rank

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BertbenchError as err:
            if not is_spawned_rank():
                typer.secho(f"error: {err}", fg="red", err=True)
            raise typer.Exit(code=err.exit_code) from None
        except KeyboardInterrupt:
            typer.secho("interrupted (checkpoints written so far are intact; rerun with --resume auto)", err=True)
            raise typer.Exit(code=130) from None

    return wrapper


def _version(value: bool) -> None:
    if value:
        typer.echo(f"bertbench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Also show the libraries' own notices and warnings.")] = False,
) -> None:
    if not verbose:
        from bertbench.runtime.quiet import silence_library_noise

        silence_library_noise()


for command in (pretrain.pretrain, finetune.finetune, report.report, plan.plan, run.run, convert.convert):
    app.command(command.__name__)(user_errors(command))


def _group(module, name: str, help: str) -> None:
    """A noun group (`tasks ls`, `data inspect`, `bench pretrain`) from a module's `COMMANDS` dict."""
    sub = typer.Typer(no_args_is_help=True, help=help)
    for cmd_name, fn in module.COMMANDS.items():
        sub.command(cmd_name)(user_errors(fn))
    app.add_typer(sub, name=name)


_group(tasks, "tasks", "List and validate the fine-tuning tasks in tasks/.")
_group(data, "data", "Inspect pre-training data (documents, instances, masking statistics) and its cache.")
_group(bench, "bench", "Throughput benchmarks against Hugging Face transformers on the same config.")


def main() -> None:
    from bertbench.runtime.allocator import tune_glibc_malloc

    tune_glibc_malloc()  # before torch allocates anything (see allocator.py)
    app()


if __name__ == "__main__":
    sys.exit(main())
