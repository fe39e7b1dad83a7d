"""How `bench gpu` measures one side (docs/performance-gpu.md): step times between two device marks (CUDA
events, read once after the window; on CPU `time.perf_counter`), the host syncs inside the timed steps, and the
attention kernel of one profiled step after them. The same object serves a bare step loop and Lightning's loop
(whose callback hooks call it), so every side is timed the same way.

The window runs from the first timed step's start to the start of the step after the last, so a loop's own work
between steps (Lightning's batch fetch and transfer, its hooks) is inside it. On CUDA the sync debug mode's
warnings are counted (autograd's worker threads hand theirs back to the caller; torch.distributed's syncs are not
instrumented, which one device does not run); on CPU a `TorchDispatchMode` counts the ops that would sync, except
under torch.compile, which refuses a dispatch mode (the count is then None).
"""
from __future__ import annotations

import time
import warnings
from collections import Counter
from typing import Any, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten ops that make the host wait for a CUDA device (on CPU: the ops that would): a value read back, or an output
# whose size depends on the values. Boolean-mask indexing goes through aten.index / index_put with a bool index.
SYNCING_OPS = ("aten._local_scalar_dense", "aten.nonzero", "aten.masked_select", "aten.unique", "aten._unique",
               "aten.equal", "aten.repeat_interleave.Tensor")
# The fused SDPA ops, by backend (forward only: their names without "_backward").
SDPA_OPS = {
    "_scaled_dot_product_flash_attention_for_cpu": "flash (cpu)",
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "efficient",
    "_scaled_dot_product_cudnn_attention": "cudnn",
    "_scaled_dot_product_fused_attention_overrideable": "overrideable",
    "_scaled_dot_product_attention_math": "math",
}
EXPLICIT = "no fused SDPA op (matmul attention)"
CUDA_SYNC_WARNING = "called a synchronizing CUDA operation"


class SyncingOps(TorchDispatchMode):
    """Counts the ops that would make the host wait on a CUDA device (on CPU, where nothing waits)."""

    count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if name in SYNCING_OPS or str(func) in SYNCING_OPS or (
                name in ("aten.index", "aten.index_put", "aten.index_put_") and _bool_index(args)):
            self.count += 1
        return func(*args, **(kwargs or {}))


def _bool_index(args) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8) for t in indices or ())


class SyncCounter:
    """Host syncs from `start()` to `stop()`, read at any time with `count()` (None: not countable here);
    `method` says how they were counted."""

    def __init__(self, device_type: str, compiled: bool):
        self.cuda = device_type == "cuda"
        self.countable = self.cuda or not compiled
        if self.cuda:
            self.method = "torch.cuda.set_sync_debug_mode('warn'): its warnings counted"
        elif compiled:
            self.method = "not counted: torch.compile refuses a dispatch mode (on CUDA the sync debug mode counts it)"
        else:
            self.method = "TorchDispatchMode: the ops that sync on CUDA"
        self._warnings: Optional[list] = None
        self._catcher: Optional[warnings.catch_warnings] = None
        self._mode: Optional[SyncingOps] = None
        self._active = False

    def start(self) -> None:
        if self.cuda:
            self._catcher = warnings.catch_warnings(record=True)
            self._warnings = self._catcher.__enter__()
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
        elif self.countable:
            self._mode = SyncingOps()
            self._mode.__enter__()
        self._active = True

    def stop(self) -> None:
        if not self._active:
            return
        self._active = False
        if self._catcher is not None:
            torch.cuda.set_sync_debug_mode("default")
            self._catcher.__exit__(None, None, None)
        if self._mode is not None:
            self._mode.__exit__(None, None, None)

    def count(self) -> Optional[int]:
        if not self.countable:
            return None
        if self._warnings is not None:
            return sum(CUDA_SYNC_WARNING in str(w.message) for w in self._warnings)
        return self._mode.count if self._mode is not None else 0


def attention_backends(events: list[str]) -> dict[str, int]:
    """{backend: forward calls} from a profiled step's op names; {EXPLICIT: 0} when no fused SDPA op ran."""
    found = Counter(SDPA_OPS[op] for op in (name.removeprefix("aten::") for name in events) if op in SDPA_OPS)
    return dict(found) or {EXPLICIT: 0}


def attention_kernels(kernels: list[str], limit: int = 4) -> list[str]:
    """The distinct GPU kernel names of a profiled step that look like attention (what the op names say, seen
    from the device side), shortened."""
    keys = ("attention", "fmha", "flash", "sdpa", "attn")
    names = sorted({k for k in kernels if any(x in k.lower() for x in keys)})
    return [n[:120] for n in names[:limit]]


class Measurement:
    """One side's timed steps. Call `before(i)` at the start of step i and `after(i, loss)` at its end, for
    i = 0 … warmup + steps (the last step is profiled, outside the window); then `result()`."""

    def __init__(self, device_type: str, warmup: int, steps: int, compiled: bool):
        self.device_type, self.warmup, self.steps = device_type, warmup, steps
        self.last = warmup + steps  # the profiled step, after the window
        self.syncs = SyncCounter(device_type, compiled)
        self.marks: list[Any] = []
        self.sync_marks: list[Optional[int]] = []
        self.losses: list[torch.Tensor] = []
        self.first_step_s: Optional[float] = None
        self.profile_names: list[str] = []
        self.profile_kernels: list[str] = []
        self._t0 = 0.0
        self._prof = None

    def _wait(self) -> None:
        if self.device_type == "cuda":
            torch.cuda.synchronize()

    def _mark(self) -> None:
        if self.device_type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())
        self.sync_marks.append(self.syncs.count())

    def before(self, i: int) -> None:
        if i == 0:
            self._t0 = time.perf_counter()
        if i == self.warmup:
            self._wait()  # the warm-up's work is done before the window opens (outside it: this wait is not counted)
            self.syncs.start()
        if self.warmup <= i <= self.last:
            self._mark()
        if i == self.last:
            self.syncs.stop()
            self._start_profile()

    def after(self, i: int, loss: Optional[torch.Tensor]) -> None:
        if loss is not None:
            self.losses.append(loss.detach())
        if i == 0:
            self._wait()
            self.first_step_s = time.perf_counter() - self._t0  # a compiled side compiles here
        if i == self.last:
            self._wait()
            self._stop_profile()

    def _start_profile(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device_type == "cuda" else [])
        self._prof = profile(activities=activities)
        self._prof.__enter__()

    def _stop_profile(self) -> None:
        if self._prof is None:
            return
        self._prof.__exit__(None, None, None)
        events = self._prof.events()
        self.profile_names = [e.name for e in events]
        self.profile_kernels = [e.name for e in events if str(getattr(e, "device_type", "")).endswith("CUDA")]
        self._prof = None

    def abort(self) -> None:
        """Leave no counting mode or profiler behind after a side that raised (or ran over its budget)."""
        self.syncs.stop()
        if self._prof is not None:
            self._prof.__exit__(None, None, None)
            self._prof = None

    def done(self) -> bool:
        return len(self.marks) == self.steps + 1 and self.first_step_s is not None

    def result(self) -> dict[str, Any]:
        """Step times (ms), host syncs, attention and losses; reads the device once (after the window)."""
        if not self.done():
            raise RuntimeError(f"the side ran {max(0, len(self.marks) - 1)} of its {self.steps} timed steps")
        if self.device_type == "cuda":
            self.marks[-1].synchronize()
            per_step = [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:])]
        else:
            per_step = [1000 * (b - a) for a, b in zip(self.marks, self.marks[1:])]
        total_ms = sum(per_step)
        syncs = self.sync_marks
        per_step_syncs = None if syncs[0] is None else [b - a for a, b in zip(syncs, syncs[1:])]
        losses = [float(x) for x in self.losses]
        return {
            "step_ms": total_ms / self.steps,
            "step_ms_median": sorted(per_step)[len(per_step) // 2],
            "step_ms_min": min(per_step),
            "step_ms_max": max(per_step),
            "window_ms": total_ms,
            "first_step_s": self.first_step_s,
            "host_syncs": None if per_step_syncs is None else sum(per_step_syncs),
            "host_syncs_per_step": per_step_syncs,
            "sync_counter": self.syncs.method,
            "attention": attention_backends(self.profile_names),
            "attention_kernels": attention_kernels(self.profile_kernels),
            "loss_first": losses[0] if losses else None,
            "loss_last": losses[-1] if losses else None,
            "losses_finite": all(x == x and abs(x) != float("inf") for x in losses),
        }
