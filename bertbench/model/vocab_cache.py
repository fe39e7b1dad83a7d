"""A vocabulary trained on a corpus, kept beside its tokenised copy: `data build --tokenizer train` trains it once
(then tokenises the corpus with it), and a pre-training with `--tokenizer train` on the same corpus and settings
loads it from there instead of training its own, and says so.

The folder is `<cache>/vocab-<key>/` (a WordPieceTokenizer folder); the key covers what decides the vocabulary:
the corpus files as the corpus cache keys them (path, size, modification time; a hub dataset by name), the
document rule, the document cap, the vocabulary size and the case folding.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

PREFIX = "vocab-"


def vocab_key(cfg) -> str:
    """What decides the vocabulary a pre-training config trains (`pretrain_run._train_tokenizer`)."""
    from bertbench.data.corpus import READER_VERSION, SPLITTER_VERSION, json_sha256, resolve_corpus, shard_stats

    shards, _ = resolve_corpus(cfg.data.corpus)
    return json_sha256(dict(files=shard_stats(shards), max_documents=cfg.data.max_documents,
                            doc_sentences=cfg.data.doc_sentences, vocab_size=cfg.tokenizer_vocab_size,
                            lowercase=cfg.lowercase, reader=READER_VERSION, splitter=SPLITTER_VERSION))


def vocab_folder(cfg, cache_dir: Optional[Path] = None) -> Path:
    from bertbench.data.corpus import default_cache_dir

    return (Path(cache_dir) if cache_dir else default_cache_dir()) / f"{PREFIX}{vocab_key(cfg)[:20]}"


def prebuilt_vocab(cfg, cache_dir: Optional[Path] = None):
    """(tokenizer, folder) when `data build` trained this config's vocabulary already, else None."""
    from bertbench.model.tokenizer import WordPieceTokenizer

    folder = vocab_folder(cfg, cache_dir)
    return (WordPieceTokenizer.load(folder), folder) if (folder / "vocab.txt").is_file() else None


def build_vocab(cfg, train: Callable[[], object], cache_dir: Optional[Path] = None):
    """(tokenizer, folder, trained now): the cached vocabulary, or `train()`'s, written into the cache (a
    temporary folder renamed into place, so a reader never sees half of one; when another process put it there
    first, the same vocabulary by its key, theirs is kept)."""
    from bertbench.data.corpus import staged

    found = prebuilt_vocab(cfg, cache_dir)
    if found is not None:
        return (*found, False)
    folder = vocab_folder(cfg, cache_dir)
    tok = train()
    with staged(folder) as tmp:
        tok.save(tmp)
    return tok, folder, True


__all__ = ["build_vocab", "prebuilt_vocab", "vocab_folder"]
