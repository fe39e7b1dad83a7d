"""`bertbench bench gpu`: the GPU check's performance call, in one process, most important side first.

What it needs, what each side's JSONL line holds and how the budgets work: docs/performance-gpu.md ("The
performance call"). The sides are `gpu_sides.sides`; each is timed as `gpu_measure` says.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from bertbench.benchmarks import common
from bertbench.benchmarks.gpu_sides import Inputs, Shape, SideSpec, sides
from bertbench.errors import BertbenchError

GPU = Shape(model_size="base", vocab_size=30522, seq_len=128, batch_size=256, link_batch=64, warmup=3, steps=30)
# The dry run: the same sides and code at a tiny shape (bf16 matmuls are emulated on a CPU without bf16 units, ~40×
# slower than fp32: the least model that still has every part); torch.compile with its eager backend (dynamo traces
# the whole step as one graph, as on the GPU, but inductor's C++ build, minutes on a small CPU, is left out).
DRY = Shape(model_size="L2-H64", vocab_size=128, seq_len=16, batch_size=4, link_batch=2, warmup=1, steps=3,
            compile_options=(("backend", "eager"),))
BUDGET_SECONDS = 480  # inside the device tool's 10-minute command limit, with room for imports and a rerun's margin
BLOCK = "gpu-check"


class OverBudget(BaseException):
    """A side ran past its budget (a BaseException: no library's `except Exception` swallows it)."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise OverBudget in the main thread once `seconds` have passed (SIGALRM)."""
    def fire(signum, frame):
        raise OverBudget(f"over its budget of {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def append_line(path: Path, record: dict[str, Any]) -> None:
    """One JSON line, appended in one write, then fsynced: on disk before the next side starts."""
    data = (json.dumps(record) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The side lines of a JSONL file; a last line without its newline (a write cut off by a kill) is left out.
    Anything else that does not parse is one error line naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise BertbenchError(f"{path}: cannot read the `bench gpu` record ({err.strerror or err})") from None
    lines = text.split("\n")
    records = []
    for n, line in enumerate(lines[:-1], 1):  # lines[-1]: after the last newline, empty unless cut off
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise BertbenchError(f"{path}:{n}: not a JSON line of `bench gpu` ({err.msg})") from None
        if not isinstance(record, dict) or "side" not in record or "status" not in record:
            raise BertbenchError(f"{path}:{n}: expected a `bench gpu` side line (an object with \"side\" and \"status\")")
        records.append(record)
    return records


def environment(device_type: str, dry_run: bool, shape: Shape) -> dict[str, Any]:
    """What every line repeats, so each line stands alone: the device, the versions, the peak MFU is against."""
    import torch

    from bertbench.runtime.devices import gpu_peak
    from bertbench.runtime.provenance import code_version, library_versions

    peak = gpu_peak(device_type)
    if peak is None:  # a CPU, or a GPU without a datasheet entry: a bf16 matmul measured here
        measured = common.PeakMeter(n=256 if dry_run else 2048, device_type=device_type).result()
        peak = {"bf16": measured["bf16"], "source": f"measured bf16 matmul ({device_type})"}
    versions = library_versions()
    return {
        "device": common.device_name(device_type),
        "torch": torch.__version__,
        "transformers": versions.get("transformers"),
        "lightning": versions.get("lightning"),
        "code": code_version(),
        "dry_run": dry_run,
        "model_size": shape.model_size,
        "seq_len": shape.seq_len,
        "precision": "bf16-mixed",
        "warmup": shape.warmup,
        "steps": shape.steps,
        "timer": "CUDA events" if device_type == "cuda" else "time.perf_counter",
        "peak_bf16_gflops": round(peak["bf16"], 1),
        "peak_source": peak["source"],
    }


def side_record(spec: SideSpec, env: dict[str, Any], measured: Optional[dict[str, Any]], flops: tuple[float, float],
                status: str, seconds: float, budget: float, error: Optional[str] = None) -> dict[str, Any]:
    record: dict[str, Any] = {"side": spec.name, "status": status, "impl": spec.impl, "loop": spec.loop,
                              "compiled": spec.compiled, "optional": spec.optional, "batch_size": spec.batch_size,
                              "seconds": round(seconds, 1),
                              "budget_s": round(budget, 1)}
    if error:
        record["error"] = error
    if measured is not None:
        step_s = measured["step_ms"] / 1000
        tokens_per_s = spec.batch_size * env["seq_len"] / step_s
        executed, model = flops
        peak = env["peak_bf16_gflops"] * 1e9
        record.update({
            **{k: round(v, 3) for k, v in measured.items() if k.startswith("step_ms") or k == "window_ms"},
            "tokens_per_s": round(tokens_per_s, 1),
            "flops_per_token_executed": round(executed),
            "flops_per_token_model": round(model),
            "mfu_executed": round(executed * tokens_per_s / peak, 4),
            "mfu_model": round(model * tokens_per_s / peak, 4),
            **{k: measured[k] for k in ("host_syncs", "host_syncs_per_step", "sync_counter", "attention",
                                        "attention_kernels", "losses_finite")},
            "first_step_s": round(measured["first_step_s"], 2),
            **({"compile_s": round(max(0.0, measured["first_step_s"] - step_s), 1)} if spec.compiled else {}),
            "loss_first": round(measured["loss_first"], 4),
            "loss_last": round(measured["loss_last"], 4),
        })
    return {**record, **env}


def measure_side(spec: SideSpec, inputs, env: dict[str, Any], budget: float) -> dict[str, Any]:
    """Run one side under its budget; its line, whatever happened (ok, over budget, failed)."""
    from bertbench.benchmarks.gpu_measure import Measurement
    from bertbench.benchmarks.gpu_sides import flops, release, run_side

    shape = inputs.shape
    m = Measurement(inputs.device_type, shape.warmup, shape.steps, spec.compiled)
    t0 = time.perf_counter()
    measured, status, error = None, "ok", None
    try:
        with deadline(budget):
            run_side(spec, inputs, m)
            measured = m.result()
    except OverBudget as err:
        status, error = "over budget", str(err)
    except Exception as err:  # one side's failure (out of memory, say) is its line; the next side still runs
        status, error = "failed", f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:300]}"
    finally:
        m.abort()
        release(spec.compiled, inputs.device_type)
    return side_record(spec, env, measured, flops(spec, inputs), status, time.perf_counter() - t0, budget, error)


def side_budget(plan: list[SideSpec], k: int, left: float) -> float:
    """Side k's seconds with `left` seconds of the call left: its own budget, less the least time of every later
    required side (an optional one keeps nothing back). Below the side's own least time, it is skipped."""
    return min(plan[k].budget_s, left - sum(s.min_s for s in plan[k + 1:] if not s.optional))


def run(out: Path, dry_run: bool = False, budget_seconds: float = BUDGET_SECONDS, steps: Optional[int] = None,
        warmup: Optional[int] = None, say: Callable[[str], None] = print, command: str = "") -> list[dict[str, Any]]:
    """Every side in order, each line appended to `out` as soon as it is measured; returns the lines."""
    t_start = time.perf_counter()
    shape = DRY if dry_run else GPU
    shape = replace(shape, steps=shape.steps if steps is None else steps, warmup=shape.warmup if warmup is None else warmup)
    if shape.steps < 1 or shape.warmup < 1:
        raise BertbenchError(f"--steps {shape.steps} / --warmup {shape.warmup}: expected at least 1 of each")
    if out.exists() and out.stat().st_size:
        raise BertbenchError(f"{out}: already holds a run; give a new file (each run is its own record)")
    import torch

    if not dry_run and not torch.cuda.is_available():
        raise BertbenchError("bench gpu: no CUDA GPU is available here (a CPU build of torch, or no driver); "
                             "--dry-run runs the same code on the CPU")
    device_type = "cuda" if not dry_run else "cpu"
    if dry_run:  # it checks the code, not the speed: one thread, so OpenMP's spinning threads don't fight a busy CPU
        common.set_threads(1)
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {**environment(device_type, dry_run, shape), "command": command}
    inputs = Inputs(shape, device_type)
    plan, records = sides(shape), []
    for k, spec in enumerate(plan):
        left = budget_seconds - (time.perf_counter() - t_start)
        budget = side_budget(plan, k, left)
        if budget < spec.min_s:
            record = side_record(spec, env, None, (0.0, 0.0), "skipped", 0.0, max(0.0, budget),
                                 f"{left:.0f} s left of {budget_seconds:.0f}, the later sides' reserve included")
        else:
            say(f"bench gpu: {spec.name} (batch {spec.batch_size}, budget {budget:.0f} s)")
            record = measure_side(spec, inputs, env, budget)
        append_line(out, record)
        records.append(record)
        say(summary_line(record))
    return records


def unfinished(records: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The sides that failed or ran over their budget: (required, optional). Only a required one fails the call;
    an optional side ("if time is left") that did not finish is a note, as its line says why."""
    bad = [r for r in records if r["status"] in ("failed", "over budget")]
    return ([r["side"] for r in bad if not r.get("optional")], [r["side"] for r in bad if r.get("optional")])


def summary_line(r: dict[str, Any]) -> str:
    if r["status"] != "ok":
        return f"  {r['side']:<30} {r['status']}: {r.get('error', '')} ({r['seconds']:.0f} s)"
    syncs = "–" if r["host_syncs"] is None else r["host_syncs"]
    return (f"  {r['side']:<30} {r['step_ms']:9.2f} ms/step {r['tokens_per_s']:>11,.0f} tok/s  MFU {100 * r['mfu_executed']:5.1f}% "
            f"(model {100 * r['mfu_model']:5.1f}%)  syncs {syncs}  attention {_attention(r)}  ({r['seconds']:.0f} s)")


# --------------------------------------------------------------------------------------------------------------
# The table


def _gflops(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.2g}"


def _attention(r: dict[str, Any]) -> str:
    return ", ".join(f"{k} ×{v}" if v else k for k, v in r["attention"].items())


def _syncs(r: dict[str, Any]) -> str:
    if r["host_syncs"] is None:
        return "–"
    per_step = r["host_syncs_per_step"]
    steps_with = sum(1 for n in per_step if n)
    return str(r["host_syncs"]) + (f" ({steps_with} of {len(per_step)} steps)" if steps_with else "")


def markdown(records: list[dict[str, Any]], source: str) -> str:
    """The table of a `bench gpu` record: one row per side, then the two comparisons the check exists for."""
    head = f"_Generated by `bertbench bench gpu --render {source}`"
    if not records:
        return (f"{head}; do not edit between the markers._\n\nNo GPU run is recorded in `{source}` yet: "
                "`scripts/gpu_check.sh perf OUT` on a GPU machine writes one (OUT/gpu-perf.jsonl).")
    e = records[0]
    lines = [f"{head} from a run on {e['device']}, torch {e['torch']}, transformers {e['transformers']}, lightning "
             f"{e['lightning']}, {e['code']}{' (dry run)' if e['dry_run'] else ''}; do not edit between the markers._", "",
             f"{e['model_size']} shape, {e['seq_len']} tokens a sequence, bf16 autocast, fused AdamW, clipping at 1.0; each "
             f"side timed over {e['steps']} steps after {e['warmup']} warm-up steps ({e['timer']}). MFU against "
             f"{_gflops(e['peak_bf16_gflops'])} GFLOP/s ({e['peak_source']}): at the FLOPs the side executes, and at the "
             "full model's (every position projected: the same count for every side). Host syncs: in the timed steps.", "",
             "| side | batch | step ms | tokens/s | MFU, executed FLOPs | MFU, model FLOPs | host syncs | attention "
             "| first step s | loss first → last | status |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        if r["status"] != "ok":
            lines.append(f"| {r['side']} | {r['batch_size']} | – | – | – | – | – | – | – | – | {r['status']}: "
                         f"{r.get('error', '')} |")
            continue
        lines.append(f"| {r['side']} | {r['batch_size']} | {r['step_ms']:.1f} | {r['tokens_per_s']:,.0f} | "
                     f"{100 * r['mfu_executed']:.1f}% | {100 * r['mfu_model']:.1f}% | {_syncs(r)} | {_attention(r)} | "
                     f"{r['first_step_s']:.1f} | {r['loss_first']:.3f} → {r['loss_last']:.3f} | ok |")
    by_side = {r["side"]: r for r in records if r["status"] == "ok"}
    bare, loop = by_side.get("bertbench_bf16"), by_side.get("bertbench_bf16_lightning")
    if bare and loop:
        lines += ["", f"The Lightning loop's step against the bare eager step: {loop['step_ms']:.1f} ms vs "
                      f"{bare['step_ms']:.1f} ms ({100 * (loop['step_ms'] / bare['step_ms'] - 1):+.1f}%)."]
    return "\n".join(lines)
