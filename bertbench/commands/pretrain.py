"""`bertbench pretrain`: train a BERT encoder from raw text (every ablation of the paper is a switch)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from bertbench.config import MODEL_SIZES, PAPER_MASK_PROCEDURE, PAPER_MASK_RATIO
from bertbench.errors import BertbenchError

DATA = "Data and masking"
OPT = "Optimisation"
HW = "Hardware"


def build_config(recipe: Optional[str], flags: dict, data_flags: dict, optim_flags: dict, sets: list[str]):
    from dataclasses import replace

    from bertbench.config import PretrainConfig, apply_overrides, load_config, resolve_recipe

    cfg = load_config(PretrainConfig, resolve_recipe(recipe)) if recipe else PretrainConfig()
    data = replace(cfg.data, **{k: v for k, v in data_flags.items() if v is not None})
    optim = replace(cfg.optim, **{k: v for k, v in optim_flags.items() if v is not None})
    cfg = replace(cfg, data=data, optim=optim, **{k: v for k, v in flags.items() if v is not None})
    if sets:
        cfg = apply_overrides(cfg, sets)
    return cfg


def pretrain(
    out: Annotated[Path, typer.Option("--out", help="Run directory to write (checkpoint, metrics.csv, summary.json).")],
    corpus: Annotated[Optional[list[str]], typer.Option("--corpus", help="Text source: .txt folder, WikiExtractor files, .jsonl, or hub:NAME. Repeat to mix.", rich_help_panel=DATA)] = None,
    recipe: Annotated[Optional[str], typer.Option("--recipe", help="Recipe name in recipes/ (tiny-debug, cpu-quick, cpu-hour, bert-base-paper) or a YAML file.")] = None,
    model_size: Annotated[Optional[str], typer.Option("--model-size", help=", ".join(MODEL_SIZES) + ".")] = None,
    tokenizer: Annotated[Optional[str], typer.Option("--tokenizer", help="vocab.txt or tokenizer folder; 'train' trains WordPiece on the corpus.")] = None,
    vocab_size: Annotated[Optional[int], typer.Option("--vocab-size", help="Vocabulary size when training a tokenizer.")] = None,
    objective: Annotated[Optional[str], typer.Option("--objective", help="mlm+nsp (BERT: masked LM + next-sentence prediction, the default), mlm (masked LM alone on contiguous text: the paper's 'No NSP') or clm (left-to-right LM: the paper's 'LTR & No NSP').")] = None,
    no_nsp: Annotated[bool, typer.Option("--no-nsp", help="Short for --objective mlm.", rich_help_panel=DATA)] = False,
    full_sentences: Annotated[bool, typer.Option("--full-sentences", help="With --objective mlm: RoBERTa-style packing across documents.", rich_help_panel=DATA)] = False,
    mask_ratio: Annotated[Optional[float], typer.Option("--mask-ratio", help=f"Share of tokens selected for prediction ({PAPER_MASK_RATIO}).", rich_help_panel=DATA)] = None,
    mask_procedure: Annotated[Optional[str], typer.Option("--mask-procedure", help=f"MASK/SAME/RND percentages ({'/'.join(map(str, PAPER_MASK_PROCEDURE))}; Table 8 of the paper).", rich_help_panel=DATA)] = None,
    whole_word_mask: Annotated[bool, typer.Option("--whole-word-mask", help="Select whole words.", rich_help_panel=DATA)] = False,
    max_predictions_per_seq: Annotated[Optional[int], typer.Option("--max-predictions-per-seq", rich_help_panel=DATA)] = None,
    masking: Annotated[Optional[str], typer.Option("--masking", help="dynamic (a fresh mask per batch) or static (fixed, dupe_factor copies).", rich_help_panel=DATA)] = None,
    dupe_factor: Annotated[Optional[int], typer.Option("--dupe-factor", rich_help_panel=DATA)] = None,
    max_seq_len: Annotated[Optional[int], typer.Option("--max-seq-len", rich_help_panel=DATA)] = None,
    max_documents: Annotated[Optional[int], typer.Option("--max-documents", help="Use only the first N documents.", rich_help_panel=DATA)] = None,
    batch_size: Annotated[Optional[int], typer.Option("--batch-size", rich_help_panel=OPT)] = None,
    grad_accum: Annotated[Optional[int], typer.Option("--grad-accum", rich_help_panel=OPT)] = None,
    max_steps: Annotated[Optional[int], typer.Option("--max-steps", rich_help_panel=OPT)] = None,
    budget_minutes: Annotated[Optional[float], typer.Option("--budget-minutes", help="Schedule over wall-clock minutes instead of steps.", rich_help_panel=OPT)] = None,
    lr: Annotated[Optional[float], typer.Option("--lr", rich_help_panel=OPT)] = None,
    warmup_steps: Annotated[Optional[int], typer.Option("--warmup-steps", rich_help_panel=OPT)] = None,
    precision: Annotated[Optional[str], typer.Option("--precision", help="auto (bf16 where native), 32, bf16-mixed, 16-mixed.", rich_help_panel=HW)] = None,
    devices: Annotated[Optional[str], typer.Option("--devices", help="Passed to Lightning.", rich_help_panel=HW)] = None,
    accelerator: Annotated[Optional[str], typer.Option("--accelerator", rich_help_panel=HW)] = None,
    strategy: Annotated[Optional[str], typer.Option("--strategy", help="Lightning strategy: auto, ddp, fsdp, …", rich_help_panel=HW)] = None,
    num_nodes: Annotated[Optional[int], typer.Option("--num-nodes", rich_help_panel=HW)] = None,
    seed: Annotated[Optional[int], typer.Option("--seed")] = None,
    eval_every: Annotated[Optional[int], typer.Option("--eval-every")] = None,
    checkpoint_every: Annotated[Optional[int], typer.Option("--checkpoint-every")] = None,
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Expands {data_dir} in recipes (default: $BERTBENCH_DATA_DIR or ../shared/data).")] = None,
    resume: Annotated[str, typer.Option("--resume", help="'auto': continue from RUN/checkpoints/last.ckpt if present.")] = "never",
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="Override any config field: --set optim.lr=3e-4.")] = None,
    stop_at_step: Annotated[Optional[int], typer.Option("--stop-at-step", hidden=True, help="Checkpoint and stop at this step (simulated pre-emption).")] = None,
) -> None:
    """Pre-train a BERT encoder (MLM+NSP, MLM only, or the causal LTR baseline) and write a run directory."""
    if resume not in ("never", "auto"):
        raise BertbenchError(f"--resume {resume!r}: expected 'auto' or 'never'")
    from bertbench.config import objective_flags

    flags = dict(
        model_size=model_size, tokenizer=tokenizer, tokenizer_vocab_size=vocab_size,
        objective=objective_flags(objective, no_nsp),
        batch_size=batch_size, grad_accum=grad_accum, max_steps=max_steps, budget_minutes=budget_minutes,
        precision=precision, devices=devices, accelerator=accelerator, strategy=strategy, num_nodes=num_nodes,
        seed=seed, eval_every=eval_every, checkpoint_every=checkpoint_every,
    )
    from bertbench.data.masking import parse_mask_procedure

    data_flags = dict(
        corpus=list(corpus) if corpus else None, full_sentences=full_sentences or None,
        mask_ratio=mask_ratio, mask_procedure=parse_mask_procedure(mask_procedure) if mask_procedure else None,
        whole_word_mask=whole_word_mask or None, max_predictions_per_seq=max_predictions_per_seq, masking=masking,
        dupe_factor=dupe_factor, max_seq_len=max_seq_len, max_documents=max_documents,
    )
    from bertbench.paths import default_data_dir

    cfg = build_config(recipe, flags, data_flags, dict(lr=lr, warmup_steps=warmup_steps), set_ or [])
    cfg = cfg.with_data_dir(data_dir or default_data_dir())
    if not cfg.data.corpus:
        raise BertbenchError("no corpus: give --corpus DIR (repeatable) or a recipe that names one")

    from bertbench.training.pretrain_run import pretrain as run_pretraining

    summary = run_pretraining(cfg, out, resume=resume, stop_at_step=stop_at_step)
    if "worker_rank" in summary:  # one process of several: rank 0 says how the run ended
        return
    if "stopped_at_step" in summary:
        typer.echo(f"stopped at step {summary['stopped_at_step']}; continue with --resume auto")
        return
    held = ", ".join(f"{k} {v:.3f}" for k, v in summary.get("heldout", {}).items())
    typer.echo(
        f"done: {summary['steps']} steps, {summary['tokens_seen']:,} tokens in {summary['wall_seconds']:.0f} s "
        f"({summary['tokens_per_second']:.0f} tok/s); held-out: {held}\ncheckpoint: {out / 'checkpoint'}"
    )
