"""What `--devices N` means on this machine, for `pretrain` and `run` alike: N GPUs where the accelerator asks
for GPUs and N are here; N CPU processes where it may run on the CPU and no GPU is here (said once, on the
first process); a refusal in one line where it asks for GPUs that are not here. Lightning would otherwise
fail deep in its launcher, or a study would record stages on GPUs 0 and 1 of a machine that has none.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

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
    return DevicePlan(n, "cpu", f"note: {flag} {n}: {why}, so {n} CPU processes will be used" if n > 1 else None)


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


def cuda_step_floor(model_cfg, batch_size: int, seq_len: int, mask_ratio: float, precision: str,
                    peak: Optional[dict]) -> Optional[float]:
    """The least time one eager training step can take on this GPU: the FLOPs it executes ÷ the datasheet's dense
    peak (bf16 under bf16 autocast, else fp32), as if at 100% MFU. `compile: auto` decides from it where nothing
    has been measured on this device yet (training.pretrain_run): without it a first long run on a GPU stayed eager
    for its whole life. A floor, so it can only understate the eager time, never talk a short run into a compile.
    None where the GPU's peak is not known (benchmarks.common.gpu_peak)."""
    if not peak:
        return None
    from bertbench.model.bert import flops_per_token

    # the masked positions go through the vocabulary and the last layer (the static step's masked-only head)
    flops = flops_per_token(model_cfg, seq_len, predicted_share=mask_ratio, last_layer_share=mask_ratio)
    gflops = peak["bf16"] if "bf16" in precision else peak["fp32"]
    return flops * batch_size * seq_len / (gflops * 1e9)


FLOOR_REASON = "its FLOPs ÷ this GPU's datasheet peak: nothing measured here yet"


def with_step_floor(measured: Optional[dict], device_type: str, model_cfg, cfg, precision: str
                    ) -> tuple[Optional[dict], Optional[float]]:
    """`measured` (training.step_times) with cuda_step_floor as the eager step time where a GPU has none yet, and
    the floor (None where it was not used)."""
    if device_type != "cuda" or (measured or {}).get("eager_step_seconds"):
        return measured, None
    from bertbench.benchmarks.common import gpu_peak

    floor = cuda_step_floor(model_cfg, cfg.batch_size, cfg.data.max_seq_len, cfg.data.mask_ratio, precision,
                            gpu_peak(device_type))
    return (measured, None) if floor is None else ({**(measured or {}), "eager_step_seconds": floor}, floor)
