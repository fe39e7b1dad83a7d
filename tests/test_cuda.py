"""On a CUDA GPU (skipped without one; `scripts/gpu_check.sh` runs them with `pytest -m cuda`): the model
computes on the GPU what it computes on the CPU, a bf16 pre-training run learns there, and `bench pretrain
--accelerator cuda` reports MFU against the GPU's datasheet peak. One test runs everywhere: asking for a
GPU where there is none is one clear line."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest
import torch

from test_pretrain import write_corpus

HAS_CUDA = torch.cuda.is_available()
no_gpu_here = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


@pytest.mark.skipif(HAS_CUDA, reason="checks the message where there is no GPU")
def test_bench_asks_for_a_gpu_that_is_not_there():
    from bertbench.benchmarks.common import device_type
    from bertbench.errors import BertbenchError

    with pytest.raises(BertbenchError, match="--accelerator cuda: no CUDA GPU is available here"):
        device_type("cuda")
    assert device_type("auto") == "cpu"


@pytest.mark.cuda
@no_gpu_here
def test_the_model_computes_the_same_on_the_gpu():
    from bertbench.benchmarks.pretrain import synthetic_batches
    from bertbench.config import ModelConfig
    from bertbench.model.bert import BertForPreTraining

    torch.backends.cuda.matmul.allow_tf32 = False  # compare fp32 with fp32
    torch.backends.cudnn.allow_tf32 = False
    cfg = ModelConfig.from_size("mini", vocab_size=1000)
    torch.manual_seed(0)
    model = BertForPreTraining(cfg).eval()
    batch = synthetic_batches(cfg, 1, 4, 64)[0]
    with torch.no_grad():
        cpu = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], batch["lm_labels"], batch["nsp_labels"])
        gpu_model = model.to("cuda")
        gb = {k: v.cuda() for k, v in batch.items()}
        gpu = gpu_model(gb["input_ids"], gb["token_type_ids"], gb["attention_mask"], gb["lm_labels"], gb["nsp_labels"])
    assert torch.allclose(cpu.lm_logits, gpu.lm_logits.cpu(), atol=1e-4, rtol=1e-4)
    assert abs(float(cpu.loss) - float(gpu.loss)) < 1e-4


@pytest.mark.cuda
@no_gpu_here
def test_pretraining_learns_on_the_gpu_in_bf16(tmp_path):
    corpus = write_corpus(tmp_path / "docs")
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "bertbench.cli", "pretrain", "--corpus", str(corpus), "--out", str(out),
                        "--model-size", "tiny", "--vocab-size", "200", "--max-seq-len", "32", "--batch-size", "16",
                        "--max-steps", "30", "--lr", "3e-3", "--warmup-steps", "3", "--accelerator", "cuda",
                        "--precision", "bf16-mixed", "--eval-every", "15", "--set", "log_every=1"],
                       env={**os.environ, "BERTBENCH_PROGRESS": "0"}, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 30 and summary["precision"] == "bf16-mixed"
    with open(out / "metrics.csv", newline="") as fh:
        losses = [float(row["train_loss"]) for row in csv.DictReader(fh) if row["train_loss"]]
    assert losses[-1] < losses[0] - 0.5, losses  # it learns


@pytest.mark.cuda
@no_gpu_here
def test_bench_pretrain_on_the_gpu_reports_mfu():
    from bertbench.benchmarks import pretrain as bench_pretrain
    from bertbench.runtime.devices import GPU_PEAK_TFLOPS

    result = bench_pretrain.run("mini", batch_size=32, seq_len=128, precision="bf16-mixed", steps=3, warmup=1,
                                accelerator="cuda")
    ours = result["sides"]["bertbench_bf16"]
    assert result["device"] == torch.cuda.get_device_name(0)
    assert ours["tokens_per_s"] > 0 and 0 < ours["mfu_bf16_peak"] < 1
    if any(k in result["device"] for k in GPU_PEAK_TFLOPS):
        assert "datasheet" in result["peak_gflops_per_s"]["source"]


def _static_step_setup(device: str, compiled: bool = False):
    from bertbench.benchmarks.pretrain import ours_forward, synthetic_batches
    from bertbench.config import ModelConfig, OptimConfig
    from bertbench.model.bert import BertForPreTraining, compile_step
    from bertbench.training.optim import make_adamw

    cfg = ModelConfig.from_size("mini", vocab_size=1000, dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    model = BertForPreTraining(cfg).train().to(device)
    forward = compile_step(model) if compiled else model
    opt = make_adamw(model, OptimConfig(), device)
    batches = [{k: v.to(device) for k, v in b.items()} for b in synthetic_batches(cfg, 3, 8, 64)]
    batches[1]["attention_mask"][:, 50:] = 0  # a padded batch: the mask is passed, never looked at on the host

    def step(i: int):
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            loss = ours_forward(forward, batches[i], static=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return model, step


@pytest.mark.cuda
@no_gpu_here
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_the_static_training_step_never_waits_for_the_gpu(compiled):
    """Forward, loss, backward, clipping and AdamW of the static step with sync debug mode "error": any
    operation that reads a value back to the host (int(), bool(), .item(), nonzero(), a boolean index) raises."""
    _, step = _static_step_setup("cuda", compiled)
    step(0)  # warm-up: kernel selection, allocator, the compile
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        losses = [step(i) for i in (1, 2)]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert all(torch.isfinite(x).item() for x in losses)


@pytest.mark.cuda
@no_gpu_here
def test_the_static_step_computes_on_the_gpu_what_it_computes_on_the_cpu():
    torch.backends.cuda.matmul.allow_tf32 = False
    from bertbench.benchmarks.pretrain import ours_forward, synthetic_batches
    from bertbench.config import ModelConfig
    from bertbench.model.bert import BertForPreTraining

    cfg = ModelConfig.from_size("mini", vocab_size=1000)
    torch.manual_seed(0)
    model = BertForPreTraining(cfg).eval()
    batch = synthetic_batches(cfg, 1, 4, 64)[0]
    with torch.no_grad():
        cpu = ours_forward(model, batch)  # the dynamic step on CPU
        gpu = ours_forward(model.to("cuda"), {k: v.cuda() for k, v in batch.items()}, static=True)
    assert abs(float(cpu) - float(gpu)) < 1e-4
