"""`bertbench convert`: Hugging Face BERT folder ⇄ bertbench checkpoint folder."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from bertbench.errors import BertbenchError


def convert(
    out: Annotated[Path, typer.Option("--out", help="Folder to write.")],
    from_hf: Annotated[Optional[Path], typer.Option("--from-hf", help="Hugging Face BERT folder to import.")] = None,
    to_hf: Annotated[Optional[Path], typer.Option("--to-hf", help="bertbench checkpoint folder to export.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace the files of an existing, non-empty --out folder.")] = False,
) -> None:
    """Import a Hugging Face BERT folder (--from-hf) or export a bertbench checkpoint (--to-hf)."""
    if (from_hf is None) == (to_hf is None):
        raise BertbenchError("give exactly one of --from-hf HF_DIR or --to-hf CKPT_DIR")
    if out.exists() and not out.is_dir():
        raise BertbenchError(f"--out {out}: is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise BertbenchError(f"--out {out}: the folder is not empty; choose another, or pass --force to replace its files")
    from bertbench.model.checkpoint import check_checkpoint_dir, import_hf, load_checkpoint, save_checkpoint

    if from_hf is not None:
        ckpt = import_hf(from_hf)
        save_checkpoint(out, ckpt.model, ckpt.tokenizer, run_config={"imported_from": str(from_hf)})
        note = f" (not in the file, left at fresh init: {', '.join(ckpt.missing_heads)})" if ckpt.missing_heads else ""
        typer.echo(f"imported {from_hf} → {out}{note}")
    else:
        from bertbench.model.hf_compat import write_hf_dir

        check_checkpoint_dir(to_hf)
        ckpt = load_checkpoint(to_hf)
        if ckpt.config.causal:
            typer.echo("note: this model is causal (LTR); transformers' BERT will run it bidirectionally", err=True)
        write_hf_dir(ckpt.model, ckpt.tokenizer, out)
        typer.echo(f"exported {to_hf} → {out}")
