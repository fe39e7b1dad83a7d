"""`bench data`: corpus → pre-training instances (`build_pretraining_data`), in MB of corpus text per second.

Each repeat builds into a fresh cache folder, so it times the whole cold path: reading, sentence
splitting, tokenisation (`corpus`), then NSP pairing and packing (`instances`); a warm rebuild from the
cache times the instance stage alone. Without --corpus a synthetic corpus is written (random words in
sentences and paragraphs, one document per .txt file) with a vocabulary that covers every word.
"""
from __future__ import annotations

import random
import string
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from bertbench.benchmarks import common
from bertbench.errors import BertbenchError

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
OBJECTIVE = "mlm+nsp"  # the paper's data path: sentence pairs for NSP (the costliest layout to build)


def write_synthetic_corpus(folder: Path, megabytes: float, seed: int = 0, doc_kb: int = 20) -> list[str]:
    """Documents of random-word sentences in `folder`; returns the word list (all in the vocabulary)."""
    rng = random.Random(seed)
    words = sorted({"".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(3000)})
    folder.mkdir(parents=True, exist_ok=True)
    target, written, d = int(megabytes * 1e6), 0, 0
    while written < target:
        paragraphs, size = [], 0
        while size < doc_kb * 1000:
            sentences = []
            for _ in range(rng.randint(2, 6)):
                s = " ".join(rng.choices(words, k=rng.randint(6, 25)))
                sentences.append(s[0].upper() + s[1:] + ".")
            paragraphs.append(" ".join(sentences))
            size += len(paragraphs[-1]) + 2
        text = "\n\n".join(paragraphs) + "\n"
        (folder / f"doc{d:05d}.txt").write_text(text, encoding="utf-8")
        written += len(text.encode())
        d += 1
    return words


def synthetic_tokenizer(words: list[str], folder: Path):
    from bertbench.model.tokenizer import WordPieceTokenizer

    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    vocab = SPECIAL + chars + [f"##{c}" for c in string.ascii_lowercase] + words
    path = folder / "vocab.txt"
    path.write_text("\n".join(dict.fromkeys(vocab)) + "\n", encoding="utf-8")
    return WordPieceTokenizer.from_vocab(path)


def corpus_bytes(corpus: Path) -> int:
    files = [corpus] if corpus.is_file() else [p for p in corpus.rglob("*") if p.is_file() and not p.name.startswith(".")]
    return sum(p.stat().st_size for p in files)


def run(
    corpus: Optional[Path] = None,
    synthetic_mb: float = 2.0,
    seq_len: int = 128,
    repeats: int = 3,
    progress: Optional[Callable[[str], None]] = None,
    tokenizer_path: Optional[Path] = None,
) -> dict[str, Any]:
    from bertbench.config import DataConfig
    from bertbench.data.instances import build_pretraining_data
    from bertbench.model.tokenizer import WordPieceTokenizer

    if repeats < 1:
        raise BertbenchError(f"--repeats {repeats}: expected at least 1")
    with tempfile.TemporaryDirectory(prefix="bertbench-bench-data-") as tmp:
        tmp_path = Path(tmp)
        if corpus is None:
            words = write_synthetic_corpus(tmp_path / "corpus", synthetic_mb)
            corpus = tmp_path / "corpus"
            tokenizer = synthetic_tokenizer(words, tmp_path)
            source = f"synthetic, {synthetic_mb} MB"
        else:
            if not corpus.exists():
                raise BertbenchError(f"{corpus}: no such file or folder")
            if tokenizer_path is None:
                raise BertbenchError("bench data --corpus needs --tokenizer (a vocab.txt or tokenizer folder)")
            tokenizer = WordPieceTokenizer.load(tokenizer_path)
            source = str(corpus)
        mb = corpus_bytes(corpus) / 1e6
        data_cfg = DataConfig(corpus=[str(corpus)], max_seq_len=seq_len)
        cold, warm, stats = [], [], {}
        for r in range(repeats):
            cache = tmp_path / f"cache{r}"
            t0 = time.perf_counter()
            built = build_pretraining_data(data_cfg, tokenizer, objective=OBJECTIVE, cache_dir=cache)
            cold.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            build_pretraining_data(data_cfg, tokenizer, objective=OBJECTIVE, cache_dir=cache)  # tokenised corpus now cached
            warm.append(time.perf_counter() - t0)
            stats = built.stats
            if progress is not None:
                progress(f"repeat {r + 1}/{repeats}: cold {cold[-1]:.2f} s, from cache {warm[-1]:.2f} s")
    cold_s, warm_s = common.median(cold), common.median(warm)
    return {
        "benchmark": "data",
        "machine": common.machine(),
        "config": {"corpus": source, "corpus_mb": round(mb, 3), "max_seq_len": seq_len, "objective": OBJECTIVE, "nsp": True,
                   "repeats": repeats, "vocab_size": tokenizer.vocab_size},
        "stages": {
            # the first repeat also pays one-off process costs (importing datasets, tokenizer warm-up)
            "end_to_end": {"seconds": round(cold_s, 3), "mb_per_s": round(mb / cold_s, 3), "first_repeat_seconds": round(cold[0], 3)},
            "instances_from_cache": {"seconds": round(warm_s, 3), "mb_per_s": round(mb / warm_s, 3)},
        },
        "tokens_per_s_end_to_end": round(stats.get("tokens", 0) / cold_s, 1),
        "instances_per_s_end_to_end": round(stats.get("train_instances", 0) / cold_s, 1),
        "stats": {k: stats[k] for k in ("documents", "sentences", "tokens", "train_instances", "heldout_instances", "mean_length") if k in stats},
        "tcmalloc": common.tcmalloc_preloaded(),
        "hint": None,
    }
