"""`bench quality`: what a model knows after the same wall-clock minutes, bertbench against Hugging Face.

The sides (ours, hf, ours-recipe), the wall-clock schedule, the held-out set and the unigram baseline are as
docs/quality-per-minute.md says. The schedule is `pretrain_module.linear_warmup_decay` over training seconds;
the hf side also clips gradients at 1.0 and decays no bias or LayerNorm weight (`pretrain.hf_adamw`).
"""
from __future__ import annotations

import dataclasses
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from bertbench.benchmarks import common
from bertbench.config import PAPER_MASK_RATIO, trains_nsp
from bertbench.data import IGNORE_INDEX
from bertbench.errors import BertbenchError
from bertbench.paths import BERT_VOCAB, portable

SIDES = ("ours", "hf", "ours-recipe")
HF_LR = 5e-4  # run_mlm's usual choice for a small BERT (../shared/docs/library-notes.md, outside the repository)
HF_WARMUP = 0.05
EVAL_SEED = 20181011  # the masks of the held-out set: fixed, the same for every side
EVAL_SEQUENCES = 512
NUM_POINTS = 6  # evaluations along the run (plus one at the start)


@dataclasses.dataclass
class HeldOut:
    """Masked held-out batches and the unigram baseline on their masked positions."""

    batches: list[dict[str, Any]]
    positions: int
    unigram_accuracy: float
    unigram_loss: float
    fingerprint: str  # sha256 of the masked ids and labels: identical positions ⇔ identical fingerprint


def build_heldout(cfg, tokenizer, data, batch_size: int = 32) -> HeldOut:
    """From the run's held-out documents: `[CLS] chunk [SEP]` sequences of the final sequence length, masked once."""
    import hashlib

    import numpy as np
    import torch

    from bertbench.config import DataConfig
    from bertbench.data.instances import make_instances
    from bertbench.data.masking import dense_labels, make_collator

    seq_cfg = DataConfig(max_seq_len=final_seq_len(cfg), short_seq_prob=0.0)  # contiguous text: objective "mlm"
    instances = make_instances(data.corpus, data.heldout_docs, seq_cfg, "mlm", random.Random(EVAL_SEED),
                               tokenizer.cls_id, tokenizer.sep_id)
    n = min(EVAL_SEQUENCES, len(instances))
    if n == 0:
        raise BertbenchError("bench quality: the held-out documents hold no sequence")
    collate = make_collator(seq_cfg, tokenizer, "mlm", seed=EVAL_SEED)
    batches = []
    for i, lo in enumerate(range(0, n, batch_size)):
        collate.set_epoch(i)
        b = collate([instances[j] for j in range(lo, min(n, lo + batch_size))])
        b["lm_labels"] = dense_labels(b)  # (B, T): what transformers' side reads too
        del b["lm_positions"]
        batches.append(b)
    digest = hashlib.sha256()
    for b in batches:
        digest.update(b["input_ids"].numpy().tobytes())
        digest.update(b["lm_labels"].numpy().tobytes())
    # unigram statistics of the *training* documents
    corpus = data.corpus
    counts = np.zeros(tokenizer.vocab_size, dtype=np.int64)
    so, do = corpus.sent_offsets, corpus.doc_offsets
    for d in data.train_docs:
        counts += np.bincount(np.asarray(corpus.tokens[so[do[d]]:so[do[d + 1]]], dtype=np.int64), minlength=tokenizer.vocab_size)
    probs = (counts + 1) / (counts.sum() + tokenizer.vocab_size)  # add-one: no target gets probability 0
    top = int(counts.argmax())
    targets = torch.cat([b["lm_labels"][b["lm_labels"] != IGNORE_INDEX] for b in batches]).numpy()
    return HeldOut(
        batches=batches,
        positions=int(targets.size),
        unigram_accuracy=100.0 * float((targets == top).mean()),
        unigram_loss=float(-np.log(probs[targets]).mean()),
        fingerprint=digest.hexdigest()[:16],
    )


def final_seq_len(cfg) -> int:
    """The sequence length a run ends at: its last phase's, else data.max_seq_len (held-out and HF blocks use it)."""
    return cfg.phases[-1].max_seq_len if cfg.phases else cfg.data.max_seq_len


def score(model, heldout: HeldOut, hf: bool) -> dict[str, float]:
    """Held-out MLM accuracy (%) and cross-entropy (nats) at the masked positions, in fp32, by the run's own
    evaluator (training.heldout): our side through the model's loss and logits, the Hugging Face side through
    its logits (`hf_counts`)."""
    from bertbench.training.heldout import model_counts, score as heldout_score

    result = heldout_score(model, heldout.batches, "32-true", hf_counts if hf else model_counts)
    return {"mlm_accuracy": round(result.accuracy, 3), "mlm_loss": round(result.loss, 4)}


def hf_counts(model, batch: dict[str, Any]):
    """A transformers masked LM's counts on a batch of dense labels (training.heldout.Counts)."""
    import torch.nn.functional as F

    from bertbench.training.heldout import Counts

    logits = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                   attention_mask=batch["attention_mask"]).logits
    sel = batch["lm_labels"] != IGNORE_INDEX
    logits, targets = logits[sel].float(), batch["lm_labels"][sel]
    return Counts(float(F.cross_entropy(logits, targets, reduction="sum")), float((logits.argmax(-1) == targets).sum()),
                  targets.numel())


class Probe:
    """Evaluates at evenly spaced points of the budget, with the training clock paused."""

    def __init__(self, heldout: HeldOut, budget_s: float, points: int, hf: bool,
                 progress: Optional[Callable[[str], None]], name: str):
        self.heldout, self.hf, self.progress, self.name = heldout, hf, progress, name
        self.marks = [budget_s * k / points for k in range(points + 1)]  # 0 … budget
        self.curve: list[dict[str, Any]] = []

    def due(self, training_s: float) -> bool:
        return len(self.curve) < len(self.marks) and training_s >= self.marks[len(self.curve)]

    def record(self, model, training_s: float, tokens: int, step: int) -> None:
        point = {"minutes": round(training_s / 60, 3), "tokens": int(tokens), "step": step, **score(model, self.heldout, self.hf)}
        self.curve.append(point)
        if self.progress:
            self.progress(f"{self.name}: {point['minutes']:.1f} min, {tokens:,} tokens, held-out MLM accuracy "
                          f"{point['mlm_accuracy']:.2f}%, loss {point['mlm_loss']:.3f}")


# ----------------------------------------------------------------------------------------------
# Our side: `bertbench pretrain` itself, with the probe as a Lightning callback.


def run_ours(cfg, heldout: HeldOut, out_dir: Path, points: int, progress, name: str) -> dict[str, Any]:
    from bertbench.training.callbacks import QualityProbe
    from bertbench.training.pretrain_run import pretrain

    probe = Probe(heldout, cfg.budget_minutes * 60, points, hf=False, progress=progress, name=name)
    summary = pretrain(cfg, out_dir, extra_callbacks=[QualityProbe(probe)])
    return {
        "impl": "bertbench", "tokens_seen": summary["tokens_seen"], "steps": summary["steps"],
        "training_seconds": summary["schedule"]["training_seconds"],
        "tokens_per_s": round(summary["tokens_seen"] / max(1e-9, summary["schedule"]["training_seconds"]), 1),
        "precision": summary["precision"], "vocab_size": summary["model_config"]["vocab_size"],
        "parameters": summary["parameters"], "curve": probe.curve, "final": probe.curve[-1],
        "settings": {"recipe_batch_size": cfg.batch_size, "lr": cfg.optim.lr, "warmup_share": cfg.optim.warmup_fraction,
                     "nsp": trains_nsp(cfg.objective), "mask_ratio": cfg.data.mask_ratio, "dropout": cfg.model.get("dropout", 0.1)},
    }


# ----------------------------------------------------------------------------------------------
# The Hugging Face side.


def hf_blocks(data, tokenizer, seq_len: int):
    """run_mlm's group_texts: `[CLS] doc [SEP]` for every training document, concatenated, cut into blocks."""
    import numpy as np

    corpus = data.corpus
    so, do = corpus.sent_offsets, corpus.doc_offsets
    parts = []
    for d in data.train_docs:
        parts += [np.array([tokenizer.cls_id]), np.asarray(corpus.tokens[so[do[d]]:so[do[d + 1]]], dtype=np.int64),
                  np.array([tokenizer.sep_id])]
    stream = np.concatenate(parts)
    n = len(stream) // seq_len
    return stream[: n * seq_len].reshape(n, seq_len)


def run_hf(cfg, tokenizer, data, heldout: HeldOut, points: int, progress, name: str) -> dict[str, Any]:
    import numpy as np
    import torch
    from transformers import BertForMaskedLM, BertTokenizerFast, DataCollatorForLanguageModeling

    from bertbench.benchmarks.pretrain import hf_adamw, hf_config
    from bertbench.model.bert import BertForPreTraining
    from bertbench.runtime.provenance import resolve_precision
    from bertbench.training.pretrain_module import linear_warmup_decay
    from bertbench.training.pretrain_run import model_config_for

    torch.manual_seed(cfg.seed)
    mcfg = model_config_for(cfg, tokenizer.vocab_size)
    model = BertForMaskedLM._from_config(hf_config(BertForPreTraining(mcfg).cfg), attn_implementation="sdpa").train()
    hf_tok = BertTokenizerFast(vocab=str(cfg.tokenizer), do_lower_case=True)  # vocab=, not vocab_file=: ../shared/docs/library-notes.md
    if len(hf_tok) != tokenizer.vocab_size:
        raise BertbenchError(f"bench quality: transformers read {len(hf_tok)} tokens from {cfg.tokenizer}, "
                             f"bertbench {tokenizer.vocab_size}")
    collator = DataCollatorForLanguageModeling(hf_tok, mlm=True, mlm_probability=PAPER_MASK_RATIO)
    blocks = hf_blocks(data, tokenizer, final_seq_len(cfg))
    order = np.random.default_rng(cfg.seed).permutation(len(blocks))
    opt = hf_adamw(model, HF_LR)
    bf16 = resolve_precision(cfg.precision, "cpu").startswith("bf16")
    budget_s = cfg.budget_minutes * 60
    probe = Probe(heldout, budget_s, points, hf=True, progress=progress, name=name)
    probe.record(model, 0.0, 0, 0)
    trained = paused = 0.0
    tokens = step = 0
    t0 = time.perf_counter()
    while trained < budget_s:
        for g in opt.param_groups:  # the same wall-clock schedule as our side
            g["lr"] = HF_LR * linear_warmup_decay(min(1.0, trained / budget_s), HF_WARMUP)
        rows = order[(np.arange(cfg.batch_size) + step * cfg.batch_size) % len(order)]
        batch = collator([{"input_ids": blocks[i].tolist()} for i in rows])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        tokens += int(batch["input_ids"].numel())
        trained = time.perf_counter() - t0 - paused
        if probe.due(trained) or trained >= budget_s:
            p0 = time.perf_counter()
            probe.record(model, trained, tokens, step)
            paused += time.perf_counter() - p0
    return {
        "impl": "transformers", "tokens_seen": tokens, "steps": step, "training_seconds": round(trained, 2),
        "tokens_per_s": round(tokens / trained, 1), "precision": "bf16-mixed" if bf16 else "32-true",
        "vocab_size": tokenizer.vocab_size, "parameters": sum(p.numel() for p in model.parameters()),
        "curve": probe.curve, "final": probe.curve[-1],
        "settings": {"batch_size": cfg.batch_size, "lr": HF_LR, "warmup_share": HF_WARMUP, "nsp": False,
                     "mask_ratio": PAPER_MASK_RATIO, "dropout": 0.1},
    }


# ----------------------------------------------------------------------------------------------
# The benchmark.


def _config(recipe: str, data_dir: Path, minutes: float, model_size: Optional[str]):
    """The recipe on a budget of `minutes`, evaluated by the bench's probe alone (its own cadence off)."""
    from bertbench.config import PretrainConfig, resolve_recipe
    from bertbench.config_files import load_config

    cfg = load_config(PretrainConfig, resolve_recipe(recipe)).with_data_dir(data_dir)
    # equal minutes: the budget alone ends each side, whatever step cap the recipe has for step-counted runs
    changes: dict[str, Any] = dict(budget_minutes=minutes, max_steps=10**12, eval_every=0, checkpoint_every=0,
                                   optim=dataclasses.replace(cfg.optim, warmup_steps=None))
    if model_size is not None:
        changes["model_size"] = model_size
    return dataclasses.replace(cfg, **changes)


def run(
    minutes: float,
    recipe: str,
    data_dir: Path,
    sides: list[str],
    model_size: Optional[str] = None,
    points: int = NUM_POINTS,
    max_documents: Optional[int] = None,
    out_dir: Optional[Path] = None,
    progress: Optional[Callable[[str], None]] = None,
    pair_threads: Optional[int] = None,
) -> dict[str, Any]:
    """Each side in turn, with all of this process's threads; or, with `pair_threads`, the shared-vocabulary
    pair (ours, hf) first, side by side in two processes of `pair_threads` threads each (so three 25-minute
    sides take two slots of the clock, not three), then ours-recipe here."""
    from bertbench.data.instances import build_pretraining_data
    from bertbench.model.tokenizer import WordPieceTokenizer
    from bertbench.training.pretrain_run import load_or_train_tokenizer

    shared_vocab = data_dir / BERT_VOCAB
    _check_arguments(minutes, sides, shared_vocab)
    work = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="bertbench-quality-"))
    t_start = time.perf_counter()
    result: dict[str, Any] = {"benchmark": "quality", "machine": common.machine(), "sides": {}, "heldout": {}}
    base = _config(recipe, data_dir, minutes, model_size)
    if max_documents is not None:
        base = dataclasses.replace(base, data=dataclasses.replace(base.data, max_documents=max_documents))
    result["config"] = portable({
        "recipe": recipe, "minutes": minutes, "model_size": base.model_size, "seq_len": final_seq_len(base),
        "phases": [dataclasses.asdict(p) for p in base.phases], "batch_size": base.batch_size,
        "corpus": base.data.corpus, "points": points, "max_documents": max_documents, "pretrain": dataclasses.asdict(base),
    }, data_dir)
    shared_cfg = dataclasses.replace(base, tokenizer=str(shared_vocab))
    shared = None  # (tokenizer, data, held-out set) of the shared vocabulary, once a side needs them

    def heldout_for(cfg, name: str):
        """The side's tokenizer (trained once here when the recipe trains one), data and held-out set."""
        if cfg.tokenizer in ("", "train"):
            load_or_train_tokenizer(cfg, work / f"{name}-tokenizer")
            cfg = dataclasses.replace(cfg, tokenizer=str(work / f"{name}-tokenizer" / "tokenizer"))
        tok = WordPieceTokenizer.load(Path(cfg.tokenizer))
        data = build_pretraining_data(cfg.data, tok, objective=cfg.objective, seed=cfg.seed)
        return cfg, tok, data, build_heldout(cfg, tok, data)

    if pair_threads is not None and {"ours", "hf"} <= set(sides):
        # the corpus tokenised here once, with every thread, into the cache both processes then read: not
        # twice at once on half the threads each (the cold tokenisation is minutes on the shared corpus)
        if progress:
            progress("ours, hf: tokenising the corpus for both sides")
        heldout_for(shared_cfg, "shared")
        pair = run_pair_side_by_side(minutes, recipe, data_dir, model_size, points, max_documents, work, pair_threads, progress)
        result["heldout"].update(pair["heldout"])
        result["pair"] = {"side_by_side": True, "threads_each": pair_threads}
        sides = [s for s in sides if s not in ("ours", "hf")]
        result["sides"].update(pair["sides"])
    for side in sides:
        if progress:
            progress(f"{side}: preparing data")
        if side in ("ours", "hf"):
            if shared is None:
                shared_cfg, *shared = heldout_for(shared_cfg, "shared")
                result["heldout"]["bert-base-uncased"] = _heldout_json(shared[2], shared[1])
            tok, data, ho = shared
            if side == "ours":
                entry = run_ours(shared_cfg, ho, work / "ours", points, progress, side)
            else:
                entry = run_hf(shared_cfg, tok, data, ho, points, progress, side)
            entry["vocab"] = "bert-base-uncased"
        else:
            own_cfg, tok, data, ho = heldout_for(base, "ours-recipe")
            result["heldout"]["own"] = _heldout_json(ho, data)
            entry = run_ours(own_cfg, ho, work / "ours-recipe", points, progress, side)
            entry["vocab"] = f"own ({tok.vocab_size} WordPiece, trained on the corpus)"
        result["sides"][side] = _against_unigram(entry, ho)
    s = result["sides"] = {name: result["sides"][name] for name in SIDES if name in result["sides"]}
    if "ours" in s and "hf" in s:
        result["comparisons"] = _comparisons(s["ours"], s["hf"])
    result["wall_seconds"] = round(time.perf_counter() - t_start, 1)
    return result


def _check_arguments(minutes: float, sides: list[str], shared_vocab: Path) -> None:
    if not minutes > 0:
        raise BertbenchError(f"--minutes {minutes}: expected a positive number")
    unknown = [s for s in sides if s not in SIDES]
    if unknown or not sides:
        raise BertbenchError(f"--sides {','.join(sides)}: expected some of {', '.join(SIDES)}")
    if {"ours", "hf"} & set(sides) and not shared_vocab.is_file():
        raise BertbenchError(f"{shared_vocab}: the shared bert-base-uncased vocabulary is missing (see --data-dir)")


def _against_unigram(entry: dict[str, Any], ho: HeldOut) -> dict[str, Any]:
    """A side's entry with its threads, its held-out set's fingerprint and its gain over the unigram baseline."""
    import torch

    return {**entry, "threads": torch.get_num_threads(), "heldout_fingerprint": ho.fingerprint,
            "unigram_accuracy": round(ho.unigram_accuracy, 3),
            "gain_over_unigram": round(entry["final"]["mlm_accuracy"] - ho.unigram_accuracy, 3)}


def _comparisons(ours: dict[str, Any], hf: dict[str, Any]) -> dict[str, Any]:
    """The shared-vocabulary pair compared: gain over the unigram baseline and tokens seen, as ratios."""
    hf_gain = hf["gain_over_unigram"]
    return {
        "gain_ratio_ours_vs_hf": round(ours["gain_over_unigram"] / hf_gain, 3) if hf_gain > 0 else None,
        "tokens_ratio_ours_vs_hf": round(ours["tokens_seen"] / max(1, hf["tokens_seen"]), 3),
        "same_heldout_positions": ours["heldout_fingerprint"] == hf["heldout_fingerprint"],
    }


def run_pair_side_by_side(minutes: float, recipe: str, data_dir: Path, model_size: Optional[str], points: int,
                          max_documents: Optional[int], work: Path, threads: int,
                          progress: Optional[Callable[[str], None]]) -> dict[str, Any]:
    """`ours` and `hf` at once, each in its own process with `threads` threads: the same minutes on the same
    share of the machine, and a noisy neighbour slows both alike. Each process builds the held-out set
    itself; the fingerprints say whether both were scored at the same positions."""
    import subprocess
    import sys

    procs = {}
    for side in ("ours", "hf"):
        saved = work / f"{side}-side.json"
        argv = [sys.executable, "-m", "bertbench.cli", "bench", "quality", "--sides", side, "--minutes", repr(minutes),
                "--recipe", str(recipe), "--points", str(points), "--data-dir", str(data_dir), "--threads", str(threads),
                "--sequential", "--out", str(work / f"{side}-side"), "--save-json", str(saved)]
        if model_size is not None:
            argv += ["--model-size", model_size]
        if max_documents is not None:
            argv += ["--max-documents", str(max_documents)]
        if progress is None:
            argv.append("--quiet")
        if progress:
            progress(f"{side}: training side by side with the other side of the pair, {threads} thread(s)")
        procs[side] = (subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), saved)
    # both stderr pipes drained at once: a side whose pipe filled up would stall while the other trains
    relays = {side: _Relay(proc, side, progress) for side, (proc, _) in procs.items()}
    out: dict[str, Any] = {"sides": {}, "heldout": {}}
    failures = []
    for side, (proc, saved) in procs.items():
        err = relays[side].wait()
        if proc.returncode != 0:
            last = [ln for ln in err.splitlines() if ln.strip()]
            failures.append(f"{side}: {last[-1] if last else f'exit code {proc.returncode}'}")
            continue
        part = json.loads(saved.read_text(encoding="utf-8"))
        out["sides"][side] = part["sides"][side]
        out["heldout"].update(part["heldout"])
    if failures:
        raise BertbenchError("bench quality: the side-by-side pair failed: " + "; ".join(failures))
    return out


class _Relay:
    """Reads a side process's stderr on a thread, passing its lines on as progress."""

    def __init__(self, proc, side: str, progress: Optional[Callable[[str], None]]):
        import threading

        self.proc, self.lines = proc, []
        self.thread = threading.Thread(target=self._read, args=(side, progress), daemon=True)
        self.thread.start()

    def _read(self, side: str, progress) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)
            if progress and not line.startswith("error:"):
                progress(f"[{side}] {line.rstrip()}")

    def wait(self) -> str:
        self.proc.wait()
        self.thread.join()
        return "".join(self.lines)


def _heldout_json(ho: HeldOut, data) -> dict[str, Any]:
    return {"sequences": sum(len(b["input_ids"]) for b in ho.batches), "masked_positions": ho.positions,
            "documents": int(len(data.heldout_docs)), "unigram_accuracy": round(ho.unigram_accuracy, 3),
            "unigram_loss": round(ho.unigram_loss, 4), "fingerprint": ho.fingerprint}


# ----------------------------------------------------------------------------------------------
# Output: markdown and a plot.


def markdown(result: dict[str, Any], command: str) -> str:
    m, c = result["machine"], result["config"]
    pair = result.get("pair")
    threads = (f"ours and hf side by side with {pair['threads_each']} thread(s) each, the others {m['threads']}"
               if pair else f"{m['threads']} threads")
    lines = [
        f"_Generated by `{command}` on {m['hardware']}, torch {m['torch']}, {threads}, allocator "
        f"{m.get('allocator', '?')}, {m['code']}; {c['minutes']:g} training minutes per side, {c['model_size']}, "
        f"seq {c['seq_len']}; do not edit between the markers._", "",
        "| side | vocabulary | tokens seen | tokens/s | held-out MLM acc. | loss (nats) | unigram acc. | gain over unigram |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in result["sides"].items():
        f = s["final"]
        lines.append(f"| {name} ({s['impl']}) | {s['vocab']} | {s['tokens_seen']:,} | {s['tokens_per_s']:.0f} | "
                     f"{f['mlm_accuracy']:.1f}% | {f['mlm_loss']:.2f} | {s['unigram_accuracy']:.1f}% | "
                     f"{s['gain_over_unigram']:+.1f} pts |")
    cmp = result.get("comparisons")
    if cmp:
        ratio = "–" if cmp["gain_ratio_ours_vs_hf"] is None else f"{cmp['gain_ratio_ours_vs_hf']:.2f}×"
        lines += ["", f"On the shared vocabulary, bertbench's gain over the unigram baseline is **{ratio}** the "
                      f"Hugging Face side's, having seen {cmp['tokens_ratio_ours_vs_hf']:.2f}× its tokens; both are "
                      f"scored at the same held-out positions ({'yes' if cmp['same_heldout_positions'] else 'NO'})."]
    if "ours-recipe" in result["sides"]:
        lines += ["", "`ours-recipe` is scored on its own vocabulary: compare it with its own unigram column, "
                      "not with the other rows."]
    lines += ["", "Curve (held-out MLM accuracy % at minutes of training):", ""]
    for name, s in result["sides"].items():
        lines.append(f"- {name}: " + ", ".join(f"{p['minutes']:.1f} min {p['mlm_accuracy']:.1f}" for p in s["curve"]))
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    """One run's sides, over minutes and over tokens."""
    curves = [(f"{name} ({s['vocab'].split(' ')[0]})", s["curve"]) for name, s in result["sides"].items()]
    baselines = [h["unigram_accuracy"] for h in result["heldout"].values()]
    _plot_curves(curves, baselines, "bench quality: held-out MLM accuracy (dotted: unigram baselines)", path)


def compare_plot(results: list[tuple[str, dict[str, Any]]], path: Path, side: str = "ours-recipe") -> None:
    """The same side of several saved runs (an A/B, or one recipe at several model sizes), one curve each."""
    curves = [(name, r["sides"][side]["curve"]) for name, r in results]
    baselines = sorted({r["sides"][side]["unigram_accuracy"] for _, r in results})
    _plot_curves(curves, baselines, f"bench quality --compare: {side}, held-out MLM accuracy (dotted: unigram)", path)


def _plot_curves(curves: list[tuple[str, list[dict[str, Any]]]], baselines: list[float], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for label, curve in curves:
        ys = [p["mlm_accuracy"] for p in curve]
        axes[0].plot([p["minutes"] for p in curve], ys, marker="o", label=label)
        axes[1].plot([p["tokens"] / 1e6 for p in curve], ys, marker="o", label=label)
    for baseline in baselines:
        for ax in axes:
            ax.axhline(baseline, linestyle=":", color="grey")
    axes[0].set_xlabel("training minutes")
    axes[1].set_xlabel("tokens seen (millions)")
    for ax in axes:
        ax.set_ylabel("held-out MLM accuracy (%)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def ab_markdown(results: list[tuple[str, dict[str, Any]]], side: str = "ours-recipe") -> str:
    """Recipe A/B at equal minutes from saved `bench quality` JSONs: the first is the baseline; each row says
    what its pre-training config changed and what it bought in held-out accuracy at the budget's end."""
    if not results:
        raise BertbenchError("--compare: no result files")
    rows, base_cfg, base_acc = [], None, None
    for name, r in results:
        if side not in r["sides"]:
            raise BertbenchError(f"{name}: has no '{side}' side (sides: {', '.join(r['sides'])})")
        s = r["sides"][side]
        cfg = r["config"]["pretrain"]  # the resolved pre-training config (commands/bench.py checks it is there)
        if base_cfg is None:
            base_cfg, base_acc, changed = cfg, s["final"]["mlm_accuracy"], "baseline"
        else:
            flat_base = _flat(base_cfg)
            changed = "; ".join(f"{k}: {_short(flat_base[k]) if k in flat_base else '(default)'} → {_short(v)}" for k, v in _flat(cfg).items()
                                if flat_base.get(k) != v and k != "recipe") or "(same config)"
        delta = "–" if changed == "baseline" else f"{s['final']['mlm_accuracy'] - base_acc:+.1f}"
        rows.append(f"| {name} | {changed} | {s['parameters'] / 1e6:.2f} M | {r['config']['minutes']:g} min × {r['machine']['threads']} thr | "
                    f"{s['tokens_seen']:,} | {s['final']['mlm_accuracy']:.1f}% | {delta} | {s['unigram_accuracy']:.1f}% |")
    head = ["| run | what changed | parameters | budget | tokens seen | held-out MLM acc. | Δ vs baseline | unigram |",
            "|---|---|---|---|---|---|---|---|"]
    return "\n".join(head + rows)


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _short(v: Any) -> str:
    if isinstance(v, list) and v and all(isinstance(p, dict) and "max_seq_len" in p for p in v):  # phases
        return " then ".join(f"seq {p['max_seq_len']}" + (f" × {p['batch_size']}" if p.get("batch_size") else "")
                             + f" for {p['fraction']:g}" for p in v)
    return json.dumps(v, separators=(",", ":")) if isinstance(v, (list, dict)) else str(v)


def dumps(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2)
