"""The GPU check's performance call (`bertbench bench gpu`, `scripts/gpu_check.sh perf`) on a CPU: its dry run
passes with what a bare GPU machine has (no `datasets`), a kill leaves every finished side's line whole, a side
over its budget or without time leaves a line saying so, and the committed table is the render of the committed
record."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from bertbench.benchmarks import gpu_check
from bertbench.cli import app
from bertbench.errors import BertbenchError
from tests.conftest import ROOT

# What a bare GPU machine lacks (the device's KINDS.md): in the subprocesses below they cannot be imported, as there.
ABSENT = ("datasets", "seqeval", "dill", "multiprocess")
SIDES = ["transformers_bf16", "bertbench_bf16", "bertbench_bf16_compiled", "bertbench_bf16_lightning",
         "transformers_bf16_compiled", "bertbench_bf16_batch2"]
# every key a measured side's line holds (what the table and the questions read)
MEASURED = {"side", "status", "batch_size", "seq_len", "steps", "step_ms", "tokens_per_s", "mfu_executed", "mfu_model",
            "flops_per_token_executed", "flops_per_token_model", "host_syncs", "host_syncs_per_step", "sync_counter",
            "attention", "first_step_s", "loss_first", "loss_last", "device", "torch", "peak_bf16_gflops", "code"}
RECORD = "leaderboards/bench/gpu-check.jsonl"  # the committed GPU run, rendered into docs/performance-gpu.md


def bare_machine_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a subprocess in which ABSENT cannot be imported (None in sys.modules: `import datasets`
    raises ModuleNotFoundError and importlib.util.find_spec says it is not there, as where it is not installed)."""
    site = tmp_path / "bare-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in ABSENT), encoding="utf-8")
    return {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "BERTBENCH_PROGRESS": "0", "PYTHON": sys.executable}


def test_the_dry_run_of_the_perf_call_passes_without_datasets(tmp_path):
    """`scripts/gpu_check.sh perf OUT --dry-run`, as CI can run it: every side measured, its line complete, the
    table rendered; in a Python where `datasets` (and the rest of ABSENT) cannot be imported."""
    env = bare_machine_env(tmp_path)
    probe = subprocess.run([sys.executable, "-c", "import datasets"], env=env, capture_output=True, text=True)
    assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr  # the blocker blocks
    out = tmp_path / "out"
    r = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), "perf", str(out), "--dry-run"], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + (out / "perf.log").read_text()
    lines = [json.loads(x) for x in (out / "gpu-perf.jsonl").read_text().splitlines()]
    assert [x["side"] for x in lines] == SIDES
    for x in lines:
        assert x["status"] == "ok" and MEASURED <= set(x), (x["side"], x.get("error"), MEASURED - set(x))
        assert x["dry_run"] and x["steps"] == 3 and x["losses_finite"]
    by = {x["side"]: x for x in lines}
    assert by["bertbench_bf16_compiled"]["compile_s"] >= 0 and "compile_s" not in by["bertbench_bf16"]
    assert by["bertbench_bf16_lightning"]["loop"] == "lightning" and by["bertbench_bf16_batch2"]["batch_size"] == 2
    # ours executes less than the full model (masked-only head), transformers the full model
    assert by["bertbench_bf16"]["flops_per_token_executed"] < by["bertbench_bf16"]["flops_per_token_model"]
    assert by["transformers_bf16"]["flops_per_token_executed"] == by["transformers_bf16"]["flops_per_token_model"]
    # counted on CPU by the dispatch mode: our bare step syncs nowhere; under compile nothing is counted there
    assert by["bertbench_bf16"]["host_syncs"] == 0 and by["bertbench_bf16_compiled"]["host_syncs"] is None
    # attention: our CPU path is plain matmuls; transformers runs SDPA (its math backend on a CPU with a mask)
    assert by["bertbench_bf16"]["attention"] == {gpu_check_explicit(): 0}
    assert set(by["transformers_bf16"]["attention"]) <= {"math", "flash (cpu)"}
    table = (out / "gpu-perf.md").read_text()
    assert all(f"| {side} |" in table for side in SIDES) and "(dry run)" in table
    assert (out / "steps.tsv").read_text().startswith("perf\t0\t")


def gpu_check_explicit() -> str:
    from bertbench.benchmarks.gpu_measure import EXPLICIT

    return EXPLICIT


def test_a_kill_after_the_first_side_leaves_its_line_whole(tmp_path):
    """SIGKILL the moment the second side starts (a device call's time limit, say): the first side's line is
    already in the file, complete, and parses; the render reads the killed run's record."""
    out = tmp_path / "gpu-perf.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "bertbench", "bench", "gpu", "--dry-run", "--out", str(out)],
                            env=bare_machine_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(300, proc.kill)
    watchdog.start()
    seen = []
    try:
        for line in proc.stderr:  # line-buffered: each side's start is said before it runs
            seen.append(line)
            if line.startswith(f"bench gpu: {SIDES[1]} ("):
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL and seen[-1].startswith(f"bench gpu: {SIDES[1]} ("), "".join(seen)[-3000:]
    text = out.read_text()
    assert text.endswith("\n") and len(text.splitlines()) == 1  # the first side's line, whole; nothing after it
    first = json.loads(text)
    assert first["side"] == SIDES[0] and first["status"] == "ok" and MEASURED <= set(first)
    r = CliRunner().invoke(app, ["bench", "gpu", "--render", str(out)])
    assert r.exit_code == 0 and f"| {SIDES[0]} |" in r.output


def test_a_side_without_time_is_skipped_and_one_over_its_budget_says_so(tmp_path, monkeypatch):
    """No time left: every side's line says skipped, and nothing is measured. A side that runs past its budget
    is stopped (SIGALRM) and its line says so; the next side still runs."""
    from bertbench.benchmarks import gpu_sides

    out = tmp_path / "skipped.jsonl"
    lines = gpu_check.run(out, dry_run=True, budget_seconds=0, say=lambda _: None)
    assert [x["status"] for x in lines] == ["skipped"] * len(SIDES)
    assert [json.loads(x)["side"] for x in out.read_text().splitlines()] == SIDES
    assert "s left of 0" in lines[0]["error"]

    def slow(spec, inputs, m):
        if spec.name == SIDES[0]:
            time.sleep(30)  # woken by the alarm
        raise RuntimeError("a failure of its own")

    monkeypatch.setattr(gpu_sides, "run_side", slow)
    monkeypatch.setattr(gpu_check, "sides", lambda shape: [
        gpu_sides.SideSpec(SIDES[0], "transformers", "bare", False, 2, 0.3, 0.1),
        gpu_sides.SideSpec(SIDES[1], "bertbench", "bare", False, 2, 5, 0.1)])
    t0 = time.perf_counter()
    first, second = gpu_check.run(tmp_path / "over.jsonl", dry_run=True, say=lambda _: None)
    assert time.perf_counter() - t0 < 10
    assert first["status"] == "over budget" and first["error"] == "over its budget of 0 s" and first["seconds"] < 5
    assert second["status"] == "failed" and second["error"] == "RuntimeError: a failure of its own"
    with pytest.raises(BertbenchError, match="already holds a run"):
        gpu_check.run(out, dry_run=True, say=lambda _: None)
    if not torch.cuda.is_available():
        with pytest.raises(BertbenchError, match="bench gpu: no CUDA GPU is available here .*--dry-run runs"):
            gpu_check.run(tmp_path / "gpu.jsonl", say=lambda _: None)


def test_a_side_keeps_the_least_time_of_every_later_required_side():
    from bertbench.benchmarks.gpu_sides import SideSpec

    plan = [SideSpec("a", "bertbench", "bare", False, 2, 100, 1), SideSpec("b", "bertbench", "bare", False, 2, 5, 2),
            SideSpec("c", "transformers", "bare", True, 2, 50, 30, optional=True),
            SideSpec("d", "bertbench", "bare", False, 2, 5, 3)]
    assert gpu_check.side_budget(plan, 0, 20) == 15  # b and d keep 2 + 3; the optional c nothing
    assert gpu_check.side_budget(plan, 1, 10) == 5  # its own budget
    assert gpu_check.side_budget(plan, 2, 40) == 37 >= plan[2].min_s  # d's 3 kept back: c runs
    assert gpu_check.side_budget(plan, 2, 32) == 29 < plan[2].min_s  # too little for c: skipped, d keeps its time
    assert gpu_check.side_budget(plan, 3, 2) == 2 < plan[3].min_s


def test_a_record_is_read_line_by_line_and_a_cut_off_last_line_is_left_out(tmp_path):
    good = {"side": "x", "status": "skipped", "batch_size": 2, "error": "none left"}
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(good) + "\n" + '{"side": "y", "sta')  # the last write cut off by a kill
    assert gpu_check.read_lines(path) == [good]
    path.write_text(json.dumps(good) + "\nnot json\n")
    with pytest.raises(BertbenchError, match=r"r\.jsonl:2: not a JSON line of `bench gpu`"):
        gpu_check.read_lines(path)
    path.write_text('{"side": "x"}\n')
    with pytest.raises(BertbenchError, match=r"r\.jsonl:1: expected a `bench gpu` side line"):
        gpu_check.read_lines(path)


def test_the_committed_gpu_table_is_the_render_of_the_committed_record(tmp_path, monkeypatch):
    """docs/performance-gpu.md's block is what `bertbench bench gpu --render RECORD --embed` writes, byte for byte."""
    page = tmp_path / "performance-gpu.md"
    committed = (ROOT / "docs" / "performance-gpu.md").read_text(encoding="utf-8")
    emptied = re.sub(r"(<!-- bertbench bench: begin gpu-check -->\n).*?(<!-- bertbench bench: end gpu-check -->)",
                     r"\1\2", committed, flags=re.S)
    assert emptied != committed
    page.write_text(emptied, encoding="utf-8")
    monkeypatch.chdir(ROOT)
    r = CliRunner().invoke(app, ["bench", "gpu", "--render", RECORD, "--embed", str(page)])
    assert r.exit_code == 0, r.output
    assert page.read_text(encoding="utf-8") == committed


def test_the_table_of_a_record(tmp_path):
    """Every side's row; a side that did not finish says why; the Lightning loop against the bare step."""
    env = {"device": "NVIDIA H100 80GB HBM3", "torch": "2.11", "transformers": "5.17", "lightning": "2.6.6",
           "code": "bertbench 0.1.0 git:abc", "dry_run": False, "model_size": "base", "seq_len": 128, "warmup": 3,
           "steps": 30, "timer": "CUDA events", "peak_bf16_gflops": 989400.0, "peak_source": "H100 datasheet, dense"}
    side = {"status": "ok", "batch_size": 256, "tokens_per_s": 400000.0, "mfu_executed": 0.36, "mfu_model": 0.52,
            "host_syncs": 0, "host_syncs_per_step": [0] * 30, "attention": {"efficient": 12}, "first_step_s": 1.5,
            "loss_first": 11.3, "loss_last": 10.9}
    records = [{**env, **side, "side": "bertbench_bf16", "step_ms": 80.0},
               {**env, **side, "side": "bertbench_bf16_lightning", "step_ms": 84.0, "host_syncs": 8,
                "host_syncs_per_step": [4, 0, 0, 4] + [0] * 26},
               {**env, "side": "transformers_bf16_compiled", "status": "over budget", "batch_size": 256,
                "error": "over its budget of 120 s"}]
    text = gpu_check.markdown(records, "r.jsonl")
    assert "from a run on NVIDIA H100 80GB HBM3, torch 2.11" in text and "MFU against 989400 GFLOP/s" in text
    assert "| bertbench_bf16 | 256 | 80.0 | 400,000 | 36.0% | 52.0% | 0 | efficient ×12 | 1.5 | 11.300 → 10.900 | ok |" in text
    assert "| 8 (2 of 30 steps) |" in text
    assert "| transformers_bf16_compiled | 256 | – | – | – | – | – | – | – | – | over budget: over its budget of 120 s |" in text
    assert text.endswith("84.0 ms vs 80.0 ms (+5.0%).")
    assert "No GPU run is recorded in `r.jsonl` yet" in gpu_check.markdown([], "r.jsonl")


def packed_checkout(tmp_path: Path) -> Path:
    """A checkout as the device sees it: the script, the package, no .git, no ../shared beside it, and a
    `.gpucheck` whose data.tar.xz holds what gpu-quick reads (tiny stand-ins: the dry run validates, reads no text)."""
    co = tmp_path / "machine" / "checkout"
    (co / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "gpu_check.sh", co / "scripts" / "gpu_check.sh")
    for name in ("bertbench", "recipes", "tasks", "tests"):
        (co / name).symlink_to(ROOT / name)
    data = tmp_path / "to-pack"
    for sub in ("corpus/wikipedia", "corpus/gutenberg", "vocab", *(f"glue/{t}" for t in ("RTE", "MRPC", "STS-B", "CoLA", "SST-2"))):
        (data / sub).mkdir(parents=True)
        (data / sub / "stand-in.txt").write_text("x\n")
    (co / ".gpucheck").mkdir()
    subprocess.run(["tar", "-C", str(data), "-cJf", str(co / ".gpucheck" / "data.tar.xz"), "corpus", "vocab", "glue"], check=True)
    return co


def test_the_dry_run_of_the_quick_call_finds_the_data_setup_unpacks(tmp_path):
    """`scripts/gpu_check.sh quick OUT --dry-run` on a fresh machine: BERTBENCH_DATA_DIR unset, no ../shared, no
    .git; the data only in .gpucheck. Setup unpacks it, gpu-quick finds it after, the CUDA tests' part comes before
    gpu-quick, output is unbuffered and the commit passed in is the one logged."""
    co = packed_checkout(tmp_path)
    assert not (co.parent / "shared").exists() and not (co / "shared").exists()
    env = {k: v for k, v in os.environ.items() if k != "BERTBENCH_DATA_DIR"}
    env.update(PYTHON=sys.executable, GPU_CHECK_WORK=str(tmp_path / "work"), GPU_CHECK_PARTS="setup gpu-quick",
               BERTBENCH_COMMIT="abc1234", PYTHONPATH="")
    out = tmp_path / "out"
    r = subprocess.run(["bash", str(co / "scripts" / "gpu_check.sh"), "quick", str(out), "--dry-run"], env=env,
                       capture_output=True, text=True, timeout=300)
    logs = r.stdout + "".join(f"\n--- {p.name}\n" + p.read_text() for p in sorted(out.glob("*.log")))
    assert r.returncode == 0, logs
    rows = [line.split("\t")[:2] for line in (out / "steps.tsv").read_text().splitlines()]
    assert rows == [["setup", "0"], ["cuda-tests", "left out"], ["gpu-quick", "0"]], rows
    quick = (out / "gpu-quick.log").read_text()
    assert f"data: {tmp_path / 'work' / 'data'}" in quick and "preset gpu-quick:" in quick and "valid" in quick
    assert "at commit abc1234;" in (out / "gpu_check.log").read_text()
    assert "unbuffered: True" in (out / "setup.log").read_text()  # a part cut at its limit keeps what it printed


def test_without_git_the_code_version_is_the_commit_passed_in(tmp_path, monkeypatch):
    from bertbench.runtime import provenance

    monkeypatch.setattr(provenance, "_ROOT", tmp_path)  # no .git here nor above (a device's copy)
    monkeypatch.setenv(provenance.COMMIT_VARIABLE, "abc1234")
    provenance.code_version.cache_clear()
    try:
        assert provenance.code_version() == f"bertbench {provenance.__version__} git:abc1234"
        monkeypatch.delenv(provenance.COMMIT_VARIABLE)
        provenance.code_version.cache_clear()
        assert provenance.code_version() == f"bertbench {provenance.__version__}"
    finally:
        provenance.code_version.cache_clear()


def test_an_optional_side_that_fails_is_a_note_and_a_required_one_fails_the_call(tmp_path, monkeypatch):
    def lines(optional_status, required_status):
        return [{"side": "bertbench_bf16", "status": required_status, "batch_size": 2, "optional": False},
                {"side": "transformers_bf16_compiled", "status": optional_status, "batch_size": 2, "optional": True,
                 "error": "RuntimeError: inductor"}]

    for k, (opt, req, code) in enumerate([("failed", "skipped", 0), ("over budget", "failed", 2)]):
        monkeypatch.setattr(gpu_check, "run", lambda *a, **kw: lines(opt, req))
        monkeypatch.setattr(gpu_check, "markdown", lambda records, source: "table")
        r = CliRunner().invoke(app, ["bench", "gpu", "--dry-run", "--out", str(tmp_path / f"{k}.jsonl")])
        assert r.exit_code == code, r.output
        assert "note: optional side(s) did not finish (transformers_bf16_compiled)" in r.output
        assert ("1 side(s) did not finish (bertbench_bf16)" in r.output) == bool(code)


def test_compile_auto_on_a_gpu_decides_from_a_flop_floor_where_nothing_was_measured(tmp_path, monkeypatch):
    """A first run on a GPU: no step time measured there yet, so `compile: auto` takes the eager step's floor (its
    FLOPs ÷ the datasheet peak) as the eager time. A long BERT-Base run compiles, a short one stays eager, and the
    reason says what decided it; a measured step time wins over the floor."""
    import json

    from bertbench.config import ModelConfig, PretrainConfig
    from bertbench.model.bert import BertForPreTraining, flops_per_token
    from bertbench.runtime import devices
    from bertbench.training.step import choose_step, cuda_step_floor

    base = ModelConfig.from_size("base", vocab_size=30522)
    h100 = {"bf16": 989.4e3, "fp32": 66.9e3, "source": "H100 datasheet, dense"}
    floor = cuda_step_floor(base, 256, 128, 0.15, "bf16-mixed", h100)
    assert floor == pytest.approx(flops_per_token(base, 128, 0.15, 0.15) * 256 * 128 / 989.4e12)
    assert 0.01 < floor < 0.03 and cuda_step_floor(base, 256, 128, 0.15, "32-true", h100) > 10 * floor
    assert cuda_step_floor(base, 256, 128, 0.15, "bf16-mixed", None) is None  # a GPU without a datasheet entry

    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path / "cache"))  # nothing measured anywhere
    monkeypatch.setattr(devices, "gpu_peak", lambda device_type: h100)
    model = BertForPreTraining(ModelConfig.from_size("mini", vocab_size=1000))
    for steps, compiled in ((5_000_000, True), (50, False)):  # ≥ 2,826 s of eager steps (> 4 × 600 s); 0.03 s
        cfg = PretrainConfig(model_size="mini", max_steps=steps, batch_size=256, compile="auto")
        step = choose_step(cfg, model, "cuda", "bf16-mixed", tmp_path / f"step-{steps}.json", False)
        assert step.choice.compiled is compiled and step.choice.reason.startswith("eager step ≥ "), step.choice.reason
        assert json.loads((tmp_path / f"step-{steps}.json").read_text())["compiled"] is compiled
    cpu = choose_step(cfg, model, "cpu", "32-true", tmp_path / "cpu.json", False)
    assert not cpu.choice.compiled and "eager step ≥" not in cpu.choice.reason  # the CPU's rule is its own
