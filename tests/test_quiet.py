"""A quiet terminal: a pre-training (fresh and resumed) and a fine-tuning print bertbench's own lines only,
checked against an allow-list of their shapes (`foreign_lines`; test_run_preset checks `run --preset smoke`'s
lines with it, in this process and in spawned workers, on the smoke runs it makes anyway); --verbose shows the
libraries' notices again; progress comes as plain lines at a steady cadence when the output is not a terminal."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bertbench.training.finetune_run import DEGENERATE_TEXT
from tests.test_pretrain import write_corpus

FIXTURE_DATA = Path(__file__).parent / "fixtures" / "tasks" / "data"
_RUN = r"\S+ seed \d+ lr \S+"  # a fine-tuning run: 'rte seed 1 lr 5e-5'
_ETA = r"(, ETA [\d.]+ (s|min|h))?"
# Every line bertbench prints in these runs, as a pattern matched against the whole line; a line that
# matches none (a library's banner, warning, progress bar or empty line) fails the tests.
OURS = tuple(re.compile(p) for p in (
    rf"pretrain step \d+(/\d+)? \(\d+%\)(, [\d,]+ tok/s)?{_ETA}",  # progress off a terminal
    r"done: \d+ steps, [\d,]+ tokens in \d+ s \(\d+ tok/s\); held-out: .+",
    r"checkpoint: \S+",
    r"stopped at step \d+; continue with --resume auto",
    r"resuming \S+ from its checkpoint of step \d+",
    rf"{_RUN}: step \d+/\d+ \(\d+%\){_ETA}",  # fine-tuning progress
    rf"{_RUN}: \w+ -?[\d.]+ \(\d+ s\)(  \[degenerate: ({'|'.join(map(re.escape, DEGENERATE_TEXT.values()))})\])?",
    r"\S+: done in \d+ s \(lr \S+( selected on .+)?\)",
    r"\d+ result records in \S+",
    r"\[[\w -]+\] (started|\d+ s|done before: \S+)",  # run --preset's stages ('finetune mlm_nsp step-4 rte')
    r"\d+ stages at a time, \d+ thread\(s\) each(, always)?(, each worker on one of devices [\w,]+)?",
    r"\[[\w -]+\] started on device \w+",  # with several devices (run --devices)
    r"wrote (plots to )?\S+( and \S+)?",
    r"stage times: .+",
    r"tokenising the corpus \(first run; cached in \S+\)",  # the data path's progress (bertbench.data)
    rf"tokenising the corpus: \d+ files, [\d,]+ of [\d,]+ MB \(\d+%\), [\d.]+ MB/s{_ETA}",
    r"tokenising the corpus: \d+ files and hub rows, [\d,]+ MB so far, [\d.]+ MB/s",  # a hub stream's size is unknown
    rf"building (train|heldout) instances: [\d,]+/[\d,]+ documents \(\d+%\){_ETA}",
    r"pretrain: \S+ \S+ → \S+; ends .+",  # the start-up line: what is trained, where, and what ends it
    r"study: every pre-training with compile auto takes the (compiled|eager) step \(.+\)",  # said once a study
    # heartbeats of the steps before training and of held-out evaluation
    r"pretrain: (training the tokenizer|preparing the data \(corpus tokenisation, instances\)|held-out evaluation): "
    r"(.+, )?[\d.]+ (s|min|h)",
))
# What the libraries printed before (each was seen here): the deny-list behind the allow-list.
NOISE = ("GPU available", "TPU available", "Automatic Mixed Precision", "litlogger", "LeafSpec", "weights_only",
         "max_epochs", "Warning", "warn(", "Epoch 0/")


def _bertbench(args, env_extra=None, progress=False, timeout=300):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"} | (env_extra or {})
    # progress on: a line at every step (the cadence is tested below); off: no progress lines at all
    env |= {"BERTBENCH_PROGRESS_SECONDS": "0"} if progress else {"BERTBENCH_PROGRESS": "0"}
    return subprocess.run([sys.executable, "-m", "bertbench.cli", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def foreign_lines(output: str, ours_block: list[str] = ()) -> list[str]:
    """Lines that are not bertbench's: `ours_block` (a table, as bertbench renders it) is taken out where it
    stands, whole; each other line must match one of OURS."""
    lines = output.splitlines()
    block = [line.rstrip() for line in ours_block]
    stripped = [line.rstrip() for line in lines]
    if block:
        starts = [i for i in range(len(stripped)) if stripped[i:i + len(block)] == block]
        assert starts, "the results table is not in the output as bertbench renders it"
        del lines[starts[0]:starts[0] + len(block)]
    return [line for line in lines if not any(p.fullmatch(line) for p in OURS)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("quiet") / "docs", n_docs=10)


PT = ["pretrain", "--model-size", "tiny", "--vocab-size", "150", "--max-seq-len", "32", "--batch-size", "4",
      "--max-steps", "4", "--checkpoint-every", "2", "--eval-every", "2", "--precision", "bf16-mixed"]


@pytest.mark.slow
def test_pretraining_and_its_resume_print_no_library_lines(tmp_path, corpus):
    out = tmp_path / "run"
    first = _bertbench([*PT, "--corpus", str(corpus), "--out", str(out), "--stop-at-step", "2"])
    assert first.returncode == 0, first.stderr
    resumed = _bertbench([*PT, "--corpus", str(corpus), "--out", str(out), "--resume", "auto"])
    assert resumed.returncode == 0, resumed.stderr
    for r in (first, resumed):
        assert not foreign_lines(r.stderr + r.stdout)
        assert not [ln for ln in (r.stderr + r.stdout).splitlines() if any(n in ln for n in NOISE)]


@pytest.mark.slow
def test_pretraining_and_finetuning_with_progress_print_our_lines_only(tmp_path, corpus):
    """Output redirected, as in `make demo > log`: progress comes as our own lines, one per step here."""
    out = tmp_path / "run"
    pre = _bertbench([*PT, "--corpus", str(corpus), "--out", str(out)], progress=True)
    assert pre.returncode == 0, pre.stderr
    assert not foreign_lines(pre.stderr + pre.stdout)
    assert [ln.split(" (")[0] for ln in pre.stdout.splitlines() if ln.startswith("pretrain step")] == [
        f"pretrain step {s}/4" for s in range(1, 5)]
    ft = _bertbench(["finetune", "--model", str(out), "--tasks", "rte,conll2003", "--data-dir", str(FIXTURE_DATA),
                     "--max-steps", "3", "--seeds", "1", "--out", str(tmp_path / "ft"), "--precision", "32"],
                    progress=True)
    assert ft.returncode == 0, ft.stderr
    assert not foreign_lines(ft.stderr + ft.stdout)
    # a tiny model: the lr default of its width (training.finetune_settings.SMALL_MODEL_LRS), 3e-4
    assert re.search(r"^rte seed 1 lr 3e-4: step 3/3 \(100%\)$", ft.stdout, re.M), ft.stdout


@pytest.mark.slow
def test_verbose_shows_the_library_notices(tmp_path, corpus):
    r = _bertbench(["--verbose", *PT, "--corpus", str(corpus), "--out", str(tmp_path / "run")])
    assert r.returncode == 0, r.stderr
    assert "GPU available" in r.stderr  # the switch is real: the same run, its notices back
    assert "" not in r.stdout.splitlines()  # but no library progress bar into a log (each left an empty line)


def test_progress_lines_keep_a_steady_cadence():
    from bertbench.runtime.progress import Ticker, progress_line

    now = [0.0]
    ticker = Ticker(30.0, clock=lambda: now[0])
    due = []
    for second in range(1, 121):
        now[0] = float(second)
        due.append(ticker.due())
    assert [s + 1 for s, d in enumerate(due) if d] == [30, 60, 90, 120]
    assert not Ticker(None).due()  # BERTBENCH_PROGRESS=0
    assert progress_line(120, 450, 120 / 450, 60.0, "4,100 tok/s") == "step 120/450 (27%), 4,100 tok/s, ETA 2.8 min"
    assert progress_line(450, 450, 1.0, 200.0) == "step 450/450 (100%)"
    assert progress_line(12, None, 0.5, 600.0) == "step 12 (50%), ETA 10.0 min"  # a wall-clock budget


def test_the_terminal_progress_bar_names_the_run_not_an_epoch_count():
    """Issue 25 item 7: Lightning's bar read 'Epoch 0/-2' (max_epochs -1 for a run counted in steps)."""
    from bertbench.training.lightning_compat import lightning as L
    from bertbench.training.progress_lines import StepProgressBar

    bar = StepProgressBar(leave=True)
    L.Trainer(max_steps=30, max_epochs=-1, callbacks=[bar], logger=False, enable_checkpointing=False)
    assert bar._get_train_description(0) == "pretrain"


_COMPILE_WITH_A_GRAPH_BREAK = """
import sys
from bertbench.runtime.quiet import silence_compiler_notices, silence_library_noise
if sys.argv[1] == "quiet":
    silence_library_noise()
import torch
silence_compiler_notices()
f = torch.compile(lambda x: x + 1 if (x * 2).sum().item() > 0 else x - 1)
f(torch.ones(3))
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["quiet", "verbose"])
def test_compile_graph_breaks_are_shown_with_verbose_only(mode):
    """Issue 25 item 12: `bench ablations --compile` printed 18 lines of torch/_dynamo graph-break warnings."""
    r = subprocess.run([sys.executable, "-c", _COMPILE_WITH_A_GRAPH_BREAK, mode], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert ("Graph break" in r.stderr) == (mode == "verbose"), r.stderr


def test_learning_rates_are_written_one_way():
    """Issue 25 item 14: '5e-05' and '0.0001' in one table."""
    from bertbench.runtime.progress import fmt_lr

    assert [fmt_lr(x) for x in (5e-5, 1e-4, 3e-4, 2.5e-5, 2e-3)] == ["5e-5", "1e-4", "3e-4", "2.5e-5", "2e-3"]
