"""`bertbench run --preset NAME`: raw text → tokenizer → pre-train each variant → fine-tune each on every
task with data → report. One command, re-runnable: a finished stage is skipped (studies.keys), and an
interrupted pre-training resumes from its checkpoint. Besides the folders of studies.plan, the output folder
holds <preset>.md, <preset>.csv, plots/ (`bertbench report` over results/) and stages.json (the wall time of
each stage of the last invocation, and under "host" the machine it ran on, with its measured matmul peak). An
earlier invocation's stages.json is kept as stages.earlier-<n>.json, so a re-run that only re-renders the
report does not erase the times of the invocation that did the work.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

from bertbench.errors import BertbenchError
from bertbench.results import THREADS_KEY
from bertbench.studies import keys
from bertbench.studies.plan import Planner
from bertbench.studies.preset import RunPreset, VariantSpec, variant_config
from bertbench.studies.scheduler import Stage, run_stages


def run_preset(
    preset: RunPreset, data_dir: Path, out: Path, echo: Callable[[str], None] = print, plots: bool = True,
    workers: Optional[int] = None, devices: Optional[int] = None,
) -> dict[str, Any]:
    """Run every stage not already done; returns {stage: seconds} of this invocation, its wall time under
    "wall", the host it ran on under HOST_KEY (host_facts), each stage's thread counts under THREADS_KEY and,
    with several devices, the device each stage ran on under DEVICES_KEY."""
    out, data_dir = Path(out), Path(data_dir)
    out.mkdir(parents=True, exist_ok=True)
    devices = preset.devices if devices is None else devices
    if devices < 1:
        raise BertbenchError(f"devices {devices}: expected an integer ≥ 1")
    # one worker per device unless more were asked for (a worker is pinned to its device: studies.scheduler)
    workers = max(preset.workers, devices) if workers is None else workers
    if workers < 1:
        raise BertbenchError(f"workers {workers}: expected an integer ≥ 1")
    if preset.preregistration is not None:  # before any stage: what the study will be judged on, fixed now
        from bertbench.studies.protocol import register

        register(out, preset)  # its log first: a partial run before it, an amendment
    t_start = time.perf_counter()
    times: dict[str, Any] = {HOST_KEY: host_facts()}

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        result = fn()
        times[name] = round(time.perf_counter() - t0, 1)
        echo(f"[{name}] {times[name]:.0f} s")
        return result

    # 1. one tokenizer for every variant, so the comparison changes only the objective
    base = variant_config(preset, VariantSpec("base"), data_dir)
    trains_tokenizer = not base.tokenizer or base.tokenizer == "train"
    tokenizer = ensure_tokenizer(base, data_dir, out, stage, echo) if trains_tokenizer else base.tokenizer
    # 2. the plan: pre-trainings, fine-tunings, Figure 5's follow-ups (whatever is not finished)
    stages = Planner(preset, data_dir, out, tokenizer, echo, devices).plan()
    if workers > 1 and trains_tokenizer and any(s.name.startswith("pretrain ") for s in stages):
        # the corpus tokenised here once, with every thread, into the cache that every pre-training then
        # reads: not once per process at the same time on a share of the threads
        stage("corpus", lambda: tokenise_corpus(base, tokenizer))
    threads: dict[str, list[int]] = {}
    placed: dict[str, str] = {}
    run_stages_keeping_times(out, stages, workers, echo, times, t_start, threads, preset.fixed_threads, devices, placed)
    if threads:  # none when every stage was done before
        times[THREADS_KEY] = threads
    if placed:
        times[DEVICES_KEY] = placed
    # 3. the report
    stage("report", lambda: write_report(out, preset, plots))
    times["wall"] = round(time.perf_counter() - t_start, 1)  # every run ends with its wall time (README)
    from bertbench.runtime.files import atomic_write_json

    keep_earlier_stages(out)
    atomic_write_json(out / "stages.json", times)
    return times


def keep_earlier_stages(out: Path) -> None:
    """stages.json names the last finished invocation; the one before it becomes stages.earlier-<n>.json, as an
    interrupted one's times go to stages.interrupted-<n>.json."""
    last = out / "stages.json"
    if last.is_file():
        last.replace(numbered_stages_file(out, "earlier"))


def numbered_stages_file(out: Path, kind: str) -> Path:
    """stages.<kind>-<n>.json with the first n (1, 2, …) not taken, so that no kept file is ever overwritten
    (counting the files would overwrite the last one once an earlier one was deleted)."""
    n = 1
    while (out / f"stages.{kind}-{n}.json").exists():
        n += 1
    return out / f"stages.{kind}-{n}.json"


HOST_KEY = "host"  # in a stages file, not a stage: the machine the invocation ran on
DEVICES_KEY = "devices"  # in a stages file, not a stage: {stage: the device it ran on}, with several devices
NOT_STAGES = (HOST_KEY, THREADS_KEY, DEVICES_KEY)


def host_facts() -> dict[str, Any]:
    """The machine an invocation ran on: hardware, threads, and its matmul peak as measured now (GFLOP/s, best of
    a few 2048³ products in fp32 and bf16; under a second). Hosts of one machine class differ ~2x in that peak
    (README), so a study's stage times mean little without the host they came from."""
    import torch

    from bertbench.benchmarks.common import PeakMeter
    from bertbench.runtime.provenance import hardware

    return {"hardware": hardware(), "threads": torch.get_num_threads(), "matmul_gflops_per_s": PeakMeter().result()}


def ensure_tokenizer(base, data_dir: Path, out: Path, stage: Callable, echo: Callable[[str], None]) -> str:
    """The WordPiece tokenizer trained on the corpus, once per (corpus, documents, vocabulary, case)."""
    tok_dir = out / f"tokenizer-{keys.tokenizer_key(base, data_dir)}"
    if (tok_dir / "vocab.txt").is_file():
        echo(f"[tokenizer] done before: {tok_dir}")
    else:
        stage("tokenizer", lambda: train_tokenizer(base, tok_dir))
    return str(tok_dir)


def train_tokenizer(base, tok_dir: Path) -> None:
    from bertbench.data.corpus import iter_documents
    from bertbench.model.tokenizer import WordPieceTokenizer

    sentences = (s for doc in iter_documents(base.data.corpus, base.data.max_documents, base.data.doc_sentences) for s in doc)
    WordPieceTokenizer.train(sentences, vocab_size=base.tokenizer_vocab_size, lowercase=base.lowercase).save(tok_dir)


def tokenise_corpus(base, tokenizer: str) -> None:
    from bertbench.data.corpus import load_tokenized_corpus
    from bertbench.model.tokenizer import WordPieceTokenizer

    tok = WordPieceTokenizer.load(Path(tokenizer))
    load_tokenized_corpus(base.data.corpus, tok, base.data.max_documents, base.data.num_proc,
                          doc_sentences=base.data.doc_sentences)


def run_stages_keeping_times(out: Path, stages: list[Stage], workers: int, echo: Callable[[str], None],
                             times: dict[str, Any], t_start: float, threads: dict[str, list[int]],
                             fixed_threads: bool, devices: int = 1, placed: Optional[dict[str, str]] = None) -> None:
    """run_stages; if it stops (a failed or killed stage, Ctrl-C, or a SIGTERM to a side-by-side run, which the
    scheduler turns into an exit), the finished stages' times go to `stages.interrupted-<n>.json` before the
    error goes on, so that a study resumed over several invocations keeps every invocation's times (a finished
    one writes `stages.json`)."""
    try:
        run_stages(stages, workers, echo, times, threads, fixed_threads, devices, placed)
    except BaseException as err:
        from bertbench.runtime.files import atomic_write_json

        why = type(err).__name__ if not isinstance(err, BertbenchError) else str(err).split("\n")[0][:200]
        atomic_write_json(numbered_stages_file(out, "interrupted"),
                          {**times, f"wall (interrupted: {why})": round(time.perf_counter() - t_start, 1),
                           THREADS_KEY: threads, **({DEVICES_KEY: placed} if placed else {})})
        from bertbench.studies.protocol import log_stop

        log_stop(out, why)  # a pre-registered study's page lists its stopped runs
        raise


def write_report(out: Path, preset: RunPreset, plots: bool) -> Path:
    """`bertbench report OUT/results --out OUT/<preset>.md --plots OUT/plots`."""
    from bertbench.report.run import make_report

    path = out / f"{preset.name}.md"
    make_report([out / "results"], out=path, csv=out / f"{preset.name}.csv", plots=(out / "plots") if plots else None,
                index=True, warn=lambda message: print(message, file=sys.stderr))
    return path
