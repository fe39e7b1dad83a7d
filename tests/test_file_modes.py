"""Files bertbench writes take the user's umask (issue 40: checkpoints were 0600, unreadable to a shared
cluster folder's other users, because atomic writes go through mkstemp)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bertbench.config import ModelConfig
from bertbench.model.bert import BertForPreTraining
from bertbench.model.checkpoint import save_checkpoint
from bertbench.model.tokenizer import WordPieceTokenizer
from bertbench.runtime.files import atomic_write_json, current_umask

VOCAB = Path(__file__).parent / "fixtures" / "corpus" / "vocab.txt"


@pytest.fixture
def umask():
    before = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(before)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_checkpoint_files_take_the_umask(tmp_path, umask, mask, mode):
    umask(mask)
    assert current_umask() == mask
    tok = WordPieceTokenizer.from_vocab(VOCAB)
    model = BertForPreTraining(ModelConfig.from_size("tiny", vocab_size=tok.vocab_size))
    save_checkpoint(tmp_path / "ckpt", model, tok, run_config={"objective": "mlm+nsp"})
    atomic_write_json(tmp_path / "record.json", {"a": 1})
    files = [*(tmp_path / "ckpt").iterdir(), tmp_path / "record.json"]
    assert {"model.safetensors", "model_config.json", "vocab.txt", "tokenizer.json"} <= {f.name for f in files}
    assert {f.name: oct(stat.S_IMODE(f.stat().st_mode)) for f in files} == {f.name: oct(mode) for f in files}


def test_a_hugging_face_export_takes_the_umask(tmp_path, umask):
    from bertbench.model.hf_compat import write_hf_dir

    umask(0o022)
    tok = WordPieceTokenizer.from_vocab(VOCAB)
    write_hf_dir(BertForPreTraining(ModelConfig.from_size("tiny", vocab_size=tok.vocab_size)), tok, tmp_path / "hf")
    modes = {f.name: oct(stat.S_IMODE(f.stat().st_mode)) for f in (tmp_path / "hf").iterdir()}
    assert "model.safetensors" in modes and set(modes.values()) == {"0o644"}, modes
