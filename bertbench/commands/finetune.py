"""`bertbench finetune`: fine-tune a checkpoint on the paper's tasks and write result records."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from bertbench.errors import BertbenchError

BUDGET = "CPU budgets (recorded in every result)"


def finetune(
    model: Annotated[str, typer.Option("--model", help="bertbench checkpoint or run folder, a Hugging Face BERT folder, or random:<size> (the no-pre-training control).")],
    tasks: Annotated[str, typer.Option("--tasks", help="Comma-separated task names, families (glue, squad, swag, conll2003) or 'all'.")],
    out: Annotated[Path, typer.Option("--out", help="Folder for result records and predictions files.")],
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Task data in the official layout (default: $BERTBENCH_DATA_DIR or ../shared/data).")] = None,
    tokenizer: Annotated[Optional[str], typer.Option("--tokenizer", help="vocab.txt or tokenizer folder (required meaning for random:<size>; default bert-base-uncased vocab).")] = None,
    seeds: Annotated[Optional[str], typer.Option("--seeds", help="Comma-separated seeds (default: the task's own; several for RTE, MRPC, STS-B, CoLA).")] = None,
    grid: Annotated[str, typer.Option("--grid", help="'heldout': sweep the task's lr grid, select on a slice held out of train, report on dev; 'paper': select on dev itself, as the paper did; 'none': one lr.")] = "none",
    lr: Annotated[Optional[float], typer.Option("--lr", help="Learning rate when --grid none (default: the grid's first).")] = None,
    epochs: Annotated[Optional[float], typer.Option("--epochs")] = None,
    batch_size: Annotated[Optional[int], typer.Option("--batch-size")] = None,
    max_seq_len: Annotated[Optional[int], typer.Option("--max-seq-len")] = None,
    max_steps: Annotated[Optional[int], typer.Option("--max-steps", rich_help_panel=BUDGET)] = None,
    max_train_examples: Annotated[Optional[int], typer.Option("--max-train-examples", rich_help_panel=BUDGET)] = None,
    max_eval_examples: Annotated[Optional[int], typer.Option("--max-eval-examples", rich_help_panel=BUDGET)] = None,
    precision: Annotated[str, typer.Option("--precision", help="auto (bf16 where native), 32, bf16-mixed.")] = "auto",
    feature_based: Annotated[bool, typer.Option("--feature-based", help="NER only: frozen encoder, last four layers concatenated, 2-layer BiLSTM (paper Table 7).")] = False,
    source: Annotated[str, typer.Option("--source", help="Task data: auto (local files first), local, or hub.")] = "auto",
) -> None:
    """Fine-tune a model on the paper's tasks; one result record per (task, seed, setting)."""
    from bertbench.data.task_readers import check_source
    from bertbench.finetune_settings import flag_name
    from bertbench.training.finetune_run import FinetuneRequest, run_finetune

    check_source(source, "--source")
    seed_list = None
    if seeds:
        try:
            seed_list = [int(s) for s in seeds.split(",") if s.strip()]
        except ValueError:
            raise BertbenchError(f"--seeds {seeds!r}: expected comma-separated integers") from None
    req = FinetuneRequest(
        model=model, tasks=tasks, out=out, data_dir=data_dir, tokenizer=tokenizer, seeds=seed_list, grid=grid, lr=lr,
        epochs=epochs, batch_size=batch_size, max_seq_len=max_seq_len, max_steps=max_steps,
        max_train_examples=max_train_examples, max_eval_examples=max_eval_examples, precision=precision,
        feature_based=feature_based, source=source,
    )
    req.check(flag_name)  # every value checked before anything loads
    written = run_finetune(req, echo=typer.echo)
    typer.echo(f"{len(written)} result records in {out}")
