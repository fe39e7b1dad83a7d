"""One objective field (mlm+nsp | mlm | clm): `data.nsp` is no key, the NSP head exists only for mlm+nsp, and
export says what the model is."""
from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.config import (
    OBJECTIVES,
    DataConfig,
    ModelConfig,
    PretrainConfig,
    apply_overrides,
    objective_flags,
    to_dict,
    trains_nsp,
)
from bertbench.config_files import from_dict, load_config
from bertbench.errors import BertbenchError
from bertbench.model.bert import BertForPreTraining

runner = CliRunner()
SMALL = ModelConfig(vocab_size=61, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)


# --- config ------------------------------------------------------------------------------------------


def test_a_dict_is_taken_as_written():
    assert from_dict(PretrainConfig, {"objective": "mlm"}).objective == "mlm"  # today's "mlm": no NSP
    assert from_dict(PretrainConfig, {}).objective == "mlm+nsp"  # the default is still BERT's


def test_data_nsp_is_no_key_any_more():
    with pytest.raises(BertbenchError, match="nsp"):
        apply_overrides(PretrainConfig(), ["data.nsp=false"])
    with pytest.raises(BertbenchError, match="Known keys"):  # the field itself is gone
        from_dict(DataConfig, {"nsp": False})


def test_full_sentences_needs_the_mlm_objective():
    assert PretrainConfig(objective="mlm", data=DataConfig(full_sentences=True)).data.full_sentences
    for objective in ("mlm+nsp", "clm"):
        with pytest.raises(BertbenchError, match="full_sentences .*needs objective 'mlm'"):
            PretrainConfig(objective=objective, data=DataConfig(full_sentences=True))


def test_objective_flags():
    assert objective_flags(None, False) is None
    assert objective_flags(None, True) == objective_flags("mlm", True) == "mlm"
    assert objective_flags("clm", False) == "clm"
    with pytest.raises(BertbenchError, match="--no-nsp is --objective mlm"):
        objective_flags("clm", True)
    with pytest.raises(BertbenchError, match="--objective 'gpt'"):
        objective_flags("gpt", False)


def test_recipes_and_presets_mean_what_they_meant():
    """Before, `objective: mlm` without data.nsp trained NSP: our files now say mlm+nsp, the No-NSP variant mlm."""
    from bertbench.config import resolve_recipe
    from bertbench.studies.preset import list_presets, load_preset, variant_config

    for name in ("tiny-debug", "tiny-10min", "mini-60min", "bert-base-paper"):
        assert load_config(PretrainConfig, resolve_recipe(name)).objective == "mlm+nsp", name
    meant = {"mlm_nsp": "mlm+nsp", "no_nsp": "mlm", "ltr": "clm", "mask_only": "mlm+nsp",
             "mask25": "mlm+nsp", "mask40": "mlm+nsp",  # the masking preset's ratios
             "tiny": "mlm+nsp", "mini": "mlm+nsp", "small": "mlm+nsp"}  # the table6 preset's sizes
    meant["wide_mlm_nsp"] = "mlm+nsp"  # the claims preset's L2-H256 MLM+NSP
    meant["mask100"] = "mlm+nsp"  # claims-3's MLM+NSP with every masked position [MASK]
    for name in list_presets():
        preset = load_preset(name)
        for v in preset.variants:
            if not v.random_init:
                assert variant_config(preset, v, Path(".")).objective == meant[v.name], (name, v.name)


# --- the model's heads ---------------------------------------------------------------------------------


def test_a_model_without_nsp_has_no_nsp_head_and_the_same_other_weights():
    torch.manual_seed(3)
    full = BertForPreTraining(SMALL, nsp=True)
    after_full = torch.rand(1)
    torch.manual_seed(3)
    lean = BertForPreTraining(SMALL, nsp=False)
    after_lean = torch.rand(1)
    assert lean.nsp is None and not lean.has_nsp and full.has_nsp
    assert not any(n.startswith("nsp") for n, _ in lean.named_parameters())
    assert not any(k.startswith("nsp.") for k in lean.state_dict())
    # the same random draws: a seed gives the same encoder and LM head, and leaves the RNG where it did
    full_sd = full.state_dict()
    assert set(full_sd) - set(lean.state_dict()) == {"nsp.weight", "nsp.bias"}
    for k, v in lean.state_dict().items():
        assert torch.equal(v, full_sd[k]), k
    assert torch.equal(after_full, after_lean)
    ids = torch.tensor([[2, 7, 8, 3, 9, 3]])
    labels = torch.tensor([[-100, 7, -100, -100, 9, -100]])
    out = lean(ids, lm_labels=labels)
    assert out.nsp_logits is None and out.nsp_loss is None and out.loss == out.lm_loss
    with pytest.raises(ValueError, match="without an NSP head"):
        lean(ids, lm_labels=labels, nsp_labels=torch.tensor([0]))


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_the_training_batches_carry_nsp_labels_only_for_mlm_nsp(tmp_path, objective):
    import numpy as np

    from bertbench.data.masking import make_collator
    from bertbench.model.tokenizer import WordPieceTokenizer

    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(40)]))
    tok = WordPieceTokenizer.from_vocab(tmp_path / "vocab.txt")
    samples = [{"input_ids": np.array([2, 10, 11, 12, 3, 13, 14, 3]), "token_type_ids": np.array([0] * 5 + [1] * 3),
                "nsp_label": 1, "index": i} for i in range(2)]
    batch = make_collator(DataConfig(max_seq_len=16), tok, objective)(samples)
    assert ("nsp_labels" in batch) == trains_nsp(objective) and "lm_labels" in batch


# --- checkpoints ---------------------------------------------------------------------------------------


def _save(tmp_path, model, run_config, name="ckpt"):
    from bertbench.model.checkpoint import save_checkpoint
    from bertbench.model.tokenizer import WordPieceTokenizer

    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
                                                  [f"w{i}" for i in range(56)]) + "\n")
    save_checkpoint(tmp_path / name, model, WordPieceTokenizer.from_vocab(tmp_path / "vocab.txt"), run_config=run_config)
    return tmp_path / name


def test_a_checkpoint_without_nsp_weights_has_no_head(tmp_path):
    from bertbench.model.checkpoint import load_checkpoint

    model = BertForPreTraining(SMALL, nsp=False)
    assert load_checkpoint(_save(tmp_path, model, {})).model.nsp is None  # no run config: the weights decide
    assert load_checkpoint(_save(tmp_path, model, to_dict(PretrainConfig(objective="mlm")), "b")).model.nsp is None
    with pytest.raises(BertbenchError, match="weights do not match"):  # the config says NSP, the weights have none
        load_checkpoint(_save(tmp_path, model, to_dict(PretrainConfig(objective="mlm+nsp")), "c"))


def test_export_without_an_nsp_head_is_a_masked_lm_in_transformers(tmp_path, caplog):
    transformers = pytest.importorskip("transformers")
    from bertbench.model.checkpoint import load_checkpoint

    torch.manual_seed(1)
    model = BertForPreTraining(SMALL, nsp=False).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    ckpt = _save(tmp_path, model, to_dict(PretrainConfig(objective="mlm")))
    r = runner.invoke(app, ["convert", "--to-hf", str(ckpt), "--out", str(tmp_path / "hf")])
    assert r.exit_code == 0, r.output
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertForMaskedLM"]
    from safetensors.torch import load_file

    assert not any("seq_relationship" in k for k in load_file(str(tmp_path / "hf" / "model.safetensors")))
    with caplog.at_level(logging.WARNING), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        hf = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "hf").eval()
    text = caplog.text + " ".join(str(x.message) for x in w)
    assert "newly initialized" not in text and "MISSING" not in text, text  # nothing made up at random
    ids = torch.tensor([[2, 10, 20, 30, 3, 40, 50, 3]])
    types = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1]])
    with torch.no_grad():
        torch.testing.assert_close(model(ids, types).lm_logits, hf(input_ids=ids, token_type_ids=types).logits,
                                   atol=1e-5, rtol=0)
    # and back: exact, and still without the head
    r = runner.invoke(app, ["convert", "--from-hf", str(tmp_path / "hf"), "--out", str(tmp_path / "back")])
    assert r.exit_code == 0, r.output
    back = load_checkpoint(tmp_path / "back").model
    assert back.nsp is None
    for k, v in model.state_dict().items():
        assert torch.equal(back.state_dict()[k], v), k


def test_the_same_data_keeps_its_fingerprint_across_the_objective_field(tmp_path):
    """Records carry the data fingerprint; folding data.nsp into `objective` must not change it for the same
    data. The three values were computed by the code before the change (90f3951, objective + data.nsp)."""
    import random as _random

    from bertbench.config import DataConfig
    from bertbench.data.instances import build_pretraining_data
    from bertbench.model.tokenizer import WordPieceTokenizer

    rng = _random.Random(1)
    words = "the cat sat on a mat and dog ran far away while birds sang in trees".split()
    (tmp_path / "corpus").mkdir()
    for d in range(8):
        lines = [" ".join(rng.choice(words) for _ in range(8)).capitalize() + ".\n" for _ in range(12)]
        (tmp_path / "corpus" / f"doc{d}.txt").write_text("".join(lines))
    tok = WordPieceTokenizer.from_vocab(Path(__file__).parent / "fixtures" / "corpus" / "vocab.txt")
    before = {"mlm+nsp": "0683c76c702a944c", "mlm": "60441116f9221732", "clm": "7deea5dcf601527b"}
    cfg = DataConfig(corpus=[str(tmp_path / "corpus")], max_seq_len=32)
    for objective, expected in before.items():
        data = build_pretraining_data(cfg, tok, objective=objective, seed=1, cache_dir=tmp_path / "cache")
        assert data.fingerprint[:16] == expected, objective
