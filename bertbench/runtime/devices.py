"""What `--devices N` means on this machine, for `pretrain` and `run` alike: N GPUs where the accelerator asks
for GPUs and N are here; N CPU processes where it may run on the CPU and no GPU is here (said once, on the
first process); a refusal in one line where it asks for GPUs that are not here. Lightning would otherwise
fail deep in its launcher, or a study would record stages on GPUs 0 and 1 of a machine that has none.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

from bertbench.errors import BertbenchError

GPU_ACCELERATORS = ("gpu", "cuda")  # accelerators that mean a CUDA GPU (auto: a GPU if there is one, else the CPU)


@dataclass(frozen=True)
class DevicePlan:
    count: int  # processes (one per device)
    kind: str  # "cuda" or "cpu": what each process runs on
    note: Optional[str] = None  # the line to say once, when the devices asked for are CPU processes


def gpus_here() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def device_count(devices: str | int) -> Optional[int]:
    """How many devices a --devices value names: a count, or a list of ids ("0,1", "[0, 1]"); None for what
    Lightning decides (auto, -1)."""
    text = str(devices).strip().strip("[]").strip()
    if text.isdigit():
        return int(text)
    ids = [d.strip() for d in text.split(",") if d.strip()]
    return len(ids) if "," in text and all(d.isdigit() for d in ids) else None


def check_slurm_tasks() -> None:
    """Inside a Slurm job of several tasks asked for by `--ntasks` alone, Lightning refuses to join them (its
    Slurm environment wants `--ntasks-per-node`), with a traceback from deep in the Trainer: said here in one line
    instead. An interactive allocation (job name bash or interactive) is not Slurm's to manage, as for Lightning."""
    ntasks = os.environ.get("SLURM_NTASKS", "1")
    if (ntasks.isdigit() and int(ntasks) > 1 and "SLURM_NTASKS_PER_NODE" not in os.environ
            and os.environ.get("SLURM_JOB_NAME") not in ("bash", "interactive")):
        raise BertbenchError(f"this Slurm job has --ntasks={ntasks}; Lightning joins a job's tasks by node: ask for "
                             f"--nodes and --ntasks-per-node (one task per device) instead")


def plan_devices(accelerator: str, devices: str | int, flag: str = "--devices") -> DevicePlan:
    """The processes `devices` on `accelerator` will be here, or one line saying why it cannot run here."""
    check_slurm_tasks()
    n = device_count(devices)
    gpus = gpus_here() if accelerator in (*GPU_ACCELERATORS, "auto") else 0
    if n is None or accelerator not in (*GPU_ACCELERATORS, "auto", "cpu"):
        return DevicePlan(n or 1, "cuda" if gpus else "cpu")  # Lightning's own choice (auto, -1; mps, tpu ...)
    if n <= 1:  # one process: on a GPU where one is asked for and here (the run's own check says when it is not)
        return DevicePlan(1, "cuda" if gpus else "cpu")
    named_ids = not str(devices).strip().strip("[]").strip().isdigit()
    if accelerator in GPU_ACCELERATORS or (accelerator == "auto" and gpus):
        if gpus < n:
            raise BertbenchError(f"{flag} {devices}: asks for {n} GPU(s), and this machine has {gpus}"
                                 + ("" if gpus else "; give --accelerator auto or cpu to run on CPU processes"))
        return DevicePlan(n, "cuda")
    if named_ids:  # GPU ids on a machine without one: Lightning's CPU accelerator takes a count only
        raise BertbenchError(f"{flag} {devices}: names GPU ids, and this machine has no GPU; give a count to run "
                             "on CPU processes")
    why = "no GPU here" if accelerator == "auto" else f"accelerator {accelerator}"
    return DevicePlan(n, "cpu", f"note: {flag} {n}: {why}, so {n} CPU processes will be used")  # n > 1 here


# Where the launchers put a process's rank: Lightning's own launcher (LOCAL_RANK, NODE_RANK), torchrun (RANK,
# LOCAL_RANK, GROUP_RANK for the node) and Slurm's srun (SLURM_PROCID).
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "SLURM_PROCID")


def first_process() -> bool:
    """Whether this is the process that speaks for a multi-process run: rank 0 under every launcher, or one that has
    no rank yet (Lightning's launcher is the first process, and starts the others with LOCAL_RANK set). The one
    definition: the run folder's lock, progress and notes all ask it."""
    return all(os.environ.get(k, "0") == "0" for k in RANK_VARIABLES)


def count_option(flag: str, value: Optional[str]) -> Optional[int]:
    """A whole-number option given as text (`run --devices`), so that a word is one `error:` line, not the
    command-line parser's box."""
    if value is None:
        return None
    text = value.strip()
    if not text.isdigit() or int(text) < 1:
        raise BertbenchError(f"{flag} {value}: expected a whole number ≥ 1")
    return int(text)


# Dense (no sparsity) peaks from the vendors' datasheets, in TFLOP/s: bf16 on the tensor cores, and fp32
# without them. Matched on torch.cuda.get_device_name(); a GPU not listed is measured (PeakMeter) instead.
GPU_PEAK_TFLOPS = {
    "H200": {"bf16": 989.4, "fp32": 66.9},  # SXM; the same compute as H100 SXM, more memory
    "H100": {"bf16": 989.4, "fp32": 66.9},  # SXM (the PCIe card: 756 / 51)
    "A100": {"bf16": 312.0, "fp32": 19.5},
    "L40S": {"bf16": 362.1, "fp32": 91.6},
    "L4": {"bf16": 121.0, "fp32": 30.3},
}


def gpu_peak(device_type: str) -> Optional[dict[str, Any]]:
    """The datasheet peak of this GPU in GFLOP/s ({"bf16", "fp32", "source"}), or None (CPU, or not listed)."""
    if device_type != "cuda":
        return None
    import torch

    name = torch.cuda.get_device_name(0)
    for key, peak in GPU_PEAK_TFLOPS.items():
        if key in name:
            return {"bf16": peak["bf16"] * 1000, "fp32": peak["fp32"] * 1000, "source": f"{key} datasheet, dense"}
    return None
