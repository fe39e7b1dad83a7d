"""`bertbench bench pretrain | finetune | data`: throughput against Hugging Face transformers on the same config.

Sides are timed in alternating rounds after a warm-up and reported as medians (see
bertbench/benchmarks/common.py). torch and transformers are imported inside the commands only.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

ModelSize = Annotated[str, typer.Option("--model-size", help="tiny | mini | small | medium | base | large.")]
Precision = Annotated[
    str, typer.Option("--precision", help="Our side's default path: auto (bf16-mixed where bf16 is native) | 32 | bf16-mixed.")
]
Steps = Annotated[int, typer.Option("--steps", help="Timed rounds (each runs every side once).")]
Warmup = Annotated[int, typer.Option("--warmup", help="Untimed rounds first.")]
Threads = Annotated[Optional[int], typer.Option("--threads", help="torch.set_num_threads; default: torch's choice.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the full result as JSON on stdout (progress stays on stderr).")]
Quiet = Annotated[bool, typer.Option("--quiet", help="No progress lines on stderr.")]


def _emit(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    m = result["machine"]
    typer.echo(f"{result['benchmark']}: {m['hardware']}, torch {m['torch']}, {m['threads']} threads")
    if "peak_gflops_per_s" in result:
        p = result["peak_gflops_per_s"]
        typer.echo(f"matmul peak: fp32 {p['fp32']:.0f} GFLOP/s, bf16 {p['bf16']:.0f} GFLOP/s")
    for name, s in result.get("stages", {}).items():
        typer.echo(f"  {name:<28}{s['mb_per_s']:>8.2f} MB/s  ({s['seconds']:.2f} s)")
    for name, s in result.get("sides", {}).items():
        rate = f"{s['tokens_per_s']:>10.0f} tokens/s"
        mfu = f"  MFU {100 * s['mfu_bf16_peak']:.1f}% of bf16 peak" if "mfu_bf16_peak" in s else ""
        loss = f"  loss {s['loss_first']:.3f} → {s['loss_last']:.3f}" if "loss_last" in s else ""
        typer.echo(f"  {name:<28}{rate}{mfu}{loss}")
    for name, c in result.get("comparisons", {}).items():
        typer.echo(
            f"  {name:<40} {c['ours']} / {c['theirs']}: {c['speedup_median']:.2f}x "
            f"(rounds {c['speedup_min']:.2f}–{c['speedup_max']:.2f})"
        )
    typer.echo(f"tcmalloc preloaded: {'yes' if m['tcmalloc'] else 'no'}")
    if result.get("hint"):
        typer.echo(f"hint: {result['hint']}")


def pretrain(
    model_size: ModelSize = "mini",
    vocab_size: Annotated[int, typer.Option("--vocab-size", help="Vocabulary size.")] = 30522,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Sequences per step.")] = 32,
    seq_len: Annotated[int, typer.Option("--seq-len", help="Tokens per sequence (no padding).")] = 128,
    precision: Precision = "auto",
    steps: Steps = 8,
    warmup: Warmup = 2,
    threads: Threads = None,
    as_json: AsJson = False,
    quiet: Quiet = False,
) -> None:
    """Pre-training steps/s of bertbench's default path vs transformers.BertForPreTraining (fp32 and bf16)."""
    from bertbench.benchmarks import common, pretrain as bench_pretrain

    result = bench_pretrain.run(
        model_size, vocab_size, batch_size, seq_len, precision, steps, warmup, threads, common.progress_to_stderr(quiet)
    )
    _emit(result, as_json)


def finetune(
    model_size: ModelSize = "mini",
    vocab_size: Annotated[int, typer.Option("--vocab-size", help="Vocabulary size.")] = 30522,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Examples per step.")] = 32,
    max_len: Annotated[int, typer.Option("--max-len", help="Longest example; the length HF's Trainer example pads to.")] = 128,
    min_len: Annotated[int, typer.Option("--min-len", help="Shortest example (lengths are drawn uniformly).")] = 20,
    group_by_length: Annotated[
        Optional[bool],
        typer.Option("--group-by-length/--no-group-by-length", help="Length-grouped batches for our side; default: the fine-tuning default."),
    ] = None,
    precision: Precision = "auto",
    steps: Steps = 8,
    warmup: Warmup = 2,
    threads: Threads = None,
    as_json: AsJson = False,
    quiet: Quiet = False,
) -> None:
    """Sequence-classification fine-tuning steps: TaskModel vs transformers.BertForSequenceClassification."""
    from bertbench.benchmarks import common, finetune as bench_finetune

    result = bench_finetune.run(
        model_size, batch_size, min_len, max_len, precision, steps, warmup, threads, common.progress_to_stderr(quiet),
        vocab_size=vocab_size, group_by_length=group_by_length,
    )
    _emit(result, as_json)


def data(
    corpus: Annotated[
        Optional[Path], typer.Option("--corpus", help="A text file or folder; default: a synthetic corpus.")
    ] = None,
    tokenizer: Annotated[
        Optional[Path], typer.Option("--tokenizer", help="vocab.txt or tokenizer folder (needed with --corpus).")
    ] = None,
    synthetic_mb: Annotated[float, typer.Option("--synthetic-mb", help="Size of the synthetic corpus.")] = 2.0,
    seq_len: Annotated[int, typer.Option("--seq-len", help="max_seq_len of the instances.")] = 128,
    repeats: Annotated[int, typer.Option("--repeats", help="Timed passes (median reported).")] = 3,
    as_json: AsJson = False,
    quiet: Quiet = False,
) -> None:
    """Corpus → pre-training instances, in MB of text per second."""
    from bertbench.benchmarks import common, data as bench_data

    result = bench_data.run(corpus, synthetic_mb, seq_len, repeats, common.progress_to_stderr(quiet), tokenizer)
    _emit(result, as_json)


COMMANDS = {"pretrain": pretrain, "finetune": finetune, "data": data}
