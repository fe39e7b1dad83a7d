"""Bad values, damaged files, locks and overwrites: one clear line each, nothing earlier replaced (no training)."""
from __future__ import annotations

import dataclasses
import fcntl
import os

import pytest
import torch
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.config import PretrainConfig
from bertbench.errors import BertbenchError

runner = CliRunner()


def one_line_error(r, code=2) -> str:
    assert r.exit_code == code, r.output
    assert isinstance(r.exception, SystemExit), repr(r.exception)  # a handled error, not a traceback
    lines = [line for line in r.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    return lines[0]


@pytest.mark.parametrize("change,needle", [
    (dict(seed=-1), "seed -1"), (dict(batch_size=0), "batch_size 0"), (dict(max_steps=0), "max_steps 0"),
    (dict(max_steps=-1), "max_steps -1"), (dict(grad_accum=0), "grad_accum 0"), (dict(log_every=0), "log_every 0"),
    (dict(precision="bogus"), "precision 'bogus'"), (dict(budget_minutes=-1.0), "budget_minutes -1"),
    (dict(budget_minutes=0.0), "budget_minutes 0"), (dict(budget_minutes=float("nan")), "budget_minutes nan"),
    (dict(seed=2**32), "seed"), (dict(eval_every=-1), "eval_every -1"), (dict(checkpoint_every=-2), "checkpoint_every"),
    (dict(num_workers=-1), "num_workers -1"), (dict(eval_batches=0), "eval_batches 0"),
])
def test_config_values_are_checked_on_entry(change, needle):
    with pytest.raises(BertbenchError, match=needle.replace("(", r"\(")):
        dataclasses.replace(PretrainConfig(), **change)


@pytest.mark.parametrize("flags", [["--seed", "-1"], ["--batch-size", "0"], ["--max-steps", "0"], ["--grad-accum", "0"],
                                   ["--precision", "bogus"], ["--set", "log_every=0"], ["--budget-minutes", "-1"],
                                   ["--max-documents", "0"]])
def test_pretrain_flags_fail_in_one_line_before_any_work(tmp_path, flags):
    out = tmp_path / "run"
    r = runner.invoke(app, ["pretrain", "--corpus", str(tmp_path), "--model-size", "tiny", "--out", str(out), *flags])
    one_line_error(r)
    assert not out.exists()


def test_first_bad_step_names_the_first_non_finite_step():
    from bertbench.training.finite_guard import FirstBadStep, NonFiniteError

    g = FirstBadStep()
    g.note_loss(torch.tensor(1.0), 1)
    g.check("run")  # nothing yet
    g.note_loss(torch.tensor(float("nan")), 2)
    g.note_loss(torch.tensor(float("inf")), 3)
    with pytest.raises(NonFiniteError, match="loss became NaN/inf at step 2"):
        g.check("run")


@pytest.mark.parametrize("clip", [1.0, 0.0])
def test_the_guard_notes_the_norm_clipping_returned_and_computes_no_second(tmp_path, monkeypatch, clip):
    """Issue 47: where the module clips (fused AdamW), the finite guard notes the norm clipping returned: one
    gradient norm per step, not two; without clipping the guard computes the one norm itself."""
    from types import SimpleNamespace

    from bertbench.config import ModelConfig, OptimConfig
    from bertbench.model.bert import BertForPreTraining
    from bertbench.training.callbacks import FiniteGuard
    from bertbench.training.finite_guard import NonFiniteError
    from bertbench.training.pretrain_module import PretrainModule

    model = BertForPreTraining(ModelConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32))
    module = PretrainModule(model, OptimConfig(grad_clip=clip), max_steps=10, fused_optimizer=True)
    norms, total_norm = [], torch.nn.utils.get_total_norm
    counted = lambda *a, **k: norms.append(1) or total_norm(*a, **k)  # noqa: E731
    monkeypatch.setattr(torch.nn.utils, "get_total_norm", counted)  # the guard's
    monkeypatch.setattr(torch.nn.utils.clip_grad, "_get_total_norm", counted)  # clip_grad_norm_'s
    guard, trainer = FiniteGuard(tmp_path, "32", None), SimpleNamespace(global_step=0)
    for step, bad in ((1, False), (2, True)):
        for p in model.parameters():
            p.grad = torch.full_like(p, float("inf") if bad else 3.0)
        guard.on_train_batch_start(trainer, module, None, 0)
        guard.on_before_optimizer_step(trainer, module, None)
        module.on_before_optimizer_step(None)
        guard.on_train_batch_end(trainer, module, torch.tensor(1.0), None, 0)
        trainer.global_step += 1
    assert len(norms) == 2  # one per step
    with pytest.raises(NonFiniteError, match="gradient norm became NaN/inf at step 2"):
        guard.check()


def test_damaged_or_non_finite_weights_are_refused(tmp_path):
    from safetensors.torch import save_file

    from bertbench.model.checkpoint import read_safetensors

    good = tmp_path / "w.safetensors"
    save_file({"a": torch.ones(64, 64)}, str(good))
    assert read_safetensors(good)["a"].sum() == 64 * 64
    data = good.read_bytes()
    (tmp_path / "trunc.safetensors").write_bytes(data[: len(data) // 2])
    (tmp_path / "hdr.safetensors").write_bytes(b"\xff" * 14 + data[14:])
    ff = bytearray(data)
    ff[-4096:] = b"\xff" * 4096  # NaN bit patterns in the tensor data
    (tmp_path / "ff.safetensors").write_bytes(bytes(ff))
    for name, needle in [("trunc", "truncated or corrupt"), ("hdr", "truncated or corrupt"), ("ff", "NaN/inf")]:
        with pytest.raises(BertbenchError, match=needle):
            read_safetensors(tmp_path / f"{name}.safetensors")


def test_run_folder_lock_refuses_a_second_process(tmp_path):
    from bertbench.runtime.run_dir import lock_run_dir

    with lock_run_dir(tmp_path):
        with pytest.raises(BertbenchError, match="in use by process"):  # a second flock on a new descriptor
            with lock_run_dir(tmp_path):
                pass
    with lock_run_dir(tmp_path):  # released at the end of the block (and by the kernel when a process dies)
        pass
    fd = os.open(tmp_path / ".lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)


def test_out_that_is_a_file_is_one_line(tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("keep me\n")
    r = runner.invoke(app, ["pretrain", "--corpus", str(tmp_path), "--model-size", "tiny", "--out", str(f)])
    assert "is a file" in one_line_error(r)
    assert f.read_text() == "keep me\n"


def test_resume_with_a_changed_config_names_the_keys(tmp_path):
    from bertbench.config import save_config
    from bertbench.training.pretrain_run import RESUMABLE_CHANGES, check_resume_config

    cfg = PretrainConfig(model_size="tiny")
    save_config(cfg, tmp_path / "config.yaml")
    check_resume_config(tmp_path / "config.yaml", dataclasses.replace(cfg, eval_every=7, log_every=3))  # may change
    changed = dataclasses.replace(cfg, seed=5, optim=dataclasses.replace(cfg.optim, lr=0.5))
    with pytest.raises(BertbenchError) as err:
        check_resume_config(tmp_path / "config.yaml", changed)
    assert "optim.lr: 0.0001 → 0.5" in str(err.value) and "seed: 1 → 5" in str(err.value)
    assert "eval_every" in RESUMABLE_CHANGES and "max_steps" not in RESUMABLE_CHANGES


def test_report_out_never_replaces_a_hand_written_file(tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("my notes\n")
    r = runner.invoke(app, ["report", str(tmp_path), "--out", str(notes)])
    assert "not written by bertbench report" in one_line_error(r)
    assert notes.read_text() == "my notes\n"


def test_convert_never_replaces_a_non_empty_folder(tmp_path):
    victim = tmp_path / "ckpt"
    victim.mkdir()
    (victim / "summary.json").write_text("{}")
    r = runner.invoke(app, ["convert", "--from-hf", str(tmp_path / "hf"), "--out", str(victim)])
    assert "--force" in one_line_error(r)
    assert (victim / "summary.json").read_text() == "{}"


def test_finetune_loop_with_no_examples_is_an_error_not_a_hang():
    from bertbench.training.finetune_loop import FinetuneHParams, train

    with pytest.raises(BertbenchError, match="no training examples"):
        train(torch.nn.Linear(2, 2), [], [], FinetuneHParams(), 1, torch.device("cpu"), False)


@pytest.mark.parametrize("flags", [["--batch-size", "0"], ["--max-train-examples", "0"], ["--max-eval-examples", "-1"],
                                   ["--max-steps", "0"]])
def test_finetune_flags_fail_in_one_line(tmp_path, flags):
    r = runner.invoke(app, ["finetune", "--model", "random:tiny", "--tasks", "rte", "--out", str(tmp_path / "f"), *flags])
    one_line_error(r)
    assert not (tmp_path / "f").exists()


def test_finetune_out_that_is_a_file_is_one_line_before_training(tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("keep me\n")
    r = runner.invoke(app, ["finetune", "--model", "random:tiny", "--tasks", "rte", "--out", str(f / "sub")])
    assert "is a file" in one_line_error(r)
    assert f.read_text() == "keep me\n"


def test_resume_accepts_the_same_tokenizer_at_another_path(tmp_path):
    """A study folder copied elsewhere: its tokenizer's path changed, its vocabulary did not. Another vocabulary
    at the new path is still refused."""
    from bertbench.config import save_config
    from bertbench.training.pretrain_run import check_resume_config

    old, run = tmp_path / "old" / "tokenizer", tmp_path / "run"
    (run / "tokenizer").mkdir(parents=True)
    (run / "tokenizer" / "vocab.txt").write_text("[PAD]\n[UNK]\nhello\n")
    save_config(PretrainConfig(model_size="tiny", tokenizer=str(old)), run / "config.yaml")  # `old` is gone
    moved = tmp_path / "new" / "tokenizer"
    moved.mkdir(parents=True)
    (moved / "vocab.txt").write_text("[PAD]\n[UNK]\nhello\n")
    check_resume_config(run / "config.yaml", PretrainConfig(model_size="tiny", tokenizer=str(moved)))
    (moved / "vocab.txt").write_text("[PAD]\n[UNK]\nworld\n")
    with pytest.raises(BertbenchError, match="tokenizer"):
        check_resume_config(run / "config.yaml", PretrainConfig(model_size="tiny", tokenizer=str(moved)))
