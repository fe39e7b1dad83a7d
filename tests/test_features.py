"""Features per task type: structure, truncation, windows and label alignment on fixtures, decoding round
trips, and the oracle tests on the shared data (gold positions/labels in → gold answers/entities out)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from bertbench.data.features import (
    IGNORE_INDEX,
    build_features,
    choice_features,
    decode_qa,
    decode_tokens,
    pair_features,
    qa_features,
    token_features,
)
from bertbench.data.features_qa import _doc_spans
from bertbench.data.task_readers import Answer, ChoiceExample, QAExample, TextExample, TokenExample, read_split
from bertbench.metrics import normalize_answer, seqeval_f1, squad_v2_scores
from tests.reference import get_task, load_tasks, tokenize_ids
from bertbench.model.tokenizer import WordPieceTokenizer

FIXTURE_DATA = Path(__file__).resolve().parent / "fixtures" / "tasks" / "data"
CONLL_LABELS = get_task("conll2003").labels


@pytest.fixture(scope="module")
def tok() -> WordPieceTokenizer:
    """A small WordPiece vocabulary trained on the fixture texts: words split into several pieces."""
    texts = [line for p in sorted(FIXTURE_DATA.rglob("*.*")) for line in p.read_text(encoding="utf-8-sig").splitlines()]
    t = WordPieceTokenizer.train(texts, vocab_size=300, min_frequency=1)
    assert 100 < t.vocab_size <= 300
    return t


def pieces(tok, text: str) -> list[int]:
    return tokenize_ids(tok, text)


# --- classification / regression ---------------------------------------------------------------


def test_pair_features_layout_and_no_padding(tok):
    exs = [TextExample("0", "The cat sat on the mat.", "Birds fly south.", 1),
           TextExample("1", "Oxygen is a chemical element.", "It rained.", 0)]
    feats = pair_features(exs, tok, 128)
    for ex, f in zip(exs, feats):
        a, b = pieces(tok, ex.text_a), pieces(tok, ex.text_b)
        assert f["input_ids"] == [tok.cls_id, *a, tok.sep_id, *b, tok.sep_id]
        assert f["token_type_ids"] == [0] * (len(a) + 2) + [1] * (len(b) + 1)
        assert f["labels"] == ex.label and isinstance(f["labels"], int)
    assert len(feats[0]["input_ids"]) != len(feats[1]["input_ids"])  # not padded: the trainer pads per batch
    assert [f["example_index"] for f in feats] == [0, 1]


def test_pair_truncation_is_longest_first(tok):
    long = " ".join(["the company said profits rose"] * 6)
    ex = TextExample("0", long, "It rained.", None)
    f = pair_features([ex], tok, 16)[0]
    b = pieces(tok, "It rained.")
    assert len(f["input_ids"]) == 16
    assert f["input_ids"][-len(b) - 1:-1] == b  # the short segment is kept whole
    assert f["input_ids"][1:16 - len(b) - 2] == pieces(tok, long)[:16 - len(b) - 3]
    assert "labels" not in f  # unlabelled (test) example


def test_single_text_and_regression_labels(tok):
    f = pair_features([TextExample("0", "Birds fly south in winter.", None, 3.8)], tok, 128)[0]
    assert f["input_ids"] == [tok.cls_id, *pieces(tok, "Birds fly south in winter."), tok.sep_id]
    assert set(f["token_type_ids"]) == {0} and f["labels"] == 3.8


# --- multiple choice ---------------------------------------------------------------------------


def test_choice_features_pair_context_with_prefix_and_ending(tok):
    ex = ChoiceExample("5", "Someone opens the door.", "He", ["walks inside.", "eats the door.", "flies.", "sings."], 2)
    f = choice_features([ex], tok, 128)[0]
    assert len(f["input_ids"]) == len(f["token_type_ids"]) == 4 and f["labels"] == 2
    ctx = pieces(tok, ex.context)
    for ids, types, ending in zip(f["input_ids"], f["token_type_ids"], ex.endings):
        second = pieces(tok, f"He {ending}")
        assert ids == [tok.cls_id, *ctx, tok.sep_id, *second, tok.sep_id]
        assert types == [0] * (len(ctx) + 2) + [1] * (len(second) + 1)


# --- span QA -----------------------------------------------------------------------------------


def google_doc_spans(n: int, max_doc: int, stride: int) -> list[tuple[int, int]]:
    """google-research/bert run_squad.py's loop, verbatim in behaviour."""
    spans, start = [], 0
    while start < n:
        length = min(n - start, max_doc)
        spans.append((start, length))
        if start + length == n:
            break
        start += min(length, stride)
    return spans


@pytest.mark.parametrize("n, max_doc, stride", [(10, 4, 3), (10, 4, 2), (10, 4, 8), (3, 10, 2), (300, 100, 128), (1, 5, 1)])
def test_doc_spans_match_run_squad(n, max_doc, stride):
    assert _doc_spans(n, max_doc, stride) == google_doc_spans(n, max_doc, stride)


CONTEXT = ("Steam engines are external combustion engines. The working fluid is separate from the combustion "
           "products. Oxygen is a chemical element with symbol O and atomic number 8. The Normans gave their "
           "name to Normandy, a region in France. Denver Broncos defeated the Carolina Panthers.")


def qa_example(answer: str, qid: str = "q", impossible: bool = False) -> QAExample:
    answers = [] if impossible else [Answer(answer, CONTEXT.index(answer))]
    return QAExample(qid, "T", CONTEXT, "What is this question about engines and oxygen?", answers, impossible)


def test_qa_windows_positions_and_offsets(tok):
    exs = [qa_example("external combustion engines", "a"), qa_example("Carolina Panthers", "b"),
           qa_example("", "c", impossible=True)]
    feats = qa_features(exs, tok, max_seq_len=40, doc_stride=10, max_query_len=6)
    q = pieces(tok, exs[0].question)[:6]
    for i, ex in enumerate(exs):
        fs = [f for f in feats if f["example_index"] == i]
        assert len(fs) > 2  # the paragraph needs several windows at this length
        n_ctx = len(pieces(tok, CONTEXT))
        max_ctx_count = [0] * n_ctx
        for k, f in enumerate(fs):
            ids = f["input_ids"]
            assert len(ids) <= 40 and ids[:len(q) + 2] == [tok.cls_id, *q, tok.sep_id] and ids[-1] == tok.sep_id
            assert len(f["offsets"]) == len(f["token_type_ids"]) == len(f["token_is_max_context"]) == len(ids)
            ctx_pos = [p for p, o in enumerate(f["offsets"]) if o[0] >= 0]
            assert all(f["token_type_ids"][p] == 1 for p in ctx_pos)
            for p in ctx_pos:  # offsets cut the original text into the window's pieces
                assert f["offsets"][p][1] > f["offsets"][p][0]
            start_tok = 10 * k
            for j, p in enumerate(ctx_pos):
                max_ctx_count[start_tok + j] += f["token_is_max_context"][p]
            s, e = f["start_positions"], f["end_positions"]
            if ex.is_impossible:
                assert s == e == 0
            elif s:
                assert CONTEXT[f["offsets"][s][0]:f["offsets"][e][1]] == ex.answers[0].text
        assert max_ctx_count == [1] * n_ctx  # each paragraph token is "max context" in exactly one window
        if not ex.is_impossible:
            assert any(f["start_positions"] for f in fs)  # some window holds the whole answer
            assert any(f["start_positions"] == 0 for f in fs)  # and some window does not: [CLS]


def oracle_logits(feats: list[dict], peak: float = 10.0) -> tuple[list[list[float]], list[list[float]]]:
    starts, ends = [], []
    for f in feats:
        s, e = [0.0] * len(f["input_ids"]), [0.0] * len(f["input_ids"])
        s[f["start_positions"]] += peak
        e[f["end_positions"]] += peak
        starts.append(s + [-5.0] * 3)  # rows may be padded beyond the feature's length
        ends.append(e + [-5.0] * 3)
    return starts, ends


def test_decode_qa_round_trip_and_null_odds(tok):
    exs = [qa_example("external combustion engines", "a"), qa_example("Carolina Panthers", "b"),
           qa_example("", "c", impossible=True)]
    feats = qa_features(exs, tok, max_seq_len=40, doc_stride=10, max_query_len=6)
    s, e = oracle_logits(feats)
    v1 = decode_qa(exs, feats, s, e, n_best=20, max_answer_len=30)
    assert v1.predictions["a"] == "external combustion engines" and v1.predictions["b"] == "Carolina Panthers"
    assert v1.predictions["c"] != ""  # v1 never predicts "no answer"
    v2 = decode_qa(exs, feats, s, e, version_2=True, null_threshold=0.0)
    assert v2.predictions == {"a": "external combustion engines", "b": "Carolina Panthers", "c": ""}
    assert v2.null_odds["c"] == pytest.approx(20.0) and v2.null_odds["a"] == pytest.approx(-20.0)
    assert v2.best_non_null["c"] == v1.predictions["c"]
    # the threshold moves the decision
    assert decode_qa(exs, feats, s, e, version_2=True, null_threshold=25.0).predictions["c"] != ""
    # an answer longer than max_answer_len cannot be predicted
    short = decode_qa(exs[:1], [f for f in feats if f["example_index"] == 0],
                      *oracle_logits([f for f in feats if f["example_index"] == 0]), max_answer_len=2)
    assert short.predictions["a"] != "external combustion engines"


def test_decode_qa_without_any_valid_span(tok):
    ex = qa_example("Carolina Panthers")
    feats = qa_features([ex], tok, max_seq_len=128, doc_stride=128, max_query_len=64)
    n = len(feats[0]["input_ids"])
    s = [[0.0] * n]
    e = [[0.0] * n]
    out = decode_qa([ex], feats, s, e, n_best=1)  # the single best start/end is [CLS]: no span
    assert out.predictions["q"] == "" and out.null_odds["q"] == float("inf")


# --- token classification ----------------------------------------------------------------------


def test_first_piece_carries_the_label(tok):
    ex = TokenExample("0", ["Leicestershire", "rejects", "German", "lamb"], ["B-ORG", "O", "B-MISC", "O"], "doc0", 0)
    f = token_features([ex], tok, 128, CONLL_LABELS)[0]
    expected_ids, expected_labels, expected_words = [tok.cls_id], [IGNORE_INDEX], [-1]
    for w, (word, tag) in enumerate(zip(ex.words, ex.tags)):
        p = pieces(tok, word)
        expected_ids += p
        expected_labels += [CONLL_LABELS.index(tag)] + [IGNORE_INDEX] * (len(p) - 1)
        expected_words += [w] + [-1] * (len(p) - 1)
    assert any(len(pieces(tok, w)) > 1 for w in ex.words)  # the test needs a word of several pieces
    assert f["input_ids"] == expected_ids + [tok.sep_id]
    assert f["labels"] == expected_labels + [IGNORE_INDEX]
    assert f["word_index"] == expected_words + [-1]
    assert set(f["token_type_ids"]) == {0}


def test_an_erased_word_still_gets_a_piece(tok):
    ex = TokenExample("0", ["EU", "\u200b", "call"], ["B-ORG", "O", "O"])  # the normaliser drops U+200B
    f = token_features([ex], tok, 128, CONLL_LABELS)[0]
    assert tok.unk_id in f["input_ids"]
    assert [w for w in f["word_index"] if w >= 0] == [0, 1, 2]


def sentences() -> list[TokenExample]:
    words = ["Peter", "Blackburn", "of", "Leicestershire", "rejects", "the", "German", "call", "in", "Brussels"]
    tags = ["B-PER", "I-PER", "O", "B-ORG", "O", "O", "B-MISC", "O", "O", "B-LOC"]
    out = []
    for k in range(4):
        n = 3 + 5 * k  # 3, 8, 13, 18 words
        out.append(TokenExample(f"s{k}", (words * 2)[:n], (tags * 2)[:n], "doc0", k))
    return out


@pytest.mark.parametrize("max_seq_len", [8, 12, 30, 128])
@pytest.mark.parametrize("doc_context", [False, True])
def test_windows_cover_every_word_once_and_decode_back(tok, max_seq_len, doc_context):
    exs = sentences()
    feats = token_features(exs, tok, max_seq_len, CONLL_LABELS, doc_context=doc_context)
    for f in feats:
        assert len(f["input_ids"]) <= max_seq_len
        assert f["input_ids"][0] == tok.cls_id and f["input_ids"][-1] == tok.sep_id
        assert [lab != IGNORE_INDEX for lab in f["labels"]] == [w >= 0 for w in f["word_index"]]
    for i, ex in enumerate(exs):
        covered = sorted(w for f in feats if f["example_index"] == i for w in f["word_index"] if w >= 0)
        assert covered == list(range(len(ex.words)))  # every word predicted exactly once
    preds = [[lab if lab >= 0 else 0 for lab in f["labels"]] + [0, 0] for f in feats]
    assert decode_tokens(exs, feats, preds, CONLL_LABELS) == [ex.tags for ex in exs]
    if doc_context and max_seq_len == 128:
        # sentence 0 (3 words) is surrounded by its neighbours, unlabelled
        f0 = next(f for f in feats if f["example_index"] == 0)
        assert len(f0["input_ids"]) == 128 or sum(len(pieces(tok, " ".join(e.words))) for e in exs) + 2 < 128
        assert sum(lab != IGNORE_INDEX for lab in f0["labels"]) == 3
        assert len(f0["input_ids"]) > len(token_features(exs[:1], tok, 128, CONLL_LABELS)[0]["input_ids"])


def test_no_doc_context_without_document_ids(tok):
    """The hub's CoNLL copy has no document boundaries: its sentences get no neighbours as context."""
    a = TokenExample("a", ["Peter", "Blackburn"], ["B-PER", "I-PER"], "", 0)
    b = TokenExample("b", ["German", "call"], ["B-MISC", "O"], "", 1)
    fa, fb = token_features([a, b], tok, 64, CONLL_LABELS, doc_context=True)
    assert fa["input_ids"] == [tok.cls_id, *pieces(tok, "Peter Blackburn"), tok.sep_id]
    assert fb["input_ids"] == [tok.cls_id, *pieces(tok, "German call"), tok.sep_id]


def test_doc_context_stays_within_the_document(tok):
    a = TokenExample("a", ["Peter", "Blackburn"], ["B-PER", "I-PER"], "doc0", 0)
    b = TokenExample("b", ["German", "call"], ["B-MISC", "O"], "doc1", 0)
    fa, fb = token_features([a, b], tok, 64, CONLL_LABELS, doc_context=True)
    assert fa["input_ids"] == [tok.cls_id, *pieces(tok, "Peter Blackburn"), tok.sep_id]  # no neighbour in doc0
    assert fb["input_ids"] == [tok.cls_id, *pieces(tok, "German call"), tok.sep_id]


def test_decode_tokens_refuses_uncovered_words(tok):
    exs = sentences()[:2]
    feats = token_features(exs, tok, 128, CONLL_LABELS)
    with pytest.raises(ValueError, match="got no prediction"):
        decode_tokens(exs, feats[:1], [f["labels"] for f in feats[:1]], CONLL_LABELS)


# --- dispatch over every task, on fixtures ------------------------------------------------------


@pytest.mark.parametrize("name", sorted(load_tasks()))
def test_build_features_for_every_task(tok, name):
    task = get_task(name)
    examples = read_split(task, "eval", FIXTURE_DATA, source="local")
    feats = build_features(task, examples, tok)
    assert feats and {f["example_index"] for f in feats} == set(range(len(examples)))
    for f in feats:
        assert all(isinstance(x, int) for x in (f["input_ids"][0] if task.type == "multiple_choice" else f["input_ids"]))
        if task.type in ("classification", "multiple_choice"):
            assert isinstance(f["labels"], int) and 0 <= f["labels"] < task.num_labels
        if task.type == "regression":
            assert isinstance(f["labels"], float)
        if task.type == "span_qa":
            assert 0 <= f["start_positions"] <= f["end_positions"] < len(f["input_ids"])
        if task.type == "token_classification":
            assert all(lab == IGNORE_INDEX or 0 <= lab < task.num_labels for lab in f["labels"])
    if task.type == "span_qa":  # gold positions decode to the gold text on every fixture question
        out = decode_qa(examples, feats, *oracle_logits(feats), version_2=True)
        for ex in examples:
            assert out.predictions[ex.id] == ("" if ex.is_impossible else ex.answers[0].text)


# --- oracles on the shared data (integration) -----------------------------------------------------


@pytest.fixture(scope="module")
def bert_vocab_tok() -> WordPieceTokenizer:
    data = Path(os.environ.get("BERTBENCH_DATA_DIR", Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    vocab = data / "vocab" / "bert-base-uncased-vocab.txt"
    if not vocab.is_file():
        pytest.skip(f"{vocab} is absent")
    t = WordPieceTokenizer.from_vocab(vocab)
    assert t.vocab_size == 30522
    return t


@pytest.mark.integration
def test_squad_v1_oracle_recovers_gold_answers(shared_data, bert_vocab_tok):
    """Gold start/end through features and decoding give back the raw gold text for ≥ 99% of questions."""
    task = get_task("squad_v1")
    examples = read_split(task, "eval", shared_data, source="local")
    h = task.hparams
    feats = qa_features(examples, bert_vocab_tok, h.max_seq_len, h.doc_stride, h.max_query_len)
    out = decode_qa(examples, feats, *oracle_logits(feats), n_best=h.n_best, max_answer_len=h.max_answer_len)
    raw = sum(out.predictions[ex.id] == ex.answers[0].text for ex in examples) / len(examples)
    norm = sum(normalize_answer(out.predictions[ex.id]) == normalize_answer(ex.answers[0].text) for ex in examples) / len(examples)
    print(f"\nSQuAD v1.1 dev oracle: {len(examples)} questions, {len(feats)} features, "
          f"exact raw text {100 * raw:.2f}%, after SQuAD normalisation {100 * norm:.2f}%")
    assert raw >= 0.99


@pytest.mark.integration
def test_squad_v2_oracle_on_the_cs224n_half(shared_data, bert_vocab_tok):
    task = get_task("squad_v2_devsplit")
    examples = read_split(task, "dev", shared_data, source="local")
    h = task.hparams
    feats = qa_features(examples, bert_vocab_tok, h.max_seq_len, h.doc_stride, h.max_query_len)
    out = decode_qa(examples, feats, *oracle_logits(feats), n_best=h.n_best, max_answer_len=h.max_answer_len,
                    version_2=True)
    assert all(out.predictions[ex.id] == "" for ex in examples if ex.is_impossible)
    refs = {ex.id: [a.text for a in ex.answers] for ex in examples}
    scores = squad_v2_scores(out.predictions, refs)
    print(f"\nSQuAD v2.0 CS224N half oracle: exact {scores['exact']:.2f}, HasAns exact {scores['HasAns_exact']:.2f}")
    assert scores["NoAns_exact"] == 100.0 and scores["HasAns_exact"] >= 99.0


@pytest.mark.integration
@pytest.mark.parametrize("max_seq_len, doc_context", [(128, False), (32, False), (128, True)])
def test_conll_oracle_entity_f1_is_100(shared_data, bert_vocab_tok, max_seq_len, doc_context):
    from seqeval.metrics import f1_score

    task = get_task("conll2003")
    examples = read_split(task, "eval", shared_data, source="local")
    feats = token_features(examples, bert_vocab_tok, max_seq_len, task.labels, doc_context=doc_context)
    preds = [[lab if lab >= 0 else 0 for lab in f["labels"]] for f in feats]
    tags = decode_tokens(examples, feats, preds, task.labels)
    gold = [ex.tags for ex in examples]
    assert f1_score(gold, tags) == 1.0
    assert seqeval_f1(tags, gold) == 100.0
    if max_seq_len == 32:
        assert len(feats) > len(examples)  # long sentences were windowed
