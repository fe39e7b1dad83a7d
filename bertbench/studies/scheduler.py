"""The stage scheduler: runs a study's stages in dependency order, `workers` at a time.

With `workers` > 1 each stage runs in a worker process of our own (spawned, one per slot, reused), so that
the scheduler sees each one's end through public handles only: a pipe for its result, and the process's
sentinel for its death. A worker that dies, busy or idle, ends the run with one line (docs/scale-data.md, "When a
worker dies"); the other workers are stopped (a pre-training among them writes its checkpoint at the step it is
in), and every finished stage is kept, as its own output on disk says.

The freed core: when a stage ends and nothing is ready to start on its core (e.g. the fine-tunings of random
init are done while a pre-training still runs), the stages still running share every thread. Each worker's
share lives in shared memory; the scheduler sends the worker SIGUSR1 and the worker's handler calls
`torch.set_num_threads` with its new share. Python runs a signal handler on the main thread between two
bytecodes, never inside a torch operation: that is the safe point, and it needs nothing from the training
loops. (Starting the next stage on the freed core is the other way, and the scheduler does that first
whenever a stage is ready.) Only the order of floating-point sums changes, but that is a stage's last digits
(cpu-hour's random-init SST-2 seed 3: 77.52 on two threads, 77.41 on one), hence `fixed_threads` (docs/usage.md).

Interrupting a study (Ctrl-C, or SIGTERM: `kill`, a cluster's pre-emption) stops it as `pretrain` stops
(docs/usage.md), with one line (`StudyInterrupted`) naming each checkpoint's step. The workers sit in process
groups of their own, so a terminal's Ctrl-C reaches this process only, and this process passes it on, once, to
each busy worker: a pre-training takes a second signal to mean "stop now, without a checkpoint" (a worker that
got the terminal's Ctrl-C and then the scheduler's SIGTERM lost its step). A further signal during that wait is
passed on too, and does stop them at once.

Devices (docs/scale-data.md): with `devices` = N > 1, worker slot i is pinned to device i mod N for its whole life
(and so is the worker that replaces it), through CUDA_VISIBLE_DEVICES set in its process before torch starts. A
stage that runs `alone` (a pre-training on several devices) runs in this process, which sees every device. Where
the devices are CPU processes (no GPU here: runtime.devices), the workers are pinned to nothing, and each stage is
placed on "cpu": no GPU id that does not exist is recorded.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from multiprocessing.connection import wait as wait_for
from typing import Any, Callable, Iterator, Optional

from bertbench.errors import BertbenchError
from bertbench.runtime.quiet import is_quiet, silence_library_noise
from bertbench.training.stop_signals import Interrupted

RERUN_HINT = "finished stages are kept — rerun the same command to continue"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
WIND_DOWN_SECONDS = 600  # how long an interrupted worker may take to finish its step and write its checkpoint


class StopRequested(BaseException):
    """SIGINT or SIGTERM reached the process that runs the study (raised by `stopping_on_signals`' handler)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class StudyInterrupted(BertbenchError):
    """A study stopped by a signal: exit 128 + its number; one line naming each running pre-training's checkpoint
    step, the stages that start over, and the command that continues the study."""

    def __init__(self, signum: int, checkpoints: Optional[dict[str, Optional[int]]] = None, command: str = ""):
        self.signum, self.checkpoints, self.command = int(signum), dict(checkpoints or {}), command
        self.exit_code = 128 + int(signum)
        parts = [f"interrupted by {signal.Signals(signum).name}"]
        parts += [f"{name}: checkpoint written at step {step}" for name, step in self.checkpoints.items()
                  if step is not None]
        again = [name for name, step in self.checkpoints.items() if step is None]
        if again:
            parts.append(f"{', '.join(again)} start{'s' if len(again) == 1 else ''} over")
        parts.append(RERUN_HINT + (f": {command}" if command else ""))
        super().__init__("; ".join(parts))

    def with_command(self, command: str) -> "StudyInterrupted":
        return StudyInterrupted(self.signum, self.checkpoints, command)


@contextmanager
def stopping_on_signals() -> Iterator[None]:
    """While inside: SIGINT and SIGTERM raise StopRequested in this (the main) thread, instead of
    KeyboardInterrupt or dying at once (SIGTERM's default): the study winds its stages down and says how to go
    on. A pre-training run here installs its own handlers meanwhile (stop_signals) and restores these."""
    def stop(signum: int) -> None:
        raise StopRequested(signum)

    with passing_signals_on(stop):
        yield


@contextmanager
def passing_signals_on(send: Callable[[int], None]) -> Iterator[None]:
    """While inside (waiting for interrupted stages to stop): a further SIGINT or SIGTERM is handed to `send`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, lambda signum, frame: send(signum)) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@dataclass
class Stage:
    name: str
    fn: Callable[..., None]  # a module-level function, so that a worker process can be handed it
    args: tuple = ()
    after: Optional[str] = None  # a stage of this invocation that must have finished first
    then: Optional[Callable[[], list["Stage"]]] = None  # stages known only once this one has run
    alone: bool = False  # runs by itself, in this process with every thread
    echo_here: bool = False  # in this process, `fn` is also handed echo= (in a worker it prints its own lines)


def thread_shares(total: int, busy: int) -> list[int]:
    """`total` threads split between `busy` stages: equal shares, the remainder to the first ones, at least 1."""
    if busy < 1:
        return []
    base, extra = divmod(max(total, busy), busy)
    return [base + (1 if i < extra else 0) for i in range(busy)]


DEVICE_VARIABLE = "CUDA_VISIBLE_DEVICES"


CPU = "cpu"  # a worker's device where the devices are CPU processes: nothing to pin


def device_list(devices: int, kind: str = "cuda") -> list[str]:
    """The ids of the `devices` devices the workers are pinned to: this process's own CUDA_VISIBLE_DEVICES,
    when set (a batch system's allocation, e.g. 2,3), else 0 … devices-1. One line when it names fewer. CPU
    processes (`kind` cpu) are "cpu" each."""
    if kind == CPU:
        return [CPU] * devices
    given = os.environ.get(DEVICE_VARIABLE, "").strip()
    ids = [d.strip() for d in given.split(",") if d.strip()] if given else [str(i) for i in range(devices)]
    if len(ids) < devices:
        raise BertbenchError(f"devices {devices}: {DEVICE_VARIABLE}={given} names only {len(ids)} device(s)")
    return ids[:devices]


def run_stages(stages: list[Stage], workers: int, echo: Callable[[str], None], times: dict[str, float],
               threads: Optional[dict[str, list[int]]] = None, fixed_threads: bool = False, devices: int = 1,
               placed: Optional[dict[str, str]] = None, device_kind: str = "cuda") -> None:
    """Run `stages` in list order as their `after` stages finish: one after the other in this process when
    `workers` is 1, else `workers` at a time, each in its own process with a share of the threads. A small
    model uses two cores poorly from one process (a tiny fine-tuning: 8 s on two threads, 9 s on one, so two
    side by side do 1.8x the work). A stage marked `alone` waits until nothing else runs, then runs here with
    every thread, and nothing starts beside it. With `devices` > 1 each worker is pinned to one device (see
    the module's notes); `placed` gets the device each stage ran on."""
    queue = _Queue(list(stages), echo, times, {} if threads is None else threads)
    if devices > 1 and workers < devices:
        raise BertbenchError(f"workers {workers}, devices {devices}: each device needs a worker (give --workers "
                             f"{devices} or more)")
    with stopping_on_signals():
        if workers == 1:
            while (stage := queue.next_ready()) is not None:
                queue.run_here(stage)
            queue.check_nothing_stranded()
            return
        _run_side_by_side(queue, workers, echo, fixed_threads, device_list(devices, device_kind) if devices > 1 else [],
                          {} if placed is None else placed)


class _Queue:
    """The stages not yet started, the ones finished, and what finishing one means (its time, its follow-ups)."""

    def __init__(self, pending: list[Stage], echo: Callable[[str], None], times: dict[str, float],
                 threads: dict[str, list[int]]):
        self.pending, self.echo, self.times, self.threads = pending, echo, times, threads
        self.finished: set[str] = set()

    def next_ready(self) -> Optional[Stage]:
        stage = next((s for s in self.pending if s.after is None or s.after in self.finished), None)
        if stage is not None:
            self.pending.remove(stage)
        return stage

    def complete(self, stage: Stage, seconds: float) -> None:
        self.times[stage.name] = seconds
        self.finished.add(stage.name)
        self.echo(f"[{stage.name}] {seconds:.0f} s")
        if stage.then is not None:
            self.pending.extend(stage.then())

    def run_here(self, stage: Stage) -> None:  # in this process, with every thread
        import torch

        self.echo(f"[{stage.name}] started")
        self.threads[stage.name] = [torch.get_num_threads()]
        t0 = time.perf_counter()
        try:
            stage.fn(*stage.args, **({"echo": self.echo} if stage.echo_here else {}))
        except Interrupted as err:  # a pre-training: checkpointed at the step it was in (or stopped before one)
            raise StudyInterrupted(err.signum, {stage.name: err.step if err.checkpointed else None}) from None
        except StopRequested as stop:  # any other stage starts over
            raise StudyInterrupted(stop.signum, {stage.name: None}) from None
        self.complete(stage, round(time.perf_counter() - t0, 1))

    def check_nothing_stranded(self) -> None:
        if self.pending:  # nothing ready, nothing running: what is left waits on a stage that will not run
            raise BertbenchError(f"stages {', '.join(s.name for s in self.pending)} wait on stages that did not run")


def _run_side_by_side(queue: _Queue, workers: int, echo: Callable[[str], None], fixed_threads: bool,
                      device_ids: list[str], placed: dict[str, str]) -> None:
    import multiprocessing

    import torch

    total = torch.get_num_threads()
    share = thread_shares(total, workers)[-1]
    echo(f"{workers} stages at a time, {share} thread(s) each" + (", always" if fixed_threads else "")
         + (f", each worker on one of devices {','.join(device_ids)}" if device_ids and CPU not in device_ids else ""))
    slot_device = [device_ids[i % len(device_ids)] if device_ids else None for i in range(workers)]
    # spawn, not fork: a forked child of a process that has started torch's thread pool can hang
    context = multiprocessing.get_context("spawn")
    slots = [_Worker(context, share, slot_device[i]) for i in range(workers)]

    def idle_death(worker: "_Worker") -> "_Worker":
        """A worker that died while idle (the out-of-memory killer picks the largest process, and an idle
        worker holds its last stage's heap) ends the study with one line naming it: the machine is short of
        something, and a study that carried on would hide it (docs/scale-data.md, "When a worker dies")."""
        raise BertbenchError(f"a worker process (pid {worker.process.pid}) died while idle ({worker.death()}), as "
                             f"when the system runs out of memory; no stage was running there: {RERUN_HINT}")

    try:
        while True:
            _start_ready(queue, slots, idle_death, placed)
            busy = [w for w in slots if w.stage is not None]
            if not busy:
                queue.check_nothing_stranded()
                return
            if not fixed_threads:  # the stages still running share every thread (the freed core)
                for worker, threads in zip(busy, thread_shares(total, len(busy))):
                    worker.set_threads(threads)
            for worker in busy:  # what each stage runs on from here on
                used = queue.threads.setdefault(worker.stage.name, [])
                if not used or used[-1] != worker.threads.value:
                    used.append(worker.threads.value)
            for worker, outcome in _wait_for_any(slots):
                stage = worker.stage
                worker.stage = None
                if stage is None:  # an idle worker died (nothing of the study was lost): one line, and stop
                    idle_death(worker)
                if outcome[0] == "ok":
                    queue.complete(stage, outcome[1])
                elif outcome[0] == "error":
                    raise BertbenchError(f"[{stage.name}] {outcome[1]}")
                elif outcome[0] == "crash":
                    raise RuntimeError(f"stage {stage.name} failed in its worker process:\n{outcome[1]}")
                else:
                    raise BertbenchError(f"stage {stage.name} died ({outcome[1]}), as when the system runs out "
                                         f"of memory; {RERUN_HINT}")
    except StopRequested as stop:  # Ctrl-C or SIGTERM here: each busy worker gets it once, and says where it stopped
        raise _wind_down(slots, stop.signum) from None
    finally:
        for worker in slots:
            worker.stop()


def _wind_down(slots: list["_Worker"], signum: int) -> StudyInterrupted:
    """Pass `signum` on to each busy worker, once, and wait for each: a pre-training answers with the step of
    the checkpoint it wrote; any other stage dies and starts over next time; one that had just finished is done."""
    busy = [w for w in slots if w.stage is not None]

    def send(s: int) -> None:
        for w in busy:
            _signal(w.process.pid, s)

    checkpoints: dict[str, Optional[int]] = {}
    with passing_signals_on(send):
        send(signum)
        for worker in busy:
            outcome = worker.outcome(wait=WIND_DOWN_SECONDS)
            if outcome[0] == "interrupted":
                checkpoints[worker.stage.name] = outcome[1]
            elif outcome[0] != "ok":
                checkpoints[worker.stage.name] = None
            worker.stage = None
    return StudyInterrupted(signum, checkpoints)


def _start_ready(queue: _Queue, slots: list["_Worker"], idle_death: Callable[["_Worker"], "_Worker"],
                 placed: dict[str, str]) -> None:
    """Hand ready stages to idle workers; a stage that runs alone waits for the others, then runs here. An idle
    worker found dead (killed while a stage ran alone here, when no one was watching its sentinel) is replaced
    before it is handed a stage: its pipe would be broken."""
    while (idle := next((w for w in slots if w.stage is None), None)) is not None:
        stage = queue.next_ready()
        if stage is None:
            return
        if stage.alone:
            if any(w.stage is not None for w in slots):  # it waits, and nothing new starts meanwhile
                queue.pending.insert(0, stage)
                return
            queue.run_here(stage)
            continue
        if not idle.process.is_alive():
            idle = idle_death(idle)
        queue.echo(f"[{stage.name}] started" + (f" on device {idle.device}" if idle.device not in (None, CPU) else ""))
        idle.start(stage)
        if idle.device is not None:
            placed[stage.name] = idle.device


def _wait_for_any(slots: list["_Worker"]) -> list[tuple["_Worker", tuple]]:
    """Block until a busy worker has answered, or any worker has died; each such worker with its outcome:
    ("ok", seconds), ("error", message), ("crash", traceback) or ("died", signal name)."""
    handles = {w.conn: w for w in slots if w.stage is not None} | {w.process.sentinel: w for w in slots}
    ready = {handles[h] for h in wait_for(list(handles))}
    return [(w, w.outcome()) for w in slots if w in ready]


class _Worker:
    """One worker process and the pipe it answers on; `stage` is what it runs now (None: idle)."""

    def __init__(self, context: Any, threads: int, device: Optional[str] = None):
        self.device = device  # the one device this worker's process sees (None: every device, as this process)
        self.conn, child = context.Pipe()
        self.threads = context.Value("i", threads, lock=False)
        self.listening = context.Value("b", 0, lock=False)  # 1 once its SIGUSR1 handler is in place
        self.process = context.Process(target=_worker_main, args=(child, self.threads, self.listening, is_quiet(), device),
                                       name="bertbench-stage")
        self.process.start()
        child.close()
        self.stage: Optional[Stage] = None

    def start(self, stage: Stage) -> None:
        try:
            self.conn.send((stage.fn, stage.args))
        except OSError:  # it died between the check and the hand-over: one line, as for a busy worker's death
            raise BertbenchError(f"a worker process (pid {self.process.pid}) died ({self.death()}) as stage "
                                 f"{stage.name} was handed to it, as when the system runs out of memory; "
                                 f"{RERUN_HINT}") from None
        self.stage = stage

    def set_threads(self, threads: int) -> None:
        if self.threads.value != threads:
            self.threads.value = threads  # written first: a worker not yet listening reads it when it starts to
            if self.listening.value:
                _signal(self.process.pid, signal.SIGUSR1)

    def outcome(self, wait: float = 0) -> tuple:
        """Its answer, or how it died; waits up to `wait` seconds for either (then stops it: SIGKILL)."""
        try:
            if wait:
                wait_for([self.conn, self.process.sentinel], timeout=wait)
            if self.conn.poll():
                return self.conn.recv()
        except (EOFError, OSError):
            pass
        if wait and self.process.is_alive():
            self.process.kill()
        return ("died", self.death())

    def death(self) -> str:
        """How the process ended: a signal's name (SIGKILL) or its exit code."""
        self.process.join(timeout=5)
        code = self.process.exitcode
        if code is not None and code < 0:
            return signal.Signals(-code).name
        return f"exit code {code}"

    def stop(self) -> None:
        """End the process: SIGTERM first (a pre-training writes its checkpoint at the step it is in), then
        SIGKILL after a grace period."""
        self.conn.close()  # an idle worker leaves when its pipe closes; a busy one finds no one to answer
        if self.stage is not None and self.process.is_alive():
            self.process.terminate()
        self.process.join(timeout=60)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def _signal(pid: int, signum: int) -> None:
    with suppress(ProcessLookupError):  # it has just ended: its outcome says how
        os.kill(pid, signum)


def _worker_main(conn: Any, threads: Any, listening: Any, quiet: bool, device: Optional[str] = None) -> None:
    """A worker process: run each stage it is sent and answer with its outcome, until its pipe closes."""
    import traceback

    # a process group of its own: a terminal's Ctrl-C reaches the scheduler only, which passes it on once (a
    # second signal would stop a pre-training without its checkpoint: see the module's notes)
    os.setpgid(0, 0)
    if device not in (None, CPU):  # before torch starts CUDA: from here on this process sees its one device, as cuda:0
        os.environ[DEVICE_VARIABLE] = device

    from bertbench.runtime.allocator import tune_glibc_malloc

    # a spawned process starts with glibc's defaults, not the CLI's tuning: without it every training step
    # page-faults its buffers in again (cpu-quick's stages ran 1.3-1.9x slower, a fifth of the time in the kernel)
    tune_glibc_malloc()
    import torch

    if quiet:  # a spawned worker starts with Python's defaults: silence what the main process silenced
        silence_library_noise()

    # the safe point at which a new share is taken up: between two bytecodes of this (the main) thread
    signal.signal(signal.SIGUSR1, lambda signum, frame: torch.set_num_threads(max(1, threads.value)))
    listening.value = 1
    torch.set_num_threads(max(1, threads.value))
    while True:
        try:
            fn, args = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        t0 = time.perf_counter()
        try:
            fn(*args)
            answer: tuple = ("ok", round(time.perf_counter() - t0, 1))
        except Interrupted as err:  # a pre-training stopped by the scheduler's signal: the step it checkpointed
            answer = ("interrupted", err.step if err.checkpointed else None)
        except BertbenchError as err:
            answer = ("error", str(err))
        except KeyboardInterrupt:
            return
        except BaseException:  # a bug: its traceback goes to the main process, which shows it
            answer = ("crash", traceback.format_exc())
        try:
            conn.send(answer)
        except OSError:  # the main process has gone
            return
