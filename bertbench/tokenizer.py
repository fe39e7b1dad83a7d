"""WordPiece tokenization on top of Hugging Face `tokenizers`: BERT normalisation and pre-tokenisation,
special tokens [PAD] [UNK] [CLS] [SEP] [MASK], training a vocabulary on a corpus or loading a vocab.txt.

A saved tokenizer is a folder with `vocab.txt` (the interchange format of google-research/bert and
transformers) plus `tokenizer.json` (the fast tokenizer itself) and `tokenizer_config.json`.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from bertbench.errors import BertbenchError

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _build(vocab: dict[str, int], lowercase: bool, strip_accents: Optional[bool]):
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    # strip_accents=None follows `lowercase`, exactly as BertTokenizer's do_lower_case does.
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents, lowercase=lowercase
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    _set_post_processor(tok, vocab)
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def _set_post_processor(tok, vocab: dict[str, int]) -> None:
    from tokenizers import processors

    cls_id, sep_id = vocab["[CLS]"], vocab["[SEP]"]
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )


def read_vocab_file(path: Path) -> dict[str, int]:
    path = Path(path)
    if not path.is_file():
        raise BertbenchError(f"{path}: vocabulary file not found")
    vocab: dict[str, int] = {}
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError:
        raise BertbenchError(f"{path}: vocabulary is not UTF-8 text") from None
    if lines and lines[-1] == "":
        lines.pop()
    for i, token in enumerate(lines):
        token = token.rstrip("\r")
        if token in vocab:
            raise BertbenchError(f"{path}:{i + 1}: duplicate token {token!r}")
        vocab[token] = i
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise BertbenchError(f"{path}: not a BERT vocabulary, missing special tokens {missing}")
    return vocab


@dataclass
class Encoding:
    input_ids: list[int]
    token_type_ids: list[int]
    offsets: list[tuple[int, int]]
    word_ids: list[Optional[int]]
    sequence_ids: list[Optional[int]]


class WordPieceTokenizer:
    """A BERT WordPiece tokenizer. Wraps a `tokenizers.Tokenizer` (available as `.backend`)."""

    def __init__(self, backend, lowercase: bool = True, strip_accents: Optional[bool] = None):
        self.backend = backend
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        vocab = backend.get_vocab()
        self.pad_id = vocab["[PAD]"]
        self.unk_id = vocab["[UNK]"]
        self.cls_id = vocab["[CLS]"]
        self.sep_id = vocab["[SEP]"]
        self.mask_id = vocab["[MASK]"]

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_vocab(cls, path: Path, lowercase: bool = True, strip_accents: Optional[bool] = None) -> "WordPieceTokenizer":
        return cls(_build(read_vocab_file(path), lowercase, strip_accents), lowercase, strip_accents)

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int,
        lowercase: bool = True,
        strip_accents: Optional[bool] = None,
        min_frequency: int = 2,
        limit_alphabet: int = 1000,
    ) -> "WordPieceTokenizer":
        from tokenizers import Tokenizer, trainers
        from tokenizers.models import WordPiece

        from bertbench.quiet import library_progress_bars

        tok = _build({t: i for i, t in enumerate(SPECIAL_TOKENS)}, lowercase, strip_accents)
        tok.model = WordPiece(unk_token="[UNK]", max_input_chars_per_word=100)
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=SPECIAL_TOKENS,  # first, so [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4
            limit_alphabet=limit_alphabet,
            continuing_subword_prefix="##",
            show_progress=library_progress_bars(),
        )
        tok.train_from_iterator(texts, trainer=trainer)
        _set_post_processor(tok, tok.get_vocab())
        return cls(tok, lowercase, strip_accents)

    @classmethod
    def load(cls, path: Path) -> "WordPieceTokenizer":
        """Load from a folder (tokenizer.json or vocab.txt, + tokenizer_config.json) or a vocab.txt file."""
        path = Path(path)
        if path.is_file():
            return cls.from_vocab(path)
        if not path.is_dir():
            raise BertbenchError(f"{path}: tokenizer not found (expected a vocab.txt file or a folder holding one)")
        lowercase, strip_accents = True, None
        cfg_file = path / "tokenizer_config.json"
        if cfg_file.is_file():
            cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
            lowercase = bool(cfg.get("do_lower_case", True))
            strip_accents = cfg.get("strip_accents", None)
        if (path / "vocab.txt").is_file():
            return cls.from_vocab(path / "vocab.txt", lowercase, strip_accents)
        if (path / "tokenizer.json").is_file():
            return cls._from_tokenizer_json(path / "tokenizer.json", lowercase, strip_accents)
        raise BertbenchError(f"{path}: no tokenizer here (looked for vocab.txt and tokenizer.json)")

    @classmethod
    def _from_tokenizer_json(cls, file: Path, lowercase: bool, strip_accents) -> "WordPieceTokenizer":
        data = json.loads(file.read_text(encoding="utf-8"))
        model = data.get("model") or {}
        if model.get("type") != "WordPiece":
            raise BertbenchError(f"{file}: not a WordPiece tokenizer (model type {model.get('type')!r})")
        norm = data.get("normalizer") or {}
        if norm.get("type") == "BertNormalizer":
            lowercase = bool(norm.get("lowercase", lowercase))
            strip_accents = norm.get("strip_accents", strip_accents)
        vocab = model["vocab"]
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            raise BertbenchError(f"{file}: not a BERT vocabulary, missing special tokens {missing}")
        return cls(_build(dict(vocab), lowercase, strip_accents), lowercase, strip_accents)

    def save(self, folder: Path) -> None:
        from bertbench.io_utils import atomic_write_json, atomic_write_text

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        vocab = self.backend.get_vocab()
        ordered = sorted(vocab, key=vocab.__getitem__)
        atomic_write_text(folder / "vocab.txt", "".join(t + "\n" for t in ordered))
        atomic_write_text(folder / "tokenizer.json", self.backend.to_str())
        atomic_write_json(
            folder / "tokenizer_config.json",
            {
                "tokenizer_class": "BertTokenizer",
                "do_lower_case": self.lowercase,
                "strip_accents": self.strip_accents,
                "tokenize_chinese_chars": True,
                "model_max_length": 512,
                "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                "cls_token": "[CLS]", "mask_token": "[MASK]",
            },
        )

    # -- use ----------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size()

    @property
    def special_ids(self) -> set[int]:
        return {self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id}

    def vocab(self) -> dict[str, int]:
        return self.backend.get_vocab()

    def tokenize_ids(self, text: str) -> list[int]:
        """Word-piece ids of `text`, without [CLS]/[SEP] (for building pre-training instances)."""
        return self.backend.encode(text, add_special_tokens=False).ids

    def tokenize_ids_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.backend.encode_batch(texts, add_special_tokens=False)]

    def encode(
        self, text: str, pair: Optional[str] = None, max_length: Optional[int] = None, truncation: str = "longest_first"
    ) -> Encoding:
        """[CLS] A [SEP] (B [SEP]) with token types; truncation 'longest_first' as BERT's run_classifier."""
        return self.encode_batch([text], [pair] if pair is not None else None, max_length, truncation)[0]

    def encode_batch(
        self,
        texts: list[str],
        pairs: Optional[list[str]] = None,
        max_length: Optional[int] = None,
        truncation: str = "longest_first",
    ) -> list[Encoding]:
        tok = self.backend
        if max_length is not None:
            tok.enable_truncation(max_length=max_length, strategy=truncation)
        else:
            tok.no_truncation()
        try:
            inputs = list(zip(texts, pairs)) if pairs is not None else list(texts)
            encs = tok.encode_batch(inputs)
        finally:
            tok.no_truncation()
        return [Encoding(e.ids, e.type_ids, e.offsets, e.word_ids, e.sequence_ids) for e in encs]

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.backend.id_to_token(i) for i in ids]

    def decode(self, ids: Iterable[int]) -> str:
        return self.backend.decode(list(ids))


def iter_texts_for_training(paths: Iterable[Path]) -> Iterator[str]:
    """Lines of text files, for vocabulary training (WikiExtractor <doc> markup lines skipped)."""
    for p in paths:
        with open(p, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line and not line.startswith("<doc") and line != "</doc>":
                    yield line
