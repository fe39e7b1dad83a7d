"""`bertbench data inspect`: documents, instances and masking statistics of a pre-training corpus.
`bertbench data build`: a pre-training's data (tokenised corpus, every phase's instance indices) built once,
on every core, before any rank starts (bertbench.data.build); it takes `pretrain`'s options.

The masking statistics run the training collator itself over as many instances (in repeated passes,
each a fresh dynamic mask) as it takes to select at least 20,000 positions, so the shares are
meaningful to about ±0.5 points.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from bertbench.config import DataConfig, is_masked, objective_flags, trains_nsp
from bertbench.data import IGNORE_INDEX

MIN_SELECTED = 20_000
_D = DataConfig()  # defaults shared with `bertbench pretrain` (cheap: config imports no heavy library)


def _help(name: str) -> str:
    """A DataConfig field's help, as `pretrain --help` shows it (declared once, beside the field)."""
    return DataConfig.__dataclass_fields__[name].metadata["help"]


def masking_statistics(instances, collator, tables, min_selected: int = MIN_SELECTED, max_passes: int = 2000) -> dict[str, Any]:
    """Run `collator` over `instances` (repeated passes, `set_epoch(pass)`) until ≥ `min_selected` positions."""
    import torch

    from bertbench.data.masking import dense_labels, masking_counts, pad_batch

    counts: Counter = Counter()
    rows = capped = 0
    passes = 0
    n = len(instances)
    batch_size = 256
    while passes < max_passes and counts["selected"] < min_selected and n:
        collator.set_epoch(passes)
        passes += 1
        for lo in range(0, n, batch_size):
            samples = [instances[i] for i in range(lo, min(n, lo + batch_size))]
            batch = collator(samples)
            original = pad_batch(samples, tables.pad_id, collator.pad_to_multiple_of, collator.max_len)["input_ids"]
            labels = dense_labels(batch)
            if "lm_labels" in samples[0]:  # static masks: the samples hold masked ids; restore the originals
                original = torch.where(labels != IGNORE_INDEX, labels, batch["input_ids"])
            counts.update(masking_counts(original, batch["input_ids"], labels, tables))
            cap = collator.params.max_predictions_per_seq
            if cap is not None:
                n_cand = (~tables.is_special[original]).sum(1).double()
                capped += int((torch.round(n_cand * collator.params.mask_ratio) > cap).sum())
            rows += len(samples)
            if counts["selected"] >= min_selected:
                break
        if "lm_labels" in samples[0]:
            break  # static masks do not change between passes
    sel = max(1, counts["selected"])
    return dict(passes=passes, sequences=rows, candidates=counts["candidates"], selected=counts["selected"],
                selected_share=counts["selected"] / max(1, counts["candidates"]), mask_share=counts["mask"] / sel,
                kept_share=counts["kept"] / sel, random_share=counts["random"] / sel,
                selected_special=counts["selected_special"], random_special=counts["random_special"],
                cap_binds_share=capped / max(1, rows) if collator.params.max_predictions_per_seq is not None else 0.0)


def _show(data, tokenizer, collator, n: int, objective: str) -> None:
    from rich.console import Console
    from rich.text import Text

    from bertbench.data.masking import dense_labels

    console = Console()
    n = min(n, len(data.train))
    if n == 0:
        return
    samples = [data.train[i] for i in range(n)]
    collator.set_epoch(0)
    batch = collator(samples)
    console.print(
        "[bold]legend:[/] [red][MASK]/original[/]  [yellow]random/original[/]  [green underline]kept[/]  "
        "[cyan]segment B[/]" + ("  (causal: every next token is a label)" if not is_masked(objective) else "")
    )
    for row, s in enumerate(samples):
        text = Text()
        ids = s["input_ids"]
        labels = dense_labels(batch)[row].tolist()
        out = batch["input_ids"][row].tolist()
        static = "lm_labels" in s
        for t, tok_id in enumerate(ids.tolist()):
            orig = labels[t] if static and labels[t] != IGNORE_INDEX else tok_id
            tok = tokenizer.convert_ids_to_tokens([orig])[0]
            seg_b = s["token_type_ids"][t] == 1
            if is_masked(objective) and labels[t] != IGNORE_INDEX:
                if out[t] == tokenizer.mask_id:
                    text.append(f"[MASK]/{tok}", style="bold red")
                elif out[t] == orig:
                    text.append(tok, style="green underline")
                else:
                    text.append(f"{tokenizer.convert_ids_to_tokens([out[t]])[0]}/{tok}", style="bold yellow")
            else:
                text.append(tok, style="cyan" if seg_b else "")
            text.append(" ")
        label = {0: "IsNext", 1: "NotNext"}.get(s["nsp_label"], "")
        console.print(f"[bold]#{s['index']}[/] {len(ids)} tokens {label}")
        console.print(text)


def document_rule(doc_sentences: int) -> str:
    """What one document of the corpus is, under `--doc-sentences`."""
    whole = "one .txt file" if doc_sentences <= 0 else f"≥ {doc_sentences} sentences of a .txt file, cut at blank lines"
    return f"{whole} / .jsonl line / <doc> block"


def _table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    st, m = result["stats"], result.get("masking")
    table = Table(title="pre-training data", show_header=True)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    table.add_row("documents (train / held-out)", f"{st['train_documents']:,} / {st['heldout_documents']:,}", "")
    table.add_row("  a document is", document_rule(result["config"]["doc_sentences"]), "")
    table.add_row("sentences", f"{st['sentences']:,}", "")
    table.add_row("tokens", f"{st['tokens']:,}", "")
    table.add_row("instances (train / held-out)", f"{st['train_instances']:,} / {st['heldout_instances']:,}", "")
    table.add_row("mean instance length", f"{st['mean_length']:.1f}", f"≤ {result['config']['max_seq_len']}")
    if st["isnext_share"] is not None:
        table.add_row("IsNext share", f"{100 * st['isnext_share']:.1f}%", "50%")
    if m:
        proc = result["config"]["mask_procedure"]
        table.add_row("selected / non-special tokens", f"{100 * m['selected_share']:.2f}%", f"{100 * result['config']['mask_ratio']:.0f}%")
        table.add_row("  → [MASK]", f"{100 * m['mask_share']:.1f}%", f"{proc[0]}%")
        table.add_row("  → kept", f"{100 * m['kept_share']:.1f}%", f"{proc[1]}%")
        table.add_row("  → random", f"{100 * m['random_share']:.1f}%", f"{proc[2]}%")
        table.add_row("selected positions (passes)", f"{m['selected']:,} ({m['passes']})", "")
        if result["config"]["max_predictions_per_seq"] is not None:
            table.add_row("sequences where the cap binds", f"{100 * m['cap_binds_share']:.1f}%", "")
    console = Console()
    console.print(table)
    console.print(f"fingerprint {result['fingerprint'][:16]}…  cache {st['cache']}")
    console.print("the cache folder's size, and clearing it: bertbench data cache")
    console.print(f"corpus {st['corpus_seconds']:.2f} s, instances {st['instance_seconds']:.2f} s")


def inspect(
    corpus: Annotated[
        Optional[list[str]],
        typer.Option("--corpus", help="A folder or file (.txt documents, WikiExtractor output, .jsonl) or hub:NAME[:CONFIG]; repeatable."),
    ] = None,
    tokenizer: Annotated[Optional[Path], typer.Option(help="vocab.txt or a tokenizer folder [default: bert-base-uncased vocab in the data dir]")] = None,
    max_seq_len: Annotated[int, typer.Option(help="Tokens per instance, specials included.")] = _D.max_seq_len,
    no_nsp: Annotated[bool, typer.Option("--no-nsp", help="Short for --objective mlm (the paper's No-NSP ablation: contiguous text, no sentence pairs).")] = False,
    full_sentences: Annotated[bool, typer.Option(help="With --objective mlm: RoBERTa-style packing of full sentences across documents.")] = False,
    objective: Annotated[Optional[str], typer.Option(help="mlm+nsp (masked LM + NSP sentence pairs) [default], mlm (masked LM on contiguous text) or clm (left-to-right LM).")] = None,
    mask_ratio: Annotated[float, typer.Option(help="Share of non-special tokens to predict.")] = _D.mask_ratio,
    mask_procedure: Annotated[str, typer.Option(help="% replaced by [MASK] / kept / random, e.g. 80/10/10.")] = "/".join(map(str, _D.mask_procedure)),
    whole_word_mask: Annotated[bool, typer.Option("--whole-word-mask", help="Mask all pieces of a word together.")] = False,
    max_predictions_per_seq: Annotated[Optional[int], typer.Option(help="Cap on predictions per sequence (the paper: 20 at 128).")] = None,
    masking: Annotated[str, typer.Option(help="dynamic (a fresh mask per batch) or static (fixed at preprocessing).")] = _D.masking,
    max_documents: Annotated[Optional[int], typer.Option(help="Read at most this many documents (corpus order).")] = None,
    doc_sentences: Annotated[int, typer.Option(help=_help("doc_sentences"))] = _D.doc_sentences,
    min_heldout_docs: Annotated[int, typer.Option(help=_help("min_heldout_docs"))] = _D.min_heldout_docs,
    heldout_fraction: Annotated[float, typer.Option(help=_help("heldout_fraction"))] = _D.heldout_fraction,
    seed: Annotated[int, typer.Option(help="Data seed: held-out split, instances, masks.")] = _D.seed,
    json_out: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON only.")] = False,
    show: Annotated[int, typer.Option(help="Print this many training instances with their masks highlighted.")] = 0,
) -> None:
    """Documents, sentences, instances and masking statistics of a corpus, with the flags of pretrain.

    A document is one .txt file (with --doc-sentences N: each run of blank-line paragraphs of at least N
    sentences), one .jsonl line or one WikiExtractor <doc> block. The tokenised corpus is cached (see
    `bertbench data cache`)."""
    from bertbench.data.instances import build_pretraining_data
    from bertbench.config import parse_mask_procedure
    from bertbench.data.masking import TokenTables, make_collator
    from bertbench.model.tokenizer import WordPieceTokenizer
    from bertbench.paths import BERT_VOCAB, default_data_dir

    objective = objective_flags(objective, no_nsp) or "mlm+nsp"
    tokenizer = tokenizer or default_data_dir() / BERT_VOCAB
    cfg = DataConfig(corpus=list(corpus or []), max_seq_len=max_seq_len, full_sentences=full_sentences,
                     mask_ratio=mask_ratio, mask_procedure=parse_mask_procedure(mask_procedure),
                     whole_word_mask=whole_word_mask, max_predictions_per_seq=max_predictions_per_seq, masking=masking,
                     max_documents=max_documents, doc_sentences=doc_sentences, min_heldout_docs=min_heldout_docs,
                     heldout_fraction=heldout_fraction, seed=seed)
    tok = WordPieceTokenizer.load(tokenizer)
    data = build_pretraining_data(cfg, tok, objective, log=lambda line: typer.echo(line, err=True))
    collator = make_collator(cfg, tok, objective)
    result: dict[str, Any] = dict(
        fingerprint=data.fingerprint,
        objective=objective,
        config=dict(
            corpus=cfg.corpus, max_seq_len=cfg.max_seq_len, nsp=trains_nsp(objective), full_sentences=cfg.full_sentences,
            mask_ratio=cfg.mask_ratio, mask_procedure=cfg.mask_procedure, whole_word_mask=cfg.whole_word_mask,
            max_predictions_per_seq=cfg.max_predictions_per_seq, masking=cfg.masking, max_documents=cfg.max_documents,
            doc_sentences=cfg.doc_sentences, seed=cfg.seed, tokenizer=str(tokenizer), vocab_size=tok.vocab_size,
        ),
        stats=data.stats,
        masking=None,
    )
    if is_masked(objective):
        result["masking"] = masking_statistics(data.train, collator, TokenTables.from_tokenizer(tok))
    if json_out:
        typer.echo(json.dumps(result, indent=2))
    else:
        _table(result)
    if show:
        _show(data, tok, collator, show, objective)


def _build_own_options(
    recipe: Annotated[Optional[str], typer.Option("--recipe", help="Recipe name in recipes/ or a YAML file, as for pretrain; options given beside it override its values.")] = None,
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Expands {data_dir} in recipes (default: $BERTBENCH_DATA_DIR, else ../shared/data beside the bertbench checkout).")] = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="Override any config field: --set data.masking=dynamic.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print what was built, with its throughput, as JSON only.")] = False,
) -> None:
    """The command's own options (the signature `with_config_options` starts from)."""


def _build_command():
    from bertbench.cli_options import with_config_options
    from bertbench.config import PretrainConfig

    @with_config_options(PretrainConfig, _build_own_options)
    def build(**values) -> None:
        """Tokenise the corpus on every core and build every phase's instance indices, once, before any rank
        starts: a `pretrain` with the same options then only memory-maps them. Prints a throughput line."""
        from bertbench.commands.pretrain import corpus_config
        from bertbench.data.build import build_data
        from bertbench.model.tokenizer import WordPieceTokenizer
        from bertbench.training.pretrain_run import phase_plan

        cfg = corpus_config(PretrainConfig, values)
        say = (lambda line: None) if values["json_out"] else typer.echo
        if not cfg.tokenizer or cfg.tokenizer == "train":  # a vocabulary trained on the corpus, kept for pretrain
            from bertbench.model.vocab_cache import build_vocab
            from bertbench.training.pretrain_run import _train_tokenizer

            tok, folder, trained = build_vocab(cfg, lambda: _train_tokenizer(cfg))
            say(f"data build: vocabulary of {tok.vocab_size:,} pieces {'trained on' if trained else 'already trained on'} "
                f"the corpus: {folder} (a pretrain with --tokenizer train on this corpus uses it)")
        else:
            tok = WordPieceTokenizer.load(Path(cfg.tokenizer))
        summary = build_data([dcfg for _, dcfg, _ in phase_plan(cfg)], tok, cfg.objective, cfg.seed,
                             cfg.data.num_proc, echo=say)
        if values["json_out"]:
            typer.echo(json.dumps(summary, indent=2))

    return build



from bertbench.commands.data_cache import cache  # noqa: E402 — the group's third command, in its own module

COMMANDS = {"inspect": inspect, "build": _build_command(), "cache": cache}
