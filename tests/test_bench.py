"""`bertbench bench …` end to end on a tiny config: valid JSON with the keys the report promises, and
numbers that mean something (same initial weights on every side, positive throughputs). No timing asserts."""
from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from bertbench.cli import app

runner = CliRunner()
TINY = ["--model-size", "tiny", "--vocab-size", "1000", "--batch-size", "4", "--steps", "2", "--warmup", "1", "--json"]


def _invoke(args: list[str]) -> dict:
    r = runner.invoke(app, ["bench", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _check_machine(result: dict) -> None:
    m = result["machine"]
    assert {"hardware", "torch", "threads", "tcmalloc"} <= set(m)
    assert m["threads"] >= 1 and isinstance(m["tcmalloc"], bool)
    assert result["tcmalloc"] == m["tcmalloc"]
    assert m["allocator"] in ("tcmalloc", "glibc-tuned", "glibc")
    assert (result["hint"] is None) == (m["allocator"] != "glibc")  # a hint exactly when malloc is untuned


def test_bench_pretrain_json():
    out = _invoke(["pretrain", *TINY, "--seq-len", "32", "--precision", "32"])
    _check_machine(out)
    assert out["benchmark"] == "pretrain" and out["default_precision"] == "32-true"
    assert out["config"] | {"vocab_size": 1000, "batch_size": 4, "seq_len": 32, "steps": 2} == out["config"]
    assert out["config"]["masked_share"] == pytest.approx(5 / 32, abs=1e-3)  # round(0.15 · 32) positions per row
    assert set(out["sides"]) == {"bertbench_fp32", "bertbench_bf16", "transformers_fp32", "transformers_bf16"}
    assert out["peak_gflops_per_s"]["fp32"] > 0 and out["peak_gflops_per_s"]["bf16"] > 0
    for name, side in out["sides"].items():
        assert side["precision"] in ("32-true", "bf16-mixed")
        assert side["tokens_per_s"] > 0 and side["mfu_bf16_peak"] > 0 and side["mfu_fp32_peak"] > 0
        assert side["model_gflops_per_s"] == pytest.approx(side["tokens_per_s"] * side["flops_per_token"] / 1e9, rel=1e-2, abs=0.06)
        # random tokens: MLM ≈ ln V, NSP ≈ ln 2 at the start, from the same initial weights on every side
        assert math.isfinite(side["loss_last"])
        assert side["loss_first"] == pytest.approx(math.log(1000) + math.log(2), abs=0.6), name
    # Our FLOPs count the vocabulary projection at masked positions only; transformers' at all of them.
    assert out["sides"]["bertbench_fp32"]["flops_per_token"] < out["sides"]["transformers_fp32"]["flops_per_token"]
    # fp32, same weights, same first batch, dropout aside: the two implementations start at the same loss.
    assert out["sides"]["bertbench_fp32"]["loss_first"] == pytest.approx(out["sides"]["transformers_fp32"]["loss_first"], abs=0.1)
    comps = out["comparisons"]
    assert set(comps) == {"headline_default_vs_transformers_fp32", "matched_fp32", "matched_bf16"}
    assert comps["headline_default_vs_transformers_fp32"]["ours"] == "bertbench_fp32"
    assert comps["matched_bf16"] == comps["matched_bf16"] | {"ours": "bertbench_bf16", "theirs": "transformers_bf16"}
    for c in comps.values():
        assert c["speedup_min"] <= c["speedup_median"] <= c["speedup_max"]


def test_bench_finetune_json():
    out = _invoke(["finetune", *TINY, "--min-len", "8", "--max-len", "64", "--group-by-length"])
    _check_machine(out)
    assert out["benchmark"] == "finetune" and out["config"]["group_by_length"] is True
    names = set(out["sides"])
    assert names == {
        "bertbench_fp32", "bertbench_bf16", "transformers_max_length_fp32", "transformers_max_length_bf16",
        "transformers_dynamic_fp32", "transformers_dynamic_bf16",
    }
    sides = out["sides"]
    for side in sides.values():
        assert side["tokens_per_s"] > 0 and side["examples_per_s"] > 0
        assert side["loss_first"] == pytest.approx(math.log(2), abs=0.3)
    assert sides["bertbench_fp32"]["batches"] == sides["transformers_dynamic_fp32"]["batches"] == "length-grouped (group_by_length)"
    assert sides["transformers_max_length_fp32"]["batches"] == "random"
    # padding to max length costs more padded tokens than padding to the longest in the batch
    assert sides["transformers_max_length_fp32"]["padded_tokens_per_real"] > sides["bertbench_fp32"]["padded_tokens_per_real"] >= 1.0
    assert sides["transformers_dynamic_fp32"]["padded_tokens_per_real"] == sides["bertbench_fp32"]["padded_tokens_per_real"]
    assert {"matched_fp32_vs_max_length", "matched_bf16_vs_max_length", "matched_fp32_vs_dynamic", "matched_bf16_vs_dynamic"} < set(out["comparisons"])


def test_bench_data_json():
    out = _invoke(["data", "--synthetic-mb", "0.2", "--repeats", "1", "--seq-len", "64", "--json"])
    assert out["benchmark"] == "data"
    assert out["config"]["corpus_mb"] == pytest.approx(0.2, rel=0.2)
    for stage in ("end_to_end", "instances_from_cache"):
        assert out["stages"][stage]["mb_per_s"] > 0
    stats = out["stats"]
    assert stats["train_instances"] > 0 and 0 < stats["mean_length"] <= 64
    assert out["instances_per_s_end_to_end"] > 0


def test_bench_rejects_bad_precision():
    r = runner.invoke(app, ["bench", "pretrain", "--precision", "16-mixed", "--model-size", "tiny"])
    assert r.exit_code == 2 and "--precision" in r.output


def test_bench_embeds_its_markdown_table(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("a\n<!-- bertbench bench: begin pretrain-tiny -->\nold\n<!-- bertbench bench: end pretrain-tiny -->\nb\n")
    r = runner.invoke(app, ["bench", "pretrain", *TINY[:-1], "--seq-len", "32", "--quiet", "--embed", str(readme)])
    assert r.exit_code == 0, r.output
    text = readme.read_text()
    assert "old" not in text and text.startswith("a\n") and text.endswith("b\n")
    assert "| bertbench_bf16 |" in text and "matched_fp32" in text and "Generated by `bertbench bench pretrain" in text


def test_pretrain_ablations_run_every_variant():
    """`bertbench bench ablations`: each variant trains from the same weights on the same batches."""
    from bertbench.benchmarks import ablations

    r = runner.invoke(app, ["bench", "ablations", "--model-size", "tiny", "--batch-size", "2", "--seq-len", "32",
                            "--steps", "1", "--warmup", "1", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out["variants"]) == set(ablations.VARIANTS)
    for name, v in out["variants"].items():
        assert v["tokens_per_s"] > 0 and math.isfinite(v["loss_last"]), name
    assert out["variants"]["default"]["speed_vs_default"] == pytest.approx(1.0)


def test_finetune_ablations_run_every_variant_and_restore_packing():
    from bertbench.benchmarks import finetune_ablations
    from bertbench.model.bert import Packing

    before = (Packing.MIN_PADDING, Packing.BUCKETS)
    r = runner.invoke(app, ["bench", "finetune-ablations", "--model-size", "tiny", "--batch-size", "8", "--min-len", "8",
                            "--max-len", "48", "--steps", "1", "--warmup", "1", "--precision", "fp32", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out["variants"]) == set(finetune_ablations.VARIANTS)
    losses = {name: v["loss_last"] for name, v in out["variants"].items()}
    assert all(v["tokens_per_s"] > 0 for v in out["variants"].values())
    # same weights, same batches: every variant computes the same function, so (dropout aside) similar losses
    assert max(losses.values()) - min(losses.values()) < 0.2, losses
    assert (Packing.MIN_PADDING, Packing.BUCKETS) == before  # the knobs are restored after each step


def test_unknown_ablation_variant_is_one_clear_line():
    r = runner.invoke(app, ["bench", "ablations", "--model-size", "tiny", "--only", "fp33"])
    assert r.exit_code == 2 and "unknown variants ['fp33']" in r.output and "Traceback" not in r.output


@pytest.mark.slow
def test_allocator_bench_runs_each_allocator_in_its_own_process(tmp_path):
    """Fresh `python -m bertbench` processes, one per allocator and rotation; each says which allocator it
    ran (the bench refuses a process that ran another), and the table is embedded."""
    readme = tmp_path / "README.md"
    readme.write_text("<!-- bertbench bench: begin allocator-tiny -->\nold\n<!-- bertbench bench: end allocator-tiny -->\n")
    r = runner.invoke(app, ["bench", "allocator", "--model-size", "tiny", "--batch-size", "2", "--seq-len", "32",
                            "--steps", "1", "--warmup", "1", "--repeats", "1", "--json", "--embed", str(readme)])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    rates = out["allocator"]["tokens_per_s"]
    assert {"glibc", "glibc-tuned"} <= set(rates) and all(len(v) == 1 and v[0] > 0 for v in rates.values())
    assert ("tcmalloc" in rates) == out["allocator"]["tcmalloc_installed"]
    text = readme.read_text()
    assert "| glibc-tuned |" in text and "old" not in text


def test_a_gpu_bench_table_names_the_datasheet_peak_and_the_measured_one_apart():
    """On a GPU the result's peak is the datasheet's and the measured matmul sits under it: the table said
    'Measured matmul peak' beside the datasheet's numbers (the first H200 run's README block)."""
    import json

    from bertbench.commands.bench import _markdown

    from pathlib import Path

    result = json.loads((Path(__file__).parent.parent / "leaderboards/bench/pretrain-base-cuda-h200.json").read_text())
    text = _markdown(result, "bertbench bench pretrain --accelerator cuda")
    assert "Peak (H200 datasheet, dense): fp32 66900 GFLOP/s, bf16 989400 GFLOP/s" in text
    assert "measured matmul: fp32 51167, bf16 778595 GFLOP/s" in text
    assert "Measured matmul peak: fp32 66900" not in text


def test_a_compiled_batch_sweep_reports_both_mfu_columns_and_compile_time(monkeypatch, tmp_path):
    """--batch-sizes runs each batch size; --compile adds our compiled static step with its compile time. Every
    side has MFU at its own FLOPs and at the full model's (the same count for every side: transformers')."""
    import functools

    import torch

    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))  # no C++ build here
    args = ["pretrain", *TINY, "--seq-len", "32", "--precision", "32", "--batch-sizes", "2,3", "--compile"]
    out = _invoke(args)
    assert [r["config"]["batch_size"] for r in out["runs"]] == [2, 3] and out["config"]["batch_size"] == [2, 3]
    for run in out["runs"]:
        sides, peak = run["sides"], run["peak_gflops_per_s"]["bf16"]
        compiled = sides["bertbench_fp32_compiled"]
        assert compiled["compile_seconds"] >= 0 and compiled["step"] == "static, compiled"
        assert sides["bertbench_fp32"]["step"] == "dynamic"  # on CPU the eager step stays the dynamic one
        assert "compile_seconds" not in sides["bertbench_fp32"]
        full = {s["flops_per_token_model"] for s in sides.values()}
        assert full == {sides["transformers_fp32"]["flops_per_token"]}
        for s in sides.values():
            assert s["mfu_bf16_peak_model_flops"] == pytest.approx(s["tokens_per_s"] * s["flops_per_token_model"] / 1e9 / peak, rel=1e-2, abs=1e-4)
        assert sides["transformers_fp32"]["mfu_bf16_peak_model_flops"] == sides["transformers_fp32"]["mfu_bf16_peak"]
        ours = sides["bertbench_fp32"]  # we execute less than the full model: our model-FLOPs MFU is the higher
        assert ours["flops_per_token_model"] > ours["flops_per_token"] and ours["mfu_bf16_peak_model_flops"] > ours["mfu_bf16_peak"]
        assert set(run["comparisons"]) >= {"compiled_vs_eager", "compiled_vs_transformers_matched"}
        assert compiled["loss_first"] == pytest.approx(sides["bertbench_fp32"]["loss_first"], abs=0.1)
        assert run["collate_ms_per_batch"] > 0  # one loader worker's time per batch, beside the step
        assert run["collate_share_of_step"] == pytest.approx(run["collate_ms_per_batch"] / sides["bertbench_fp32"]["step_ms"], rel=0.02, abs=2e-4)
    saved = tmp_path / "sweep.json"
    saved.write_text(json.dumps(out))
    readme = tmp_path / "README.md"
    readme.write_text("<!-- bertbench bench: begin pretrain-tiny -->\nold\n<!-- bertbench bench: end pretrain-tiny -->\n")
    r = runner.invoke(app, ["bench", "pretrain", "--render", str(saved), "--embed", str(readme)])
    assert r.exit_code == 0, r.output
    text = readme.read_text()
    assert text.count("| side | precision | tokens/s (median) | step ms | MFU, executed FLOPs | MFU, model FLOPs | compile s") == 2
    assert "Batch 2 × 32 tokens" in text and "Batch 3 × 32 tokens" in text and "--batch-sizes 2,3" in text
    assert text.count("Generated by") == 1 and "| bertbench_fp32_compiled |" in text and "old" not in text
    assert text.count("Collating a batch on the host") == 2


def test_the_gpu_table_regenerates_from_the_committed_result_with_model_flops_mfu(tmp_path):
    """The H200 result predates the model-FLOPs column: --render computes it from the result's config (the
    bf16 side: 16.8% of the peak at the full model's FLOPs, 12.9% at the FLOPs it executes)."""
    from pathlib import Path

    saved = Path(__file__).parent.parent / "leaderboards/bench/pretrain-base-cuda-h200.json"
    r = runner.invoke(app, ["bench", "pretrain", "--render", str(saved)])
    assert r.exit_code == 0, r.output
    assert "| bertbench_bf16 | bf16-mixed | 248452 | 33.0 | 12.9% | 16.8% | – |" in r.output
    assert "| transformers_bf16 | bf16-mixed | 206647 | 39.6 | 14.0% | 14.0% | – |" in r.output
    assert "--accelerator cuda --model-size base --batch-size 64 --seq-len 128 --steps 10 --warmup 3" in r.output
    bad = tmp_path / "bad.json"
    bad.write_text('{"benchmark": "finetune"}')
    r = runner.invoke(app, ["bench", "pretrain", "--render", str(bad)])
    assert r.exit_code != 0 and "not a `bench pretrain --json` result" in r.output


def test_bench_pretrain_times_both_objectives_side_by_side_against_the_rate_at_their_own_shapes(tmp_path):
    """--objective mlm+nsp,clm: the causal LM's sides (ours and transformers' BertLMHeadModel, the same weights)
    run in the same rounds. Each side's products are recorded as they ran and timed alone: the FLOPs recorded
    are the FLOPs the side's count says it executes, and the share is the products' time alone over the step's."""
    out = _invoke(["pretrain", *TINY, "--seq-len", "32", "--precision", "32", "--objective", "mlm+nsp,clm"])
    sides = out["sides"]
    assert out["config"]["objectives"] == ["mlm+nsp", "clm"]
    assert {"bertbench_fp32_clm", "bertbench_bf16_clm", "transformers_fp32_clm", "transformers_bf16_clm"} < set(sides)
    assert {"clm_matched_fp32", "clm_matched_bf16", "matched_fp32"} <= set(out["comparisons"])
    # no NSP: ln V at the start; transformers' decoder from the same weights starts at our loss (dropout aside)
    assert sides["bertbench_fp32_clm"]["loss_first"] == pytest.approx(math.log(1000), abs=0.3)
    assert sides["bertbench_fp32_clm"]["loss_first"] == pytest.approx(sides["transformers_fp32_clm"]["loss_first"], abs=0.05)
    for name, s in sides.items():
        recorded = s["matmul_gflop_per_step"] * 1e9 / (4 * 32)  # per token
        assert recorded == pytest.approx(s["flops_per_token"], rel=0.01), name
        assert s["shape_rate_gflops_per_s"] > 0 and 0 < s["share_of_shape_rate"]
        assert s["share_of_shape_rate"] == pytest.approx(s["matmul_gflops_per_s"] / s["shape_rate_gflops_per_s"], rel=0.05, abs=2e-3)
    saved, doc = tmp_path / "both.json", tmp_path / "perf.md"
    saved.write_text(json.dumps(out))
    doc.write_text("<!-- bertbench bench: begin pretrain-tiny-mlmnsp-clm -->\n<!-- bertbench bench: end pretrain-tiny-mlmnsp-clm -->\n")
    r = runner.invoke(app, ["bench", "pretrain", "--render", str(saved), "--embed", str(doc)])
    assert r.exit_code == 0, r.output
    assert "| bertbench_fp32_clm |" in doc.read_text() and "host at these shapes GFLOP/s" in doc.read_text()
    r = runner.invoke(app, ["bench", "pretrain", *TINY, "--objective", "mlm"])
    assert r.exit_code != 0 and "error: --objective mlm: expected mlm+nsp and/or clm" in r.output
