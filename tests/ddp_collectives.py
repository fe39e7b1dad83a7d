"""`python tests/ddp_collectives.py pretrain …`: `bertbench pretrain` with its static step run eagerly (or, with
$BERTBENCH_COMPILE=inductor, compiled as it is and each graph given to inductor counted) and, with
$BERTBENCH_COLLECTIVES set, every blocking collective of torch.distributed counted per training step
(tests/test_pretrain_ddp.py).

The static step: `--compile on` chooses it, and here torch.compile returns the function it is given, so the
step runs eagerly (inductor would build C++ in each process, half a minute; torch's own switch,
TORCH_COMPILE_DISABLE, refuses a fullgraph compile instead). With $BERTBENCH_COMPILE=inductor, torch.compile
is left alone (compile_step's own backend) and `InductorGraphs` counts the graphs inductor is given; with
$BERTBENCH_GRAPHS set each rank writes the count to $BERTBENCH_GRAPHS/rank-R.json at exit.

Each process (Lightning starts the other ranks by running this script again) wraps torch.distributed's
collectives in Python, notes which optimiser step each call came in (a callback marks the start of each
micro-batch; calls before the first batch are step 0) and writes $BERTBENCH_COLLECTIVES/rank-R.json at exit:
{step: [names]}. DDP's gradient buckets are all-reduced by its reducer in C++, which does not call these
functions, so they are not counted (a comm hook written in Python, such as the bf16 one, would be).
A call made inside another counted one (all_gather_object's all_gather) counts once, as the outer one.
"""
from __future__ import annotations

import atexit
import functools
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

import torch.distributed as dist
from torch.distributed import distributed_c10d

COLLECTIVES = (
    "all_reduce", "all_reduce_coalesced", "broadcast", "_broadcast_coalesced", "all_gather", "all_gather_into_tensor",
    "all_gather_object", "broadcast_object_list", "barrier", "monitored_barrier", "reduce", "gather", "gather_object",
    "scatter", "scatter_object_list", "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single",
    "send", "recv", "batch_isend_irecv",
)

state = {"step": 0, "depth": 0, "rank": int(os.environ.get("LOCAL_RANK", "0"))}
seen: dict[int, list[str]] = defaultdict(list)


def counted(name: str, fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if state["depth"] == 0:
            seen[state["step"]].append(name)
        state["depth"] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            state["depth"] -= 1

    return call


def install() -> None:
    for name in COLLECTIVES:
        fn = getattr(distributed_c10d, name, None) or getattr(dist, name, None)
        if fn is None:
            continue
        wrapped = counted(name, fn)
        for module in (dist, distributed_c10d):  # callers look them up on either
            if hasattr(module, name):
                setattr(module, name, wrapped)


def mark_steps() -> None:
    """Add a first callback to the run's own that marks each micro-batch's optimiser step."""
    from bertbench.training import pretrain_run
    from bertbench.training.lightning_compat import lightning as L

    class StepMark(L.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            state["step"], state["rank"] = trainer.global_step + 1, trainer.global_rank

    own = pretrain_run._all_callbacks

    def with_mark(*args, **kwargs):
        callbacks, bar = own(*args, **kwargs)
        return [StepMark(), *callbacks], bar

    pretrain_run._all_callbacks = with_mark


def write() -> None:
    folder = Path(os.environ["BERTBENCH_COLLECTIVES"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"rank-{state['rank']}.json").write_text(json.dumps({str(k): v for k, v in sorted(seen.items())}))


def eager_compile() -> None:
    import torch

    torch.compile = lambda fn, *args, **kwargs: fn


class InductorGraphs:
    """Counts the graphs handed to inductor (torch._inductor.compile_fx.compile_fx, which the "inductor" backend
    looks up at each call; its calls from inside itself are not counted) and dynamo's graphs, in this process.
    Under DDP, dynamo's DDPOptimizer splits one traced graph at the gradient buckets and hands inductor each
    piece. Also used in-process (tests/test_static_compile.py): `install()` returns an undo."""

    def __init__(self) -> None:
        self.graphs, self.rank, self._depth = 0, int(os.environ.get("LOCAL_RANK", "0")), 0

    def install(self):
        import torch._inductor.compile_fx as compile_fx_module

        original = compile_fx_module.compile_fx

        @functools.wraps(original)
        def counting(*args, **kwargs):
            if self._depth == 0:
                self.graphs += 1
                if dist.is_available() and dist.is_initialized():
                    self.rank = dist.get_rank()
            self._depth += 1
            try:
                return original(*args, **kwargs)
            finally:
                self._depth -= 1

        compile_fx_module.compile_fx = counting
        return lambda: setattr(compile_fx_module, "compile_fx", original)

    def stats(self) -> dict:
        from torch._dynamo.utils import counters

        return {"inductor_graphs": self.graphs, "dynamo_graphs": counters["stats"]["unique_graphs"]}

    def write(self) -> None:
        folder = Path(os.environ["BERTBENCH_GRAPHS"])
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"rank-{self.rank}.json").write_text(json.dumps(self.stats()))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    if os.environ.get("BERTBENCH_COMPILE") == "inductor":
        graphs = InductorGraphs()
        graphs.install()
        if os.environ.get("BERTBENCH_GRAPHS"):
            atexit.register(graphs.write)
    else:
        eager_compile()
    if os.environ.get("BERTBENCH_COLLECTIVES"):
        install()
        mark_steps()
        atexit.register(write)
    from bertbench.cli import main

    sys.exit(main())
