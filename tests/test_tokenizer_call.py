"""The tokenizer as a Hugging Face user calls it (`tok(text, text_pair, return_tensors="pt")`), compared with
transformers' BertTokenizerFast on the same vocabulary; special tokens typed in text stay special."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bertbench.model.tokenizer import WordPieceTokenizer

VOCAB = Path(__file__).parent / "fixtures" / "corpus" / "vocab.txt"
KEYS = ("input_ids", "token_type_ids", "attention_mask")


@pytest.fixture(scope="module")
def both():
    transformers = pytest.importorskip("transformers")
    return WordPieceTokenizer.from_vocab(VOCAB), transformers.BertTokenizerFast(str(VOCAB), do_lower_case=True)


CASES = [
    (("The harbour was [MASK] at dawn.",), {}),
    (("The harbour was grey.", "The boats rocked [SEP] gently."), {}),
    ((["The harbour.", "Boats rocked gently at their moorings, and the water was grey."],), {"padding": True}),
    ((["The harbour.", "Boats rocked."], ["A pier.", "Mr. Pell walked down to the harbour before the sun."]),
     {"padding": True}),
    (("Mr. Pell walked down to the harbour before the sun was up.", "He carried a lantern."),
     {"truncation": True, "max_length": 12}),
    ((["The harbour."],), {"padding": "max_length", "max_length": 10}),
]


@pytest.mark.parametrize("args, kwargs", CASES)
def test_call_matches_transformers(both, args, kwargs):
    ours, hf = both
    want = hf(*args, **kwargs)
    got = ours(*args, **kwargs)
    assert {k: got[k] for k in KEYS} == {k: want[k] for k in KEYS}
    want_pt, got_pt = hf(*args, **kwargs, return_tensors="pt"), ours(*args, **kwargs, return_tensors="pt")
    for k in KEYS:
        assert got_pt[k].dtype == torch.long and torch.equal(got_pt[k], want_pt[k]), k


def test_typed_special_tokens_stay_special(both):
    ours, _ = both
    ids = ours("the [MASK] rocked. [SEP] and [CLS]")["input_ids"]
    assert ours.mask_id in ids and ids.count(ours.sep_id) == 2 and ids.count(ours.cls_id) == 2
    assert "[MASK]" in ours.decode(ids) and "[MASK]" not in ours.decode(ids, skip_special_tokens=True)
    # lower-case "[mask]" is text, as in transformers; and a corpus is raw text: a "[MASK]" written in a book is
    # not the mask token there (text_backend), so the same vocabulary tokenises the same data as before
    assert ours.mask_id not in ours("a [mask] b")["input_ids"]
    assert ours.mask_id not in ours.text_backend.encode("a [MASK] b", add_special_tokens=False).ids


def test_a_ragged_batch_as_tensors_is_padded_and_bad_arguments_are_one_line(both):
    from bertbench.errors import BertbenchError

    ours, _ = both
    short, long = (len(ours(t)["input_ids"]) for t in ("one", "one two three"))
    enc = ours(["one", "one two three"], return_tensors="pt")
    assert short < long and enc["input_ids"].shape == enc["attention_mask"].shape == (2, long)
    assert enc["attention_mask"][0].tolist() == [1] * short + [0] * (long - short)
    assert enc["input_ids"][0, short:].tolist() == [ours.pad_id] * (long - short)
    with pytest.raises(BertbenchError, match="only 'pt'"):
        ours("x", return_tensors="np")
    with pytest.raises(BertbenchError, match="2 second segments for 1 texts"):
        ours(["x"], ["a", "b"])
