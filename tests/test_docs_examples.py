"""The first-day page's examples run as written (docs/first-day.md; the coordinator may move them to the README):
each is found by its marker in README.md or docs/*.md, wherever it lives, exactly once."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import torch
from typer.testing import CliRunner

from bertbench.cli import app
from tests.conftest import ROOT
from tests.test_corpus_books import write_book

VOCAB = Path(__file__).parent / "fixtures" / "corpus" / "vocab.txt"
runner = CliRunner()


def example(marker: str, language: str) -> str:
    """The ```language block right below `<!-- marker -->`, from whichever document holds it."""
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        found += re.findall(re.escape(f"<!-- {marker} -->") + rf"\n```{language}\n(.*?)```", text, re.S)
        assert text.count(f"<!-- {marker} -->") == len(re.findall(re.escape(f"<!-- {marker} -->") + rf"\n```{language}\n",
                                                                  text)), f"{doc}: a mark without a block below it"
    assert len(found) == 1, f"<!-- {marker} --> marks {len(found)} blocks; expected exactly one"
    return found[0]


def test_fill_mask_example_runs(tmp_path, monkeypatch):
    """Three lines after the import: load a run folder, encode text with a typed [MASK], print the filled word."""
    from bertbench.config import ModelConfig
    from bertbench.model.bert import BertForPreTraining
    from bertbench.model.checkpoint import save_checkpoint
    from bertbench.model.tokenizer import WordPieceTokenizer

    code = example("python example: fill-mask", "python")
    assert len([ln for ln in code.splitlines() if ln.strip() and not ln.startswith("import ")]) == 3
    tok = WordPieceTokenizer.from_vocab(VOCAB)
    torch.manual_seed(0)
    model = BertForPreTraining(ModelConfig.from_size("tiny", vocab_size=tok.vocab_size)).eval()
    save_checkpoint(tmp_path / "runs" / "tiny" / "checkpoint", model, tok, run_config={"objective": "mlm+nsp"})
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "fill-mask example", "exec"), {})
    text = re.search(r'tokenizer\("([^"]*)"', code).group(1)
    ids = tok.backend.encode(text).ids
    assert ids.count(tok.mask_id) == 1  # the typed [MASK] is the mask token
    with torch.no_grad():
        logits = model(torch.tensor([ids])).lm_logits[0, ids.index(tok.mask_id)]
    assert out.getvalue() == tok.decode([int(logits.argmax())]) + "\n" != "\n"


def test_own_corpus_preset_example_validates(tmp_path, monkeypatch):
    from bertbench.studies.preset import load_preset

    text = example("preset example: own corpus", "yaml")
    monkeypatch.chdir(tmp_path)
    corpus = re.search(r"corpus: \[([^\]]*)\]", text).group(1).split(", ")
    for i, path in enumerate(corpus):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        write_book(tmp_path / path, seed=i)
    (tmp_path / "my-books.yaml").write_text(text)
    r = runner.invoke(app, ["run", "--preset", "my-books.yaml", "--validate"])
    assert r.exit_code == 0 and "2 variants" in r.output, r.output
    spec = load_preset("my-books.yaml")
    assert spec.pretrain.data.corpus == corpus and spec.pretrain.data.doc_sentences == 100
    assert spec.finetune.tasks == ["rte", "stsb"]
