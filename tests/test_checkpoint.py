"""Checkpoint folders, HF import/export through the CLI, and clear errors for bad folders."""
from __future__ import annotations

import json
import logging
import warnings

import pytest
import torch
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.config import ModelConfig
from bertbench.model.bert import BertForPreTraining

runner = CliRunner()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def write_vocab(path, n):
    path.write_text("\n".join(SPECIALS + [f"w{i}" for i in range(n - len(SPECIALS))]) + "\n")


def make_ckpt(tmp_path, vocab_size=77, causal=False):
    from bertbench.model.checkpoint import save_checkpoint
    from bertbench.model.tokenizer import WordPieceTokenizer

    write_vocab(tmp_path / "vocab.txt", vocab_size)
    tok = WordPieceTokenizer.from_vocab(tmp_path / "vocab.txt")
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=vocab_size, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, causal=causal)
    model = BertForPreTraining(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    save_checkpoint(tmp_path / "ckpt", model, tok, run_config={"note": "test"})
    return model


def test_save_load_roundtrip(tmp_path):
    import bertbench

    model = make_ckpt(tmp_path)
    ck = bertbench.load_checkpoint(tmp_path / "ckpt")
    assert ck.config == model.cfg and ck.run_config == {"note": "test"}
    assert ck.tokenizer.vocab_size == 77
    for k, v in model.state_dict().items():
        assert torch.equal(ck.model.state_dict()[k], v), k
    out = ck.model(input_ids=torch.tensor([[2, 7, 3]]))
    assert out.lm_logits.shape == (1, 3, 77) and out.nsp_logits.shape == (1, 2)
    assert out.last_hidden_state.shape == (1, 3, 32)


def test_export_loads_in_transformers_without_warnings_and_reimports_exactly(tmp_path, caplog):
    transformers = pytest.importorskip("transformers")
    model = make_ckpt(tmp_path, vocab_size=91)  # vocab_size ≠ 30522
    r = runner.invoke(app, ["convert", "--to-hf", str(tmp_path / "ckpt"), "--out", str(tmp_path / "hf")])
    assert r.exit_code == 0, r.output
    with caplog.at_level(logging.WARNING), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        hf = transformers.BertForPreTraining.from_pretrained(tmp_path / "hf").eval()
        hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    text = caplog.text + " ".join(str(x.message) for x in w)
    for bad in ("newly initialized", "not used", "missing", "unexpected", "MISSING", "UNEXPECTED"):
        assert bad not in text, text
    assert len(hf_tok) == 91
    ids = torch.tensor([[2, 10, 20, 30, 3, 40, 50, 3, 0]])
    mask = (ids != 0).long()
    types = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 0]])
    with torch.no_grad():
        ref = hf(input_ids=ids, token_type_ids=types, attention_mask=mask)
        ours = model(ids, types, mask)
    real = mask.bool()  # padded positions are zeros in ours (packed), finite garbage in HF's
    torch.testing.assert_close(ours.lm_logits[real], ref.prediction_logits[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(ours.nsp_logits, ref.seq_relationship_logits, atol=1e-5, rtol=0)
    # and back: HF → bertbench is exact
    r = runner.invoke(app, ["convert", "--from-hf", str(tmp_path / "hf"), "--out", str(tmp_path / "back")])
    assert r.exit_code == 0, r.output
    from bertbench.model.checkpoint import load_checkpoint

    back = load_checkpoint(tmp_path / "back")
    for k, v in model.state_dict().items():
        assert torch.equal(back.model.state_dict()[k], v), k


def test_import_hf_saved_with_tokenizer_json_only(tmp_path):
    """Current transformers save only tokenizer.json: import must accept it."""
    transformers = pytest.importorskip("transformers")
    write_vocab(tmp_path / "vocab.txt", 60)
    tok = transformers.BertTokenizerFast(vocab=str(tmp_path / "vocab.txt"))
    cfg = transformers.BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    hf = transformers.BertForMaskedLM(cfg).eval()  # no NSP head, no pooler: they stay at init
    hf.save_pretrained(tmp_path / "hfmlm")
    tok.save_pretrained(tmp_path / "hfmlm")
    (tmp_path / "hfmlm" / "vocab.txt").unlink(missing_ok=True)
    r = runner.invoke(app, ["convert", "--from-hf", str(tmp_path / "hfmlm"), "--out", str(tmp_path / "ck")])
    assert r.exit_code == 0, r.output
    assert "bert.pooler.weight" in r.output and "nsp" not in r.output  # no NSP head in the file: none in the model
    from bertbench.model.checkpoint import load_checkpoint

    ck = load_checkpoint(tmp_path / "ck")
    assert ck.tokenizer.vocab_size == 60 and ck.model.nsp is None
    with torch.no_grad():
        ids = torch.tensor([[2, 9, 11, 3]])
        torch.testing.assert_close(ck.model.bert(ids).last_hidden_state, hf.bert(ids).last_hidden_state, atol=1e-5, rtol=0)


def test_missing_checkpoint_files_named(tmp_path):
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "model_config.json").write_text("{}")
    r = runner.invoke(app, ["convert", "--to-hf", str(tmp_path / "half"), "--out", str(tmp_path / "x")])
    assert r.exit_code == 2
    assert "model.safetensors" in r.output and "vocab.txt" in r.output
    assert "Traceback" not in r.output
    r = runner.invoke(app, ["convert", "--to-hf", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "not found" in r.output


def test_non_bert_hf_dir_is_rejected(tmp_path):
    d = tmp_path / "gpt"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
    r = runner.invoke(app, ["convert", "--from-hf", str(d), "--out", str(tmp_path / "x")])
    assert r.exit_code == 2
    assert "not a BERT model" in r.output and "gpt2" in r.output
