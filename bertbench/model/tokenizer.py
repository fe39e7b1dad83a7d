"""WordPiece tokenization on top of Hugging Face `tokenizers`: BERT normalisation and pre-tokenisation,
special tokens [PAD] [UNK] [CLS] [SEP] [MASK], training a vocabulary on a corpus or loading a vocab.txt.

A saved tokenizer is a folder with `vocab.txt` (the interchange format of google-research/bert and
transformers) plus `tokenizer.json` (the fast tokenizer itself) and `tokenizer_config.json`.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from bertbench.errors import BertbenchError

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _build(vocab: dict[str, int], lowercase: bool, strip_accents: Optional[bool]):
    from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import WordPiece

    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    # "[MASK]" typed in text is the mask token, as in transformers' BertTokenizerFast (else: "[", "mas", "##k", "]");
    # matched before normalisation, so lower-casing never turns it into a word
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.normalizer = _normalizer(lowercase, strip_accents)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    _set_post_processor(tok, vocab)
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def _normalizer(lowercase: bool, strip_accents: Optional[bool]):
    from tokenizers import normalizers

    # strip_accents=None follows `lowercase`, exactly as BertTokenizer's do_lower_case does.
    return normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents,
                                      lowercase=lowercase)


def _set_post_processor(tok, vocab: dict[str, int]) -> None:
    from tokenizers import processors

    cls_id, sep_id = vocab["[CLS]"], vocab["[SEP]"]
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])


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
    return _check_special_tokens(vocab, path)


def _check_special_tokens(vocab: dict[str, int], where: Path) -> dict[str, int]:
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise BertbenchError(f"{where}: not a BERT vocabulary, missing special tokens {missing}")
    return vocab


# -- deterministic training --------------------------------------------------------------------
# tokenizers' WordPieceTrainer (a BpeTrainer underneath) keeps words in a hash map seeded afresh in every
# process. The continuation symbols "##c" get their ids in that map's order; equally frequent merges are
# ranked by the ids of their two parts; the final ids follow the same order. So one corpus gave a
# differently ordered vocab.txt in every process and, where the rarest merges tie, a different token set,
# and two runs of one config and seed differed from step 1. Everything that order could decide is decided
# here instead: we count the words, choose the alphabet, and hand the trainer the continuation symbols as
# leading "special" tokens in sorted order, so every id it hands out (and so every tie it breaks) is the
# same in every process. The trainer then only does the merges (fast, in Rust), and the result is put
# into one canonical order and rebuilt with `_build`, which drops the trainer's own tokenizer settings.


def train_vocab(texts: Iterable[str], vocab_size: int, lowercase: bool = True, strip_accents: Optional[bool] = None,
                min_frequency: int = 2, limit_alphabet: Optional[int] = 1000) -> dict[str, int]:
    """A WordPiece vocabulary (token -> id) learnt from `texts`, the same in every process: [PAD] [UNK] [CLS]
    [SEP] [MASK], the alphabet (most frequent first), the "##c" continuation symbols (sorted), then the
    merged tokens in the order they were learnt."""
    counts = count_words(texts, lowercase, strip_accents)
    alphabet = pick_alphabet(counts, limit_alphabet)
    continuations = continuation_symbols(counts, alphabet)
    base = len(SPECIAL_TOKENS) + len(alphabet) + len(continuations)
    if vocab_size < base:  # the trainer would return `base` tokens anyway, and the config would say otherwise
        raise BertbenchError(
            f"tokenizer_vocab_size {vocab_size}: smaller than this corpus's {base} base symbols ({len(SPECIAL_TOKENS)} "
            f"special tokens, {len(alphabet)} characters, {len(continuations)} '##' continuations); ask for ≥ {base}")
    merged = _learn_merges(counts, alphabet, continuations, vocab_size, min_frequency)
    ordered = [*SPECIAL_TOKENS, *alphabet, *continuations, *merged]
    return {t: i for i, t in enumerate(ordered)}


def count_words(texts: Iterable[str], lowercase: bool, strip_accents: Optional[bool]) -> Counter:
    """Words of `texts` as the tokenizer will see them (BertNormalizer, then BertPreTokenizer), counted."""
    from tokenizers import pre_tokenizers

    normalizer, pre_tokenizer = _normalizer(lowercase, strip_accents), pre_tokenizers.BertPreTokenizer()
    counts: Counter = Counter()
    for chunk in _chunks(texts):
        # One call per ~1 MB, not per line: words never span the joining newline (it is whitespace).
        counts.update(w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(chunk)))
    return counts


def _chunks(texts: Iterable[str], size: int = 1 << 20) -> Iterator[str]:
    batch: list[str] = []
    held = 0
    for t in texts:
        batch.append(t)
        held += len(t)
        if held >= size:
            yield "\n".join(batch)
            batch, held = [], 0
    if batch:
        yield "\n".join(batch)


def pick_alphabet(counts: Counter, limit: Optional[int]) -> list[str]:
    """The characters kept as tokens, most frequent first (ties by code point): the trainer breaks ties at
    the `limit` cut in hash order, so the cut is made here."""
    chars: Counter = Counter()
    for word, n in counts.items():
        for c in word:
            chars[c] += n
    ranked = sorted(chars, key=lambda c: (-chars[c], ord(c)))
    return ranked if limit is None else ranked[:limit]


def continuation_symbols(counts: Counter, alphabet: list[str]) -> list[str]:
    """"##c" for every kept character that occurs after the start of a word, sorted — exactly the set the
    trainer would add (a word's first character never gets "##", even when it is not in the alphabet)."""
    kept = set(alphabet)
    inner = {c for word in counts for c in word[1:] if c in kept}
    return sorted("##" + c for c in inner)


def _learn_merges(
    counts: Counter, alphabet: list[str], continuations: list[str], vocab_size: int, min_frequency: int
) -> list[str]:
    """The merged tokens, in the order the trainer learnt them. The trainer sees the counted words (each
    repeated `count` times, split on spaces only: they are normalised already), the alphabet fixed, and
    the continuation symbols pre-placed after the special tokens, so that all its ids are ours."""
    from tokenizers import Tokenizer, pre_tokenizers, trainers
    from tokenizers.models import WordPiece

    from bertbench.runtime.quiet import library_progress_bars

    tok = Tokenizer(WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[*SPECIAL_TOKENS, *continuations],
        # The whole alphabet as the initial one, and the limit at its size: the trainer drops exactly the
        # characters pick_alphabet dropped (it would otherwise cut among equal counts in hash order).
        initial_alphabet=alphabet,
        limit_alphabet=len(alphabet),
        continuing_subword_prefix="##",
        show_progress=library_progress_bars(),
    )
    tok.train_from_iterator((" ".join([w] * counts[w]) for w in sorted(counts)), trainer=trainer)
    vocab = tok.get_vocab()
    known = {*SPECIAL_TOKENS, *alphabet, *continuations}
    return sorted((t for t in vocab if t not in known), key=vocab.__getitem__)


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
        self.backend, self.lowercase, self.strip_accents = backend, lowercase, strip_accents
        vocab = backend.get_vocab()
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (vocab[t] for t in SPECIAL_TOKENS)

    # -- construction -------------------------------------------------------------------------
    @property
    def text_backend(self):
        """The backend for raw text (a corpus): the special tokens are not registered as typed tokens, so a "[SEP]"
        written in a book stays text, and its serialisation (in the corpus cache key and the data fingerprint) is
        what it was before `tok("... [MASK] ...")` kept them special: the same vocabulary gives the same data."""
        if getattr(self, "_text_backend", None) is None:
            from tokenizers import Tokenizer

            spec = json.loads(self.backend.to_str())
            spec["added_tokens"] = []
            self._text_backend = Tokenizer.from_str(json.dumps(spec, separators=(",", ":"), ensure_ascii=False))
        return self._text_backend

    @classmethod
    def from_vocab(cls, path: Path, lowercase: bool = True, strip_accents: Optional[bool] = None) -> "WordPieceTokenizer":
        return cls(_build(read_vocab_file(path), lowercase, strip_accents), lowercase, strip_accents)

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, lowercase: bool = True, strip_accents: Optional[bool] = None,
              min_frequency: int = 2, limit_alphabet: int = 1000) -> "WordPieceTokenizer":
        """Train a vocabulary on `texts`: the same texts and settings give the same vocab.txt, byte for byte,
        in any process (see `train_vocab`)."""
        vocab = train_vocab(texts, vocab_size, lowercase, strip_accents, min_frequency, limit_alphabet)
        return cls(_build(vocab, lowercase, strip_accents), lowercase, strip_accents)

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
        vocab = _check_special_tokens(dict(model["vocab"]), file)
        return cls(_build(vocab, lowercase, strip_accents), lowercase, strip_accents)

    def save(self, folder: Path) -> None:
        from bertbench.runtime.files import atomic_write_json, atomic_write_text

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        vocab = self.backend.get_vocab()
        ordered = sorted(vocab, key=vocab.__getitem__)
        atomic_write_text(folder / "vocab.txt", "".join(t + "\n" for t in ordered))
        atomic_write_text(folder / "tokenizer.json", self.backend.to_str())
        atomic_write_json(folder / "tokenizer_config.json", {
            "tokenizer_class": "BertTokenizer", "do_lower_case": self.lowercase, "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": True, "model_max_length": 512, "unk_token": "[UNK]", "sep_token": "[SEP]",
            "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]"})

    # -- use ----------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size()

    @property
    def special_ids(self) -> set[int]:
        return {self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id}

    def vocab(self) -> dict[str, int]:
        return self.backend.get_vocab()

    def encode_batch(self, texts: list[str], pairs: Optional[list[str]] = None, max_length: Optional[int] = None,
                     truncation: str = "longest_first") -> list[Encoding]:
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
        return [self.backend.id_to_token(int(i)) for i in ids]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Text of `ids` (a list or a 1-D tensor), word pieces joined; special tokens kept unless skipped."""
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def __call__(self, text: str | list[str], text_pair: Optional[str | list[str]] = None, *,
                 padding: bool | str = False, truncation: bool | str = False, max_length: Optional[int] = None,
                 return_tensors: Optional[str] = None) -> dict:
        """Encode like a transformers tokenizer: `tok("text")`, `tok("a", "b")`, `tok(["a", "b"])`, with
        `return_tensors="pt"`. Returns {"input_ids", "token_type_ids", "attention_mask"}: lists for one text, lists
        of lists for a batch, (B, T) tensors with "pt" (B = 1 for one text). A batch is padded to its longest with
        `padding=True`, to `max_length` with padding="max_length", and always for tensors; truncation=True (or
        "longest_first", "only_first", "only_second") cuts to `max_length` (default 512)."""
        single = isinstance(text, str)
        texts = [text] if single else list(text)
        pairs = None if text_pair is None else [text_pair] if isinstance(text_pair, str) else list(text_pair)
        if pairs is not None and len(pairs) != len(texts):
            raise BertbenchError(f"text_pair: {len(pairs)} second segments for {len(texts)} texts")
        if return_tensors not in (None, "pt"):
            raise BertbenchError(f"return_tensors={return_tensors!r}: only 'pt' (torch) or None")
        cut = (max_length or 512) if truncation else None
        encs = self.encode_batch(texts, pairs, cut, "longest_first" if truncation is True else truncation or "longest_first")
        ids = [e.input_ids for e in encs]
        types = [e.token_type_ids for e in encs]
        mask = [[1] * len(x) for x in ids]
        width = None
        if padding == "max_length":
            width = max_length or 512
        elif padding or (return_tensors == "pt" and len({len(x) for x in ids}) > 1):
            width = max(len(x) for x in ids)
        if width is not None:
            ids, types, mask = ([x + [fill] * (width - len(x)) for x in rows]
                                for rows, fill in ((ids, self.pad_id), (types, 0), (mask, 0)))
        out = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
        if return_tensors == "pt":
            import torch

            return {k: torch.tensor(v, dtype=torch.long) for k, v in out.items()}
        return {k: v[0] for k, v in out.items()} if single else out


def tokenizer_fingerprint(path: str | Path) -> str:
    """sha256 of what a tokenizer is: its vocabulary and its settings (a vocab.txt, or a folder's vocab.txt and
    tokenizer_config.json; tokenizer.json is built from those two). A study keys its pre-trainings with it, and a
    resumed run accepts a tokenizer that moved (a study folder copied elsewhere) when its vocabulary is the same."""
    import hashlib

    path = Path(path)
    files = [path] if path.is_file() else [path / "vocab.txt", path / "tokenizer_config.json"]
    digest = hashlib.sha256()
    for f in files:
        if f.is_file():
            digest.update(f.name.encode() + b"\0" + f.read_bytes())
    return "sha256:" + digest.hexdigest()[:16]
