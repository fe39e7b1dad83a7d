from __future__ import annotations

from pathlib import Path

import pytest

from bertbench.errors import BertbenchError
from bertbench.model.tokenizer import WordPieceTokenizer
from tests.reference import tokenize_ids


def first_lines(path: Path, n: int) -> list[str]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                out.append(line.rstrip("\n"))
                if len(out) == n:
                    break
    return out


@pytest.mark.integration
def test_parity_with_transformers_on_wikipedia(shared_data):
    transformers = pytest.importorskip("transformers")
    vocab = shared_data / "vocab" / "bert-base-uncased-vocab.txt"
    # library-notes: BertTokenizerFast(vocab_file=…) silently builds a 5-token vocab; vocab= is right.
    ref = transformers.BertTokenizerFast(vocab=str(vocab), do_lower_case=True)
    assert len(ref) == 30522
    ours = WordPieceTokenizer.from_vocab(vocab)
    assert ours.vocab_size == 30522
    lines = first_lines(shared_data / "corpus" / "wikipedia" / "wiki_00", 2000)
    assert len(lines) == 2000
    expected = ref(lines)
    got = ours.encode_batch(lines)
    for i, (line, enc) in enumerate(zip(lines, got)):
        assert enc.input_ids == expected["input_ids"][i], line
    # pairs: consecutive lines, with and without truncation
    firsts, seconds = lines[:-1:2], lines[1::2]
    expected = ref(firsts, seconds, truncation=True, max_length=64)
    got = ours.encode_batch(firsts, seconds, max_length=64)
    for i, enc in enumerate(got):
        assert enc.input_ids == expected["input_ids"][i]
        assert enc.token_type_ids == expected["token_type_ids"][i]
    assert any(1 in e.token_type_ids for e in got)


def test_train_save_reload(tmp_path):
    docs = tmp_path / "corpus"
    docs.mkdir()
    text = "The quick brown fox jumps over the lazy dog. Café naïve résumé!\n\n" * 50
    (docs / "a.txt").write_text(text + "Pack my box with five dozen liquor jugs.\n" * 30)
    (docs / "b.txt").write_text("Sphinx of black quartz, judge my vow.\n" * 40)
    from tests.reference import iter_texts_for_training

    tok = WordPieceTokenizer.train(iter_texts_for_training(sorted(docs.glob("*.txt"))), vocab_size=200)
    assert tok.convert_ids_to_tokens(range(5)) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert 50 < tok.vocab_size <= 200
    tok.save(tmp_path / "tok")
    assert (tmp_path / "tok" / "vocab.txt").is_file()
    again = WordPieceTokenizer.load(tmp_path / "tok")
    from_vocab = WordPieceTokenizer.from_vocab(tmp_path / "tok" / "vocab.txt")
    sample = ["The lazy fox, judged: résumé quartz!", "Unseen zebra words"]
    for t in (again, from_vocab):
        assert [e.input_ids for e in t.encode_batch(sample)] == [e.input_ids for e in tok.encode_batch(sample)]
    # lower-casing and accent stripping happen: "Café" and "cafe" tokenize the same
    assert tokenize_ids(tok, "Café") == tokenize_ids(tok, "cafe")


def test_pair_encoding_token_types(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", "big"]) + "\n")
    tok = WordPieceTokenizer.from_vocab(vocab)
    [enc] = tok.encode_batch(["hello worlds"], ["big world"])
    assert tok.convert_ids_to_tokens(enc.input_ids) == ["[CLS]", "hello", "world", "##s", "[SEP]", "big", "world", "[SEP]"]
    assert enc.token_type_ids == [0, 0, 0, 0, 0, 1, 1, 1]
    [short] = tok.encode_batch(["hello worlds"], ["big world"], max_length=6)
    assert len(short.input_ids) == 6


def test_bad_vocab_is_a_clear_error(tmp_path):
    bad = tmp_path / "vocab.txt"
    bad.write_text("a\nb\n")
    with pytest.raises(BertbenchError, match="missing special tokens"):
        WordPieceTokenizer.from_vocab(bad)
    with pytest.raises(BertbenchError, match="not found"):
        WordPieceTokenizer.load(tmp_path / "nope")


# A corpus where the trainer's hash order decides things: many words, many equal counts, a wide alphabet
# (a rare character sits at the limit_alphabet cut among equally rare ones) and continuation symbols galore.
_TRAIN_SCRIPT = """
import random, sys
from pathlib import Path
from bertbench.model.tokenizer import WordPieceTokenizer
from tests.reference import tokenize_ids
rng = random.Random(7)
letters = "abcdefghijklmnopqrstuvwxyzéèàçñøß"
words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(3000)]
lines = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(4000)]
tok = WordPieceTokenizer.train(iter(lines), vocab_size=700, limit_alphabet=30)
tok.save(Path(sys.argv[1]))
"""


def test_trained_vocab_is_byte_identical_in_every_process(tmp_path):
    """tokenizers' trainer orders (and, at ties, picks) tokens by a hash map seeded per process; ours may not."""
    import os
    import subprocess
    import sys

    vocabs = []
    for hash_seed in ("0", "1", "2"):
        out = tmp_path / f"tok{hash_seed}"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run([sys.executable, "-c", _TRAIN_SCRIPT, str(out)], check=True, env=env, timeout=120)
        vocabs.append((out / "vocab.txt").read_bytes())
        assert (out / "tokenizer.json").read_bytes() == (tmp_path / "tok0" / "tokenizer.json").read_bytes()
    assert vocabs[0] == vocabs[1] == vocabs[2]
    tokens = vocabs[0].decode().splitlines()
    assert len(tokens) == 700


def test_trained_vocab_has_one_canonical_order():
    """[PAD] [UNK] [CLS] [SEP] [MASK], the alphabet (most frequent first), sorted "##c", then merges."""
    from bertbench.model.tokenizer import SPECIAL_TOKENS, train_vocab

    lines = ["the cat sat on the mat", "the dog ate the hat", "a cat and a dog"] * 20
    vocab = train_vocab(lines, vocab_size=60, limit_alphabet=None)
    tokens = sorted(vocab, key=vocab.__getitem__)
    assert tokens[:5] == SPECIAL_TOKENS and list(vocab.values()) == list(range(len(vocab)))
    alphabet = [t for t in tokens[5:] if len(t) == 1]
    assert tokens[5 : 5 + len(alphabet)] == alphabet
    assert alphabet[:2] == ["t", "a"]  # the most frequent characters first ('t' 200 times, 'a' 180)
    assert alphabet == sorted(set("".join(lines).replace(" ", "")), key=lambda c: (-"".join(lines).count(c), c))
    rest = tokens[5 + len(alphabet) :]
    continuations = [t for t in rest if t.startswith("##") and len(t) == 3]
    assert rest[: len(continuations)] == sorted(continuations)
    assert {"the", "cat", "dog"} <= set(rest[len(continuations) :])  # frequent words were merged
