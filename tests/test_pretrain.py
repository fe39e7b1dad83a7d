"""`bertbench pretrain` end to end on a tiny generated corpus: run directory, ablation switches, exact resume."""
from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest
import torch
from conftest import absolute_paths
from typer.testing import CliRunner

from bertbench.cli import app

runner = CliRunner()
WORDS = ("river stone light garden window music paper winter silver forest bridge candle "
         "harbor meadow lantern orchard valley thunder mirror ribbon").split()


def write_corpus(folder, n_docs=14, seed=0):
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for d in range(n_docs):
        paras = []
        for _ in range(3):
            sents = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))).capitalize() + "." for _ in range(4)]
            paras.append(" ".join(sents))
        (folder / f"doc{d:02d}.txt").write_text("\n\n".join(paras) + "\n")
    return folder


TINY = ["--model-size", "tiny", "--vocab-size", "200", "--max-seq-len", "32", "--batch-size", "8",
        "--eval-every", "5", "--checkpoint-every", "5", "--precision", "32", "--set", "eval_batches=2", "--set", "log_every=1"]


def pretrain(args, monkeypatch):
    monkeypatch.setenv("BERTBENCH_PROGRESS", "0")
    r = runner.invoke(app, ["pretrain", *args])
    assert r.exit_code == 0, r.output + repr(r.exception)
    return r


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "docs")


@pytest.mark.parametrize("flags,objective,nsp", [
    ([], "mlm+nsp", True),
    (["--no-nsp"], "mlm", False),
    (["--objective", "mlm"], "mlm", False),
    (["--objective", "clm"], "clm", False),
    (["--mask-ratio", "0.4", "--mask-procedure", "100/0/0", "--whole-word-mask"], "mlm+nsp", True),
])
def test_run_directory(tmp_path, corpus, monkeypatch, flags, objective, nsp):
    out = tmp_path / "run"
    pretrain(["--corpus", str(corpus), "--max-steps", "10", "--out", str(out), *TINY, *flags], monkeypatch)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["objective"] == objective and "nsp" not in summary
    assert summary["steps"] == 10 and summary["tokens_seen"] > 0 and 0 < summary["loss_tokens"] <= summary["tokens_seen"]
    for key in ("data_fingerprint", "code_version", "hardware", "wall_seconds", "final_train_loss", "precision",
                "procedure_fingerprint"):
        assert summary[key] is not None, key
    step = summary["step"]  # the step taken on CPU, and why: a 10-step run cannot pay back any compile
    assert step["shapes"] == "dynamic" and not step["compiled"] and not step["static"] and step["reason"]
    assert json.loads((out / "step.json").read_text())["setting"] == "auto"
    assert step["measured"]["eager_step_seconds"] is None and step["measured"]["timed_steps"] == 0  # all warm-up
    held = summary["heldout"]
    if objective == "clm":
        assert held["clm_loss"] > 0 and summary["loss_tokens"] > 0.8 * summary["tokens_seen"]  # every position
    else:
        assert held["mlm_loss"] > 0 and "mlm_loss_paper_masking" in held
        assert ("nsp_accuracy" in held) == nsp
        # the two-segment input's diagnostic (bertbench.model.diagnostics), in percent
        assert ("cross_segment_match" in held) == nsp and 0 <= held.get("cross_segment_match", 0) <= 100
        assert (list(csv.DictReader(open(out / "metrics.csv")))[4]["eval_cross_segment_match"] != "") == nsp
    if "--mask-ratio" in flags:
        assert summary["mask_ratio"] == 0.4 and summary["mask_procedure"] == [100, 0, 0] and summary["whole_word_mask"]
        assert held["mlm_loss"] != held["mlm_loss_paper_masking"]  # the paper's 15% yardstick is measured separately
    rows = list(csv.DictReader(open(out / "metrics.csv")))
    assert [int(r["step"]) for r in rows] == list(range(1, 11))
    assert rows[4]["eval_clm_loss" if objective == "clm" else "eval_mlm_loss"] != ""
    # the NSP head exists, is trained and logs its loss only when the objective trains NSP
    assert (rows[-1]["train_nsp_loss"] != "") == nsp
    assert (rows[4]["eval_mlm_loss_paper_masking"] != "") == (objective != "clm")
    import bertbench

    ck = bertbench.load_checkpoint(out / "checkpoint")
    assert ck.config.causal == (objective == "clm")
    assert ck.model.has_nsp == nsp and any(k.startswith("nsp.") for k in ck.model.state_dict()) == nsp
    assert ck.summary.steps == 10 and ck.summary.to_json() == summary  # results.read_summary gives the file back
    assert absolute_paths(summary) == [] and absolute_paths(json.loads((out / "checkpoint" / "summary.json").read_text())) == []
    assert summary["run_dir"] == Path(*out.parts[-2:]).as_posix() and "/" not in summary["data"]["cache"]


def test_resume_ends_where_an_uninterrupted_run_ends(tmp_path, corpus, monkeypatch):
    straight, split = tmp_path / "straight", tmp_path / "split"
    common = ["--corpus", str(corpus), "--max-steps", "20", *TINY]
    pretrain([*common, "--out", str(straight)], monkeypatch)
    r = pretrain([*common, "--out", str(split), "--stop-at-step", "10"], monkeypatch)
    assert "stopped at step 10" in r.output
    assert (split / "checkpoints" / "last.ckpt").is_file() and not (split / "summary.json").exists()
    r = runner.invoke(app, ["pretrain", *common, "--out", str(split)])
    assert r.exit_code == 2 and "--resume auto" in r.output  # never silently restarts over a run
    pretrain([*common, "--out", str(split), "--resume", "auto"], monkeypatch)
    a = json.loads((straight / "summary.json").read_text())
    b = json.loads((split / "summary.json").read_text())
    assert a["final_train_loss"] == b["final_train_loss"]
    assert a["tokens_seen"] == b["tokens_seen"]
    assert a["heldout"] == b["heldout"]
    rows_a = list(csv.DictReader(open(straight / "metrics.csv")))
    rows_b = list(csv.DictReader(open(split / "metrics.csv")))
    assert [r["train_loss"] for r in rows_a] == [r["train_loss"] for r in rows_b]


def test_snapshots_for_figure5_are_loadable_points_of_the_run(tmp_path, corpus, monkeypatch):
    """--set snapshots=3 over 12 steps keeps snapshots/step-4 and step-8: loadable checkpoints whose summaries name
    the run and the tokens seen then (what fine-tuning copies into its records), with the weights of that step.
    A run stopped at step 5 and resumed writes the same step-8 snapshot as the straight run."""
    import bertbench
    from bertbench.training.finetune_run import resolve_model_source

    common = ["--corpus", str(corpus), "--max-steps", "12", *TINY, "--set", "snapshots=3"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    pretrain([*common, "--out", str(straight)], monkeypatch)
    assert sorted(p.name for p in (straight / "snapshots").iterdir()) == ["step-4", "step-8"]
    final = json.loads((straight / "summary.json").read_text())
    rows = {int(r["step"]): int(r["tokens"]) for r in csv.DictReader(open(straight / "metrics.csv"))}
    for step in (4, 8):
        source = resolve_model_source(str(straight / "snapshots" / f"step-{step}"), None, tmp_path)
        pre = source.pretraining
        assert pre["steps"] == step and pre["tokens_seen"] == rows[step] and pre["run_dir"] == final["run_dir"]
        assert pre["objective"] == final["objective"] and pre["data_fingerprint"] == final["data_fingerprint"]
    assert rows[4] < rows[8] < final["tokens_seen"]
    pretrain([*common, "--out", str(split), "--stop-at-step", "5"], monkeypatch)
    pretrain([*common, "--out", str(split), "--resume", "auto"], monkeypatch)
    a = bertbench.load_checkpoint(straight / "snapshots" / "step-8").model.state_dict()
    b = bertbench.load_checkpoint(split / "snapshots" / "step-8").model.state_dict()
    c = bertbench.load_checkpoint(straight / "snapshots" / "step-4").model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)  # the resumed run's snapshot is the straight run's
    assert not all(torch.equal(a[k], c[k]) for k in a)  # and step 4's weights are not step 8's


@pytest.mark.parametrize("sets, message", [(["snapshots=-1"], "snapshots"),
                                           (["snapshots=3", "budget_minutes=1"], "need max_steps")])
def test_bad_snapshots_are_one_line(tmp_path, corpus, monkeypatch, sets, message):
    monkeypatch.setenv("BERTBENCH_PROGRESS", "0")
    r = runner.invoke(app, ["pretrain", "--corpus", str(corpus), *TINY, "--out", str(tmp_path / "r"),
                            *[x for kv in sets for x in ("--set", kv)]])
    assert r.exit_code == 2 and message in r.output, r.output


def test_tiny_model_overfits_tiny_corpus(tmp_path):
    """Data → masking collator → model learns: > 90% MLM accuracy on the instances it trained on."""
    from bertbench.config import DataConfig, ModelConfig
    from bertbench.data.instances import build_pretraining_data
    from bertbench.data.masking import make_collator
    from bertbench.model.bert import BertForPreTraining
    from bertbench.model.tokenizer import WordPieceTokenizer

    docs = write_corpus(tmp_path / "docs", n_docs=6, seed=3)
    tok = WordPieceTokenizer.train((p.read_text() for p in sorted(docs.glob("*.txt"))), vocab_size=120)
    cfg = DataConfig(corpus=[str(docs)], max_seq_len=32, seed=1)
    data = build_pretraining_data(cfg, tok, "mlm", seed=1, cache_dir=tmp_path / "cache")
    instances = [data.train[i] for i in range(min(16, len(data.train)))]
    collate = make_collator(cfg, tok, "mlm", seed=1)
    torch.manual_seed(0)
    model = BertForPreTraining(ModelConfig(vocab_size=tok.vocab_size, hidden_size=64, num_layers=2, num_heads=2,
                                           intermediate_size=128, dropout=0.0, attention_dropout=0.0), nsp=False)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(250):
        collate.set_epoch(step % 4)  # four fixed maskings of the same instances
        b = collate(instances)
        loss = model(b["input_ids"], b["token_type_ids"], b["attention_mask"], lm_labels=b["lm_labels"],
                     lm_positions=b["lm_positions"]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for e in range(4):
            collate.set_epoch(e)
            b = collate(instances)
            out = model(b["input_ids"], b["token_type_ids"], b["attention_mask"], lm_labels=b["lm_labels"],
                        lm_positions=b["lm_positions"])
            correct += (out.lm_logits.argmax(-1) == out.lm_targets).sum().item()
            total += out.lm_targets.numel()
    assert total > 100
    assert correct / total > 0.9, correct / total


def test_bad_corpus_is_a_clear_error(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.txt").write_text("")
    r = runner.invoke(app, ["pretrain", "--corpus", str(empty), "--max-steps", "2", "--out", str(tmp_path / "o"), *TINY])
    assert r.exit_code == 2 and str(empty) in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["pretrain", "--corpus", str(tmp_path / "missing"), "--out", str(tmp_path / "o2"), *TINY])
    assert r.exit_code == 2 and "missing" in r.output
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.txt").write_bytes(b"caf\xe9 latin-1 text\n")
    r = runner.invoke(app, ["pretrain", "--corpus", str(bad), "--out", str(tmp_path / "o3"), *TINY])
    assert r.exit_code == 2 and "x.txt" in r.output
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model_size: tiny\noptim:\n  weight_decy: 0.1\n")
    r = runner.invoke(app, ["pretrain", "--recipe", str(recipe), "--corpus", str(bad), "--out", str(tmp_path / "o4")])
    assert r.exit_code == 2 and "weight_decy" in r.output and "did you mean 'weight_decay'" in r.output


def test_two_phase_schedule_switches_sequence_length(tmp_path, corpus, monkeypatch):
    """phases: seq 32 for the first half of the steps, then 64 (the paper's 128 → 512, scaled down)."""
    recipe = tmp_path / "phases.yaml"
    recipe.write_text(
        "model_size: tiny\ntokenizer_vocab_size: 200\nbatch_size: 4\nprecision: '32'\nlog_every: 1\neval_every: 0\n"
        "checkpoint_every: 0\nphases:\n  - {fraction: 0.5, max_seq_len: 32}\n  - {fraction: 0.5, max_seq_len: 64}\n"
        "data:\n  max_seq_len: 32\n"
    )
    out = tmp_path / "run"
    pretrain(["--recipe", str(recipe), "--corpus", str(corpus), "--max-steps", "6", "--out", str(out)], monkeypatch)
    rows = list(csv.DictReader(open(out / "metrics.csv")))
    per_step = [int(b["tokens"]) - int(a["tokens"]) for a, b in zip(rows, rows[1:])]
    assert max(per_step[:2]) <= 4 * 32 < max(per_step[3:]) <= 4 * 64  # longer sequences in the second phase
    import bertbench

    assert bertbench.load_checkpoint(out / "checkpoint").config.max_position_embeddings >= 64


@pytest.mark.parametrize("fused", [True, False])
def test_module_clips_gradients_when_its_optimizer_is_fused(fused):
    """Lightning refuses to clip for a fused optimizer, so the module does it (and only then)."""
    from bertbench.config import ModelConfig, OptimConfig
    from bertbench.model.bert import BertForPreTraining
    from bertbench.training.pretrain_module import PretrainModule

    model = BertForPreTraining(ModelConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32))
    module = PretrainModule(model, OptimConfig(grad_clip=1.0), max_steps=10, fused_optimizer=fused)
    for p in model.parameters():
        p.grad = torch.full_like(p, 3.0)
    before = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
    opt = module.configure_optimizers()["optimizer"]
    assert bool(opt.defaults.get("fused")) == fused
    module.on_before_optimizer_step(opt)
    after = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
    if fused:
        assert after == pytest.approx(1.0, rel=1e-4)
    else:
        assert after == before  # the Trainer's gradient_clip_val clips in this configuration


def _lr_trace(run):
    rows = list(csv.DictReader(open(run / "lr_schedule.csv")))
    return [(int(r["step"]), float(r["training_seconds"]), float(r["lr"])) for r in rows]


@pytest.mark.parametrize("slow_down", [False, True])
def test_wall_clock_schedule_ends_at_lr_zero_when_the_budget_ends(tmp_path, corpus, monkeypatch, slow_down):
    """A budget of a few seconds: warm-up then decay on the clock, the last step's lr within one step's
    decay of 0, and the run over within one step of the budget — also when steps get 4x slower mid-run."""
    import time as time_mod

    from bertbench.training.pretrain_module import PretrainModule, linear_warmup_decay

    budget_s, lr, slack_s = 8.0, 1e-3, 0.15
    # (the assertions compare each step with its own clock readings, so a loaded machine only slows them)
    if slow_down:
        original = PretrainModule.training_step

        def slowed(self, batch, batch_idx):
            if self.training_seconds() > budget_s / 2:
                time_mod.sleep(0.15)
            return original(self, batch, batch_idx)

        monkeypatch.setattr(PretrainModule, "training_step", slowed)
    out = tmp_path / "run"
    pretrain(["--corpus", str(corpus), *TINY, "--out", str(out), "--max-steps", "1000000", "--lr", str(lr),
              "--budget-minutes", str(budget_s / 60), "--set", "optim.warmup_fraction=0.2"], monkeypatch)
    trace = _lr_trace(out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == len(trace) >= 2  # the budget ended the run, long before the step cap
    assert [s for s, _, _ in trace] == list(range(1, len(trace) + 1))
    sched = summary["schedule"]
    assert sched["kind"] == "wall-clock" and sched["budget_seconds"] == pytest.approx(budget_s)
    end = sched["training_seconds"]
    durations = [b - a for (_, a, _), (_, b, _) in zip(trace, trace[1:])] + [end - trace[-1][1]]
    warmup_s, decay_s = 0.2 * budget_s, 0.8 * budget_s
    # every step ran at the schedule's lr for the clock reading when it started; the scheduler reads the
    # clock when the step before it ends, a few ms earlier (slack for a loaded machine)
    for step, t, step_lr in trace:
        assert abs(step_lr - lr * linear_warmup_decay(t / budget_s, 0.2)) <= lr * slack_s / warmup_s, (step, t, step_lr)
    assert any(t < warmup_s for _, t, _ in trace) and any(t > warmup_s for _, t, _ in trace)
    # the last step began before the budget's end (the stop check runs when a step ends; fetching the next
    # batch lies between, a few ms) and ended after it: its lr is within one step of 0
    assert trace[-1][1] < budget_s + slack_s and budget_s <= end
    assert trace[-2][1] < budget_s  # and no step before it ran past the budget
    with open(out / "metrics.csv", newline="") as fh:  # the log has a row for the step the budget ended
        assert int(list(csv.DictReader(fh))[-1]["step"]) == summary["steps"]
    assert trace[-1][2] <= lr * (durations[-1] + slack_s) / decay_s, (trace[-1], durations[-1])
    if slow_down:  # the steps of the second half really were slowed, and the schedule still ended on time
        late = [d for (_, t, _), d in zip(trace, durations) if t > budget_s / 2 + slack_s]
        assert late and min(late) >= 0.15  # each holds its 0.15 s sleep, however loaded the machine


def test_max_steps_ends_a_recipe_run_that_has_a_budget(tmp_path, corpus, monkeypatch):
    """A budget and a step cap both apply: whichever is reached first ends the run (issue 25, item 3), and
    the start-up line says so. Here the cap: 3 steps take far less than the recipe's 5 minutes."""
    recipe = tmp_path / "budget.yaml"
    recipe.write_text("budget_minutes: 5\nmax_steps: 1000000\n")
    out = tmp_path / "run"
    monkeypatch.setenv("BERTBENCH_PROGRESS_SECONDS", "1000")  # progress on (the start-up line), no step lines
    r = runner.invoke(app, ["pretrain", "--recipe", str(recipe), "--corpus", str(corpus), *TINY, "--out", str(out),
                            "--max-steps", "3"])
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["schedule"]["kind"] == "wall-clock"
    assert summary["schedule"]["training_seconds"] < 5 * 60
    assert "ends after 5 min of training or at step 3, whichever comes first" in r.output


@pytest.mark.parametrize("value", ["0", "-1"])
def test_budget_must_be_positive(tmp_path, corpus, monkeypatch, value):
    monkeypatch.setenv("BERTBENCH_PROGRESS", "0")
    r = runner.invoke(app, ["pretrain", "--corpus", str(corpus), *TINY, "--out", str(tmp_path / "r"), "--budget-minutes", value])
    assert r.exit_code == 2 and "budget_minutes" in r.output and "positive" in r.output
    assert not (tmp_path / "r").exists()


def test_phases_under_a_budget_switch_on_the_clock(tmp_path, corpus, monkeypatch):
    """seq 16 for the first half of the minutes, then 32: the switch step is recorded, and the phases'
    batches really differ (16-token rows before it, up to 32 after)."""
    from bertbench.training.batches import PhasedBatches

    seen = []
    original = PhasedBatches.__getitem__

    def spy(self, micro_step):
        batch = original(self, micro_step)
        seen.append((micro_step, batch["input_ids"].shape[1]))
        return batch

    monkeypatch.setattr(PhasedBatches, "__getitem__", spy)
    recipe = tmp_path / "phased.yaml"
    recipe.write_text("phases:\n  - {fraction: 0.5, max_seq_len: 16}\n  - {fraction: 0.5, max_seq_len: 32}\n")
    out = tmp_path / "run"
    pretrain(["--recipe", str(recipe), "--corpus", str(corpus), *TINY, "--out", str(out), "--budget-minutes", "0.08"],
             monkeypatch)
    summary = json.loads((out / "summary.json").read_text())
    starts = summary["schedule"]["phase_starts"]
    assert starts[0] == 0 and 0 < starts[1] < summary["steps"]
    trace = _lr_trace(out)  # trace[i]: 0-based step i, (step i + 1, training seconds at its start, lr)
    first_after = next(i for i, (_, t, _) in enumerate(trace) if t >= 0.5 * 0.08 * 60)
    # the switch came once the clock passed half the budget, within the batches the loader had fetched ahead
    assert first_after <= starts[1] <= first_after + 2, (first_after, starts)
    assert max(width for step, width in seen if step < starts[1]) <= 16
    assert max(width for step, width in seen if step >= starts[1]) > 16


def test_phased_batches_start_a_clock_phase_at_the_first_unfetched_step():
    from bertbench.training.batches import PhasedBatches

    b = PhasedBatches([0, None], [["a"] * 100, ["b"] * 100], grad_accum=1)
    assert [b[i] for i in range(3)] == ["a", "a", "a"]
    assert b.begin_next() == 3 and b.starts == [0, 3]
    assert [b[i] for i in range(3, 5)] == ["b", "b"]
    assert b.begin_next() is None
    resumed = PhasedBatches([0, None], [["a"] * 100, ["b"] * 100], grad_accum=1)
    resumed.starts = [0, 3]  # restored from the checkpoint: the same switch, whatever the clock says now
    assert [resumed[i] for i in range(2, 5)] == ["a", "b", "b"]


def test_a_no_nsp_run_from_before_the_frozen_pooler_resumes(tmp_path, corpus, monkeypatch):
    """A run without NSP whose last.ckpt was written while its pooler was still trainable (its AdamW groups
    number the pooler, which never had a gradient) resumes under the frozen pooler and ends exactly where a run
    of today's code ends: the pooler's entries leave the optimiser state, the weights stay."""
    import bertbench.training.pretrain_module as pretrain_module

    common = ["--corpus", str(corpus), "--max-steps", "10", *TINY, "--objective", "clm"]
    straight, old = tmp_path / "straight", tmp_path / "old"
    pretrain([*common, "--out", str(straight)], monkeypatch)
    with monkeypatch.context() as m:  # the trainer before: nothing frozen
        m.setattr(pretrain_module, "freeze_unread", lambda model: model)
        pretrain([*common, "--out", str(old), "--stop-at-step", "5"], monkeypatch)
    def optimised(run) -> int:
        ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
        return sum(len(g["params"]) for g in ckpt["optimizer_states"][0]["param_groups"])

    assert optimised(old) == optimised(straight) + 2  # the pooler's weight and bias counted in
    pretrain([*common, "--out", str(old), "--resume", "auto"], monkeypatch)
    rows_a = list(csv.DictReader(open(straight / "metrics.csv")))
    rows_b = list(csv.DictReader(open(old / "metrics.csv")))
    assert [r["train_loss"] for r in rows_a] == [r["train_loss"] for r in rows_b]
    a = json.loads((straight / "summary.json").read_text())
    b = json.loads((old / "summary.json").read_text())
    assert a["heldout"] == b["heldout"]
