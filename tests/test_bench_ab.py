"""scripts/bench_ab.py, the before/after check on one host: its side process runs against a checkout (this one),
and the committed result's table in docs/performance.md regenerates byte for byte."""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys

from tests.conftest import ROOT

DOC = ROOT / "docs" / "performance.md"
# the results whose tables the page holds: each block's first line names its JSON
RESULTS = sorted(set(re.findall(r"\(`(leaderboards/bench/pretrain-[a-z0-9-]+-ab-[a-z0-9-]+\.json)`\)", DOC.read_text(encoding="utf-8"))))


def _script():
    spec = importlib.util.spec_from_file_location("bench_ab", ROOT / "scripts" / "bench_ab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_side_process_times_both_fp32_sides_of_a_checkout_and_profiles_ours():
    script = _script()
    out = script.run_side(ROOT, "tiny", steps=1, warmup=0, threads=1, profile=1)
    assert set(out["sides"]) == {"bertbench_fp32", "transformers_fp32"}
    assert all(side["step_ms"] > 0 and side["tokens_per_s"] > 0 for side in out["sides"].values())
    # the profile splits our step's self CPU time: matrix products, and the largest other ops by name
    profile = out["profile"]
    assert 0 < profile["matrix_share"] < 1 and profile["self_ms_per_step"] > 0
    assert profile["top_other_ms_per_step"] and not set(profile["top_other_ms_per_step"]) & set(script.MATRIX_OPS)
    summary = script.summarise([out])
    old, new = {**summary, "matrix_share_median": 0.8}, {**summary, "matrix_share_median": 0.5}
    new["bertbench_fp32_step_ms_median"] = old["bertbench_fp32_step_ms_median"] / 2  # twice as fast, half products
    config = {"model_size": "tiny", "batch_size": 32, "seq_len": 128, "steps": 1, "pairs": 1, "threads": 1, "profile": 1}
    result = {"config": config, "machine": {"hardware": "a CPU", "torch": "x"}, "old": {"rev": "a", **old},
              "new": {"rev": "b", **new}, "new_over_old_step_ms": 0.5}
    text = script.markdown(result, None)
    assert "--profile 1`" in text and "80.0% of the old step and 50.0% of the new" in text
    assert "the new step would be at most 4.00× faster than the old (each at most 1.25× and 2.00× faster" in text


def test_the_committed_tables_regenerate(tmp_path):
    assert len(RESULTS) >= 3  # fp32 and bf16 MLM+NSP, the causal LM's bf16
    doc = tmp_path / "performance.md"
    shutil.copy(DOC, doc)
    for result in RESULTS:
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_ab.py"), "--render", result, "--embed", str(doc)],
                           cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "(old) |" in r.stdout and "(new) |" in r.stdout
    assert doc.read_text(encoding="utf-8") == DOC.read_text(encoding="utf-8")


def test_the_causal_lm_side_runs_alone_and_renders_into_its_own_block():
    script = _script()
    out = script.run_side(ROOT, "tiny", steps=1, warmup=0, threads=1, precision="bf16-mixed", objective="clm")
    assert set(out["sides"]) == {"bertbench_bf16"} and out["sides"]["bertbench_bf16"]["step_ms"] > 0
    summary = script.summarise([out], "bf16")
    assert "speedup_vs_transformers_median" not in summary  # no transformers side to compare with
    config = {"model_size": "tiny", "batch_size": 32, "seq_len": 128, "steps": 1, "pairs": 1, "threads": 1,
              "precision": "bf16-mixed", "objective": "clm"}
    result = {"config": config, "machine": {"hardware": "a CPU", "torch": "x"}, "old": {"rev": "a", **summary},
              "new": {"rev": "b", **summary}, "new_over_old_step_ms": 1.0}
    text = script.markdown(result, None)
    assert "--precision bf16-mixed --objective clm" in text and "| commit | bertbench bf16 step ms (runs: min–max) |\n" in text
    assert script.block_name(config) == "pretrain-ab-bf16-clm" and script.block_name({}) == "pretrain-ab"
    assert script.block_name({"profile": 3}) == "pretrain-ab-profile"
