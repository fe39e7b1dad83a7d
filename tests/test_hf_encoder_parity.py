"""The generic encoder path against BERT's fast path (issue 57): one Hugging Face BERT folder fine-tuned both ways
(imported into bertbench's encoder; transformers' own BertModel behind HFEncoder), the same seed, data and head
weights, dropout off on both (the two draw their dropout masks differently): the losses agree to 1e-4 for the
first steps. And what cannot be fine-tuned is refused in one `error:` line naming what is missing."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from bertbench.cli import app

transformers = pytest.importorskip("transformers")

runner = CliRunner()
TESTS = Path(__file__).parent
FIXTURE_DATA = TESTS / "fixtures" / "tasks" / "data"
VOCAB = TESTS / "fixtures" / "corpus" / "vocab.txt"
STEPS = 4


def _bert_folder(tmp_path: Path) -> Path:
    cfg = transformers.BertConfig(vocab_size=sum(1 for _ in VOCAB.open()), hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=128, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    transformers.BertModel(cfg).save_pretrained(tmp_path / "hfbert")  # with its pooler
    transformers.BertTokenizerFast(vocab=str(VOCAB)).save_pretrained(tmp_path / "hfbert")
    return tmp_path / "hfbert"


def _train(model, features, steps: int):
    """The fine-tuning loop's losses, step by step (the loop itself reports only epoch means)."""
    from bertbench.training.finetune_loop import FinetuneHParams, train

    losses = []
    forward = model.forward

    def recording(batch):
        logits, loss = forward(batch)
        if loss is not None:
            losses.append(loss.item())
        return logits, loss

    model.forward = recording
    hp = FinetuneHParams(lr=1e-3, epochs=10, batch_size=4, max_steps=steps)
    res = train(model, features, features[:8], hp, seed=3, device=torch.device("cpu"), bf16=False)
    return losses, res.eval_outputs


@pytest.mark.parametrize("task_name", ["stsb", "conll2003"])
def test_the_fast_path_and_the_generic_path_fine_tune_one_bert_folder_alike(tmp_path, task_name):
    from bertbench.data.features import build_features
    from bertbench.data.task_readers import read_split
    from bertbench.model.hf_encoder import load_generic
    from bertbench.training.finetune_run import resolve_model_source
    from bertbench.training.task_model import TaskModel

    sys.path.insert(0, str(TESTS))
    from reference import get_task

    folder = _bert_folder(tmp_path)
    task = get_task(task_name)
    examples = read_split(task, "train", FIXTURE_DATA, "local")[:16]
    fast = resolve_model_source(str(folder), None, FIXTURE_DATA)
    assert fast.generic is None  # a BERT folder keeps the fast path, and its record says what it is
    assert (fast.external["model_type"], fast.external["tokenizer"]) == ("bert", "WordPiece")
    fast = dataclasses.replace(fast, config=dataclasses.replace(fast.config, dropout=0.0, attention_dropout=0.0))
    generic = load_generic(folder)
    assert generic.config.dropout == 0.0
    features = build_features(task, examples, fast.tokenizer, max_seq_len=64)
    assert build_features(task, examples, generic.tokenizer, max_seq_len=64) == features  # the same inputs

    ours = TaskModel(fast.backbone(1), task.type, task.num_labels)
    theirs = TaskModel(generic.backbone(1), task.type, task.num_labels)
    theirs.head.load_state_dict(ours.head.state_dict())  # the heads' random init differs by path, not their math
    torch.testing.assert_close(theirs.bert.pooler.weight, ours.bert.pooler.weight)  # BERT's own pooler, both ways
    ours_losses, ours_out = _train(ours, features, STEPS)
    theirs_losses, theirs_out = _train(theirs, features, STEPS)
    assert len(ours_losses) == STEPS and len(set(ours_losses)) == STEPS  # it trained: the loss moves
    assert theirs_losses == pytest.approx(ours_losses, abs=1e-4)
    for f, a, b in zip(features[:8], theirs_out, ours_out):  # the eval outputs, at the real tokens (not the padding)
        a, b = torch.as_tensor(a), torch.as_tensor(b)
        if task.type == "token_classification":
            a, b = a[:len(f["input_ids"])], b[:len(f["input_ids"])]
        torch.testing.assert_close(a, b, atol=1e-3, rtol=1e-3)


def _error(*args) -> str:
    r = runner.invoke(app, list(map(str, args)))
    assert r.exit_code == 2 and r.exception is None or isinstance(r.exception, SystemExit), r.output
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), r.output
    return lines[0]


def _finetune_error(folder, tmp_path: Path) -> str:
    return _error("finetune", "--model", folder, "--tasks", "rte", "--data-dir", FIXTURE_DATA, "--max-steps", "1",
                  "--seeds", "1", "--out", tmp_path / "out")


def test_a_decoder_only_model_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "gpt2-tiny"
    transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=1, n_head=2, n_positions=64).save_pretrained(folder)
    line = _finetune_error(folder, tmp_path)
    assert "'gpt2'" in line and "decoder-only" in line


def test_a_folder_without_a_fast_tokenizer_is_refused_in_one_line(tmp_path):
    sys.path.insert(0, str(TESTS))
    from hf_tiny import make_folder

    folder = make_folder(tmp_path / "electra-tiny", "electra", ["a tiny corpus of a few words"] * 50)
    for name in ("tokenizer.json", "tokenizer_config.json"):  # the weights alone (transformers 5 would make an
        (folder / name).unlink()  # empty tokenizer of the special tokens for it)
    line = _finetune_error(folder, tmp_path)
    assert "no fast tokenizer (tokenizer.json)" in line


def test_without_transformers_the_error_names_the_extra(tmp_path, monkeypatch):
    sys.path.insert(0, str(TESTS))
    from hf_tiny import make_folder

    folder = make_folder(tmp_path / "roberta-tiny", "roberta", ["a tiny corpus of a few words"] * 50)
    monkeypatch.setitem(sys.modules, "transformers", None)  # what `import transformers` is when it is not installed
    line = _finetune_error(folder, tmp_path)
    assert "pip install -e '.[hf]'" in line


def test_a_hub_model_is_its_snapshot_folder_and_an_unreachable_one_is_one_line(tmp_path, monkeypatch):
    """`--model hub:NAME` fine-tunes the hub snapshot's folder (here a local folder stands for the download), named
    by the model's name; a name the hub (or, offline, its cache) does not have is one `error:` line."""
    import huggingface_hub

    sys.path.insert(0, str(TESTS))
    from hf_tiny import make_folder

    folder = make_folder(tmp_path / "snapshot", "electra", ["a tiny corpus of a few words"] * 50)
    asked = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download",
                        lambda name, **kw: asked.append((name, kw["allow_patterns"])) or str(folder))
    r = runner.invoke(app, ["finetune", "--model", "hub:someone/electra-tiny", "--tasks", "rte", "--data-dir",
                            str(FIXTURE_DATA), "--max-steps", "1", "--seeds", "1", "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert asked[0][0] == "someone/electra-tiny" and "*.safetensors" in asked[0][1]
    from bertbench.results import load_records

    [rec] = load_records([tmp_path / "out"])
    assert rec.data["model"]["source"] == "hub:someone/electra-tiny"
    assert rec.data["model"]["external"]["name"] == "electra-tiny"

    def offline(name, **kw):
        raise huggingface_hub.errors.LocalEntryNotFoundError("cannot find the requested files in the local cache")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    line = _finetune_error("hub:someone/nothing", tmp_path)
    assert line.startswith("error: --model hub:someone/nothing: not available from the Hugging Face hub")


def test_a_bert_of_gelu_new_which_our_encoder_cannot_be_fine_tunes_on_the_generic_path(tmp_path):
    """A BERT with another activation (gelu_new) does not map into bertbench's encoder: transformers' own runs it."""
    from bertbench.training.finetune_run import resolve_model_source

    cfg = transformers.BertConfig(vocab_size=sum(1 for _ in VOCAB.open()), hidden_size=32, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=64, hidden_act="gelu_new")
    transformers.BertModel(cfg).save_pretrained(tmp_path / "bert-gelu-new")
    transformers.BertTokenizerFast(vocab=str(VOCAB)).save_pretrained(tmp_path / "bert-gelu-new")
    source = resolve_model_source(str(tmp_path / "bert-gelu-new"), None, FIXTURE_DATA)
    assert source.generic is not None and source.external["model_type"] == "bert"
    assert source.generic.model.config.hidden_act == "gelu_new"
