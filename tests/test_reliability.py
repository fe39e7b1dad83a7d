"""The adversarial suite (tests/reliability_cases.py), in-process: every bad input gives exactly one `error:` line
that names what was wrong, a non-zero exit and no traceback, and leaves earlier outputs byte-identical; the
cases that must work, work. `scripts/reliability_table.py` runs the same cases as subprocesses for the table."""
from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

import reliability_cases as rc
from bertbench.cli import app

runner = CliRunner()


def invoke(argv: list[str]) -> rc.Outcome:
    r = runner.invoke(app, argv)
    crashed = r.exception is not None and not isinstance(r.exception, SystemExit)
    return rc.Outcome(r.exit_code, r.output, crashed or "Traceback (most recent call last)" in r.output)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    from conftest import SHARED_DATA

    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent")
    T = tmp_path_factory.mktemp("reliability")

    def cli(argv):
        o = invoke(argv)
        assert o.rc == 0, o.output

    with pytest.MonkeyPatch.context() as mp:
        for k, v in rc.case_env(T).items():
            mp.setenv(k, v)
        rc.build_scratch(T, SHARED_DATA, cli)
        yield T, SHARED_DATA


@pytest.mark.slow
@pytest.mark.parametrize("case", rc.CASES, ids=[c.id for c in rc.CASES])
def test_case(case: rc.Case, scratch):
    T, data = scratch
    if case.skip_if == "root" and os.geteuid() == 0:
        pytest.skip("root ignores folder permissions (scripts/reliability_table.py drops the capability)")
    if case.skip_if == "cuda":
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is present")
    out = T / "out" / case.id
    rc.run_pre(case, T, data)
    before = rc.snapshot(case, T)
    outcome = invoke(rc.expand(case.argv, T, data, out))
    category, line = rc.judge(case, outcome, T, out, before)
    assert rc.meets(case, category, line), f"{case.id} ({case.what}): {category}: {line}\n{outcome.output[-3000:]}"


def test_judge_can_fail(tmp_path):
    """The judge itself: a traceback, a silent exit 0, two error lines, a changed file and a missing needle are
    each caught (a suite that always passed would prove nothing)."""
    case = rc.Case("x", "x", (), needle="needle", intact=("f",))

    def verdict(outcome, T, change=False):
        (T / "f").write_text("a")
        before = rc.snapshot(case, T)
        if change:
            (T / "f").write_text("b")
        category, line = rc.judge(case, outcome, T, T, before)
        return category, rc.meets(case, category, line)

    T = tmp_path
    assert verdict(rc.Outcome(2, "error: the needle is here", False), T) == ("CLEAR", True)
    assert verdict(rc.Outcome(2, "error: something else", False), T) == ("CLEAR", False)
    assert verdict(rc.Outcome(1, "Traceback ...\nValueError", True), T)[1] is False
    assert verdict(rc.Outcome(0, "done", False), T) == ("SILENT-WRONG", False)
    assert verdict(rc.Outcome(2, "error: needle\nerror: needle", False), T) == ("UNCLEAR", False)
    assert verdict(rc.Outcome(2, "error: needle", False), T, change=True) == ("DATA-LOSS", False)
    assert verdict(rc.Outcome(124, "", False, timed_out=True), T) == ("HANG", False)


def test_full_disk_keeps_the_last_good_checkpoint(tmp_path):
    """F8: a checkpoint write that fails (ENOSPC) is one line, the previous last.ckpt stays and no temp file is left.
    F9: `bertbench report` over an earlier report when the file system refuses the write (a real kernel refusal:
    RLIMIT_FSIZE makes every write beyond 64 bytes fail) is one line and the earlier report is byte-identical."""
    import errno
    import resource
    import signal
    import subprocess
    import sys

    from bertbench.errors import BertbenchError
    from bertbench.training.callbacks import save_lightning_checkpoint
    from conftest import FIXTURES, ROOT

    class FullDisk:
        global_step, is_global_zero = 7, True

        def save_checkpoint(self, path, weights_only=False):
            with open(path, "wb") as fh:
                fh.write(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")

    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"the good one")
    with pytest.raises(BertbenchError, match="step 7 .*No space left on device.*--resume auto"):
        save_lightning_checkpoint(FullDisk(), tmp_path)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["last.ckpt"]
    assert (tmp_path / "checkpoints" / "last.ckpt").read_bytes() == b"the good one"

    records = FIXTURES / "records" / "main" / "mini-mlm-nsp"
    report = tmp_path / "report.md"
    assert invoke(["report", str(records), "--out", str(report), "--index"]).rc == 0  # the folder's index too
    earlier = report.read_bytes()

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    r = subprocess.run([sys.executable, "-m", "bertbench.cli", "report", str(records), "--out", str(report), "--index"],
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                       preexec_fn=small_files, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and [line for line in r.stderr.splitlines() if line.startswith("error:")] == [
        f"error: {report}: cannot write (File too large); any earlier file is unchanged"], r.stderr
    assert report.read_bytes() == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "checkpoints", "report.md"]  # no temp file
