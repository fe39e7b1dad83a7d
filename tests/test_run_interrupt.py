"""Interrupting `bertbench run`: the running pre-training checkpoints at the step it is in, the one line names
the command that continues, and that command resumes from the interrupt step."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.studies.preset import list_presets

ROOT = Path(__file__).resolve().parent.parent


def tiny_preset(tmp_path: Path, name: str = "tiny-study", **pretrain) -> Path:
    """The smoke preset cut to one pre-training and one fine-tuning of a few steps: the least that is a study."""
    raw = yaml.safe_load(list_presets()["smoke"].read_text())
    raw["name"] = name
    raw["pretrain"] |= {"max_steps": 8, "eval_every": 100, "checkpoint_every": 100, "snapshots": 0, "batch_size": 8,
                        "log_every": 100, **pretrain}
    raw["variants"] = [{"name": "mlm_nsp"}]
    raw["finetune"] = {k: v for k, v in raw["finetune"].items() if not k.startswith("figure5")} | {
        "tasks": ["rte"], "max_steps": 2, "max_train_examples": 16, "max_eval_examples": 16}
    preset = tmp_path / f"{name}.yaml"
    preset.write_text(yaml.safe_dump(raw))
    return preset


@pytest.mark.integration
@pytest.mark.slow
def test_ctrl_c_checkpoints_the_running_pretraining_and_the_same_command_resumes_it(shared_data, tmp_path, capfd,
                                                                                   monkeypatch):
    """Ctrl-C as a terminal sends it (SIGINT to every process of the foreground group) at step 3 of a
    pre-training that runs in a worker (2 workers) and keeps no periodic checkpoint: it checkpoints at its step,
    the one line names that step and the `run` command (no `--resume auto`, which `run` lacks), exit 130; the same
    command then resumes from that step. Before, the worker got the terminal's SIGINT and then the scheduler's
    SIGTERM, took the second signal for "stop now" and kept nothing: the rerun started over."""
    out = tmp_path / "study"
    argv = ["run", "--preset", str(tiny_preset(tmp_path)), "--data-dir", str(shared_data), "--out", str(out),
            "--no-plots", "--workers", "2"]
    r = subprocess.run([sys.executable, "-m", "bertbench.cli", *argv], capture_output=True, text=True, timeout=600,
                       start_new_session=True,  # its own group, as a terminal's: the fault signals that group
                       env=dict(os.environ, PYTHONPATH=str(ROOT), BERTBENCH_PROGRESS="0", BERTBENCH_FAULT="after_step:3",
                                BERTBENCH_FAULT_SIGNAL="INT", BERTBENCH_FAULT_TO="session"))
    assert r.returncode == 130, r.stdout[-2000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stderr and "--resume" not in r.stderr, r.stderr[-3000:]
    line = re.fullmatch(r"error: interrupted by SIGINT; pretrain mlm_nsp: checkpoint written at step (\d+); finished "
                        r"stages are kept — rerun the same command to continue: bertbench run --preset \S+ --data-dir "
                        r"\S+ --out \S+ --no-plots --workers 2\n", r.stderr)
    assert line, r.stderr[-3000:]
    step = int(line.group(1))
    assert 3 <= step < 8  # the step it was in (or the next), not a periodic checkpoint (there is none)
    assert not list(out.rglob("*.record.json"))
    # the same command, stopped (to keep the test short) as its fine-tuning starts: by then the pre-training has
    # resumed from the interrupt step and finished
    monkeypatch.setenv("BERTBENCH_FAULT", "finetune:rte")
    capfd.readouterr()
    resumed = CliRunner().invoke(app, argv)
    said = resumed.output + capfd.readouterr().out  # the worker's lines reach the terminal, not the CLI's echo
    assert resumed.exit_code == 2 and "finetune mlm_nsp rte died (SIGKILL)" in resumed.output, said
    assert f"from its checkpoint of step {step}" in said, said
    assert json.loads(next(out.glob("pretrain/mlm_nsp-*/summary.json")).read_text())["steps"] == 8


def test_sigterm_to_a_study_ends_its_worker_stages_with_one_line(tmp_path):
    """SIGTERM (a `kill`, a pre-emption) to the scheduler while a stage runs in a worker: the worker gets it
    once, the study ends with one line naming the stage that starts over, exit 143, no traceback."""
    from bertbench.studies.scheduler import Stage, StudyInterrupted, run_stages

    marker = tmp_path / "started"
    stages = [Stage("finetune x rte", _sleep_after_touch, (str(marker),)), Stage("b", _sleep_after_touch, (str(tmp_path / "b"),))]
    import threading

    def kill_when_started() -> None:
        import time

        while not marker.exists():
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=kill_when_started, daemon=True).start()
    with pytest.raises(StudyInterrupted) as err:
        run_stages(stages, 2, lambda message: None, {})
    assert err.value.exit_code == 143
    assert str(err.value).startswith("interrupted by SIGTERM; finetune x rte, b start over; finished stages are kept")


def _sleep_after_touch(path: str) -> None:
    import time

    Path(path).touch()
    time.sleep(60)


def test_a_terminals_ctrl_c_reaches_a_busy_worker_once(tmp_path):
    """Ctrl-C at a terminal signals its whole foreground group. The workers sit in groups of their own and the
    scheduler passes the signal on once: a pre-training reads a second signal as "stop now, no checkpoint", and
    a worker that got the terminal's SIGINT and then the scheduler's lost its step whenever its step outlasted
    the scheduler's reaction (cpu-hour's did). Here the stage notes every signal for 1.5 s after the first, and
    its process group: two signals that arrive at once are one to Python, so the group is what says that the
    terminal's reaches the study only, whatever the timing."""
    notes = tmp_path / "signals"
    script = tmp_path / "study.py"
    script.write_text(
        "import sys\n"
        f"sys.path[:0] = [{str(ROOT)!r}, {str(Path(__file__).parent)!r}]\n"
        "from bertbench.studies.scheduler import Stage, StudyInterrupted, run_stages\n"
        "from test_run_interrupt import _note_signals\n"
        "if __name__ == '__main__':\n"
        "    import os\n"
        "    print('group', os.getpgrp(), flush=True)\n"
        "    try:\n"
        f"        run_stages([Stage('pretrain x', _note_signals, ({str(notes)!r},))], 2, print, {{}})\n"
        "    except StudyInterrupted as err:\n"
        "        print(err)\n"
        "        sys.exit(err.exit_code)\n")
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True, stdout=subprocess.PIPE, text=True)
    import time

    deadline = time.monotonic() + 120
    while not Path(f"{notes}.started").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C: every process of the foreground group
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    signals, group = notes.read_text().split()
    assert signals == "SIGINT"  # once, not once from the terminal and once from the scheduler
    assert group != re.search(r"^group (\d+)$", out, re.M).group(1)  # not the terminal's: the study's own
    assert "interrupted by SIGINT" in out


def _note_signals(path: str) -> None:
    import time

    got: list[int] = []
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda signum, frame: got.append(signum))
    Path(f"{path}.started").touch()
    while not got:
        time.sleep(0.01)
    time.sleep(1.5)  # the step it is in, then its checkpoint: a second signal would arrive meanwhile
    Path(path).write_text(",".join(signal.Signals(s).name for s in got) + f" {os.getpgrp()}")
