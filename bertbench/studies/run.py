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
from bertbench.model.tokenizer import WordPieceTokenizer
from bertbench.runtime.files import atomic_write_json, atomic_write_text, replace_marked_block
from bertbench.stages import THREADS_KEY
from bertbench.studies import keys
from bertbench.studies.launcher import CORPUS_STAGE, job_graph, launch, print_sbatch, sbatch_markdown
from bertbench.studies.plan import Planner, runs_alone
from bertbench.studies.preset import RunPreset, VariantSpec, variant_config
from bertbench.studies.scheduler import Stage, StopRequested, StudyInterrupted, run_stages, stopping_on_signals


def run_preset(
    preset: RunPreset, data_dir: Path, out: Path, echo: Callable[[str], None] = print, plots: bool = True,
    workers: Optional[int] = None, devices: Optional[int] = None, command: str = "", launcher: Any = None,
) -> dict[str, Any]:
    """Run every stage not already done; returns {stage: seconds} of this invocation, its wall time under
    "wall", the host it ran on under HOST_KEY (host_facts), each stage's thread counts under THREADS_KEY and,
    with several devices, the device each stage ran on under DEVICES_KEY. Stopped by SIGINT or SIGTERM, it
    raises StudyInterrupted naming `command` (the one that continues the study) after every running
    pre-training has written its checkpoint at the step it was in. With `launcher` (studies.launcher's
    LauncherOptions) the stages are Slurm jobs, and it returns {} (the report job writes the times)."""
    if launcher is not None and launcher.print_sbatch is not None:
        return print_sbatch_scripts(preset, Path(data_dir), Path(out), launcher, plots, command, echo)
    if launcher is not None and devices not in (None, 1):
        raise BertbenchError(f"--devices {devices}: with --launcher, a job's GPUs are --gpus-per-node")
    try:
        with stopping_on_signals():
            return _run_preset(preset, data_dir, out, echo, plots, workers, devices, launcher)
    except StopRequested as stop:  # outside the stages (the tokenizer, the report): nothing to checkpoint
        raise StudyInterrupted(stop.signum, command=command) from None
    except StudyInterrupted as err:
        raise err.with_command(command) from None


def _run_preset(preset: RunPreset, data_dir: Path, out: Path, echo: Callable[[str], None], plots: bool,
                workers: Optional[int], devices: Optional[int], launcher: Any = None) -> dict[str, Any]:
    out, data_dir = Path(out), Path(data_dir)
    devices = preset.devices if devices is None else devices
    if devices < 1:
        raise BertbenchError(f"devices {devices}: expected an integer ≥ 1")
    from bertbench.runtime.devices import plan_devices

    # what the devices are here (GPUs, or CPU processes where none is): said once, and what stages.json records
    device_kind = plan_devices(preset.pretrain.accelerator, devices) if devices > 1 else None
    if device_kind is not None and device_kind.note:
        echo(device_kind.note)
    out.mkdir(parents=True, exist_ok=True)
    # one worker per device unless more were asked for (a worker is pinned to its device: studies.scheduler)
    workers = max(preset.workers, devices) if workers is None else workers
    if workers < 1:
        raise BertbenchError(f"workers {workers}: expected an integer ≥ 1")
    if preset.preregistration is not None:  # before any stage: what the study will be judged on, fixed now
        from bertbench.studies.protocol import register

        register(out, preset)  # its log first: a partial run before it, an amendment
    t_start = time.perf_counter()
    # a study on Slurm runs elsewhere: its jobs record their nodes (studies.launcher)
    times: dict[str, Any] = {LAUNCHER_KEY: launcher.kind} if launcher is not None else {}
    if launcher is None:
        times[HOST_KEY] = host_facts()

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
    # 2. the plan: pre-trainings (their steps from the preset's time budget, decided once here), fine-tunings,
    # Figure 5's follow-ups (whatever is not finished)
    budget = None
    if preset.step_budget_minutes is not None and launcher is not None:
        echo(f"study: step_budget_minutes is converted on the host that trains; on Slurm every pre-training takes "
             f"max_steps {base.max_steps:,}")
    elif preset.step_budget_minutes is not None:
        from bertbench.studies.budget import study_steps

        budget = stage("budget", lambda: study_steps(preset.step_budget_minutes, base, tokenizer, out,
                                                     stage_threads(base, workers), echo))  # its calibration's time
    stages = Planner(preset, data_dir, out, tokenizer, echo, devices, budget=budget).plan()
    pretrains = trains_tokenizer and any(s.name.startswith("pretrain ") for s in stages)
    if workers > 1 and pretrains and launcher is None:
        # the corpus tokenised here once, with every thread, into the cache that every pre-training then
        # reads: not once per process at the same time on a share of the threads
        stage("corpus", lambda: tokenise_corpus(base, tokenizer))
    if launcher is not None:
        stages = with_corpus_stage(stages, base, tokenizer, pretrains)
        report = (write_report, (out, preset, plots), keep_earlier_stages)
        return launch(job_graph(stages), launcher, out, report, times, echo)
    threads: dict[str, list[int]] = {}
    placed: dict[str, str] = {}
    run_stages_keeping_times(out, stages, workers, echo, times, t_start, threads, preset.fixed_threads, devices, placed,
                             device_kind.kind if device_kind is not None else "cuda", study=preset.name)
    if threads:  # none when every stage was done before
        times[THREADS_KEY] = threads
    if placed:
        times[DEVICES_KEY] = placed
    # 3. the report
    stage("report", lambda: write_report(out, preset, plots))
    times["wall"] = round(time.perf_counter() - t_start, 1)  # every run ends with its wall time (README)
    keep_earlier_stages(out)
    runs = earlier_runs(out)
    atomic_write_json(out / "stages.json", {**times, **({RUNS_KEY: runs} if runs else {})})
    return times


def stage_threads(cfg, workers: int) -> int:
    """The threads a pre-training of `cfg` starts on: every thread alone (studies.plan.runs_alone, or one worker),
    else its share beside the other workers (studies.scheduler)."""
    import torch

    from bertbench.studies.scheduler import thread_shares

    total = torch.get_num_threads()
    return total if workers == 1 or runs_alone(cfg) else thread_shares(total, workers)[-1]


def earlier_runs(out: Path) -> list[dict[str, Any]]:
    """Every earlier invocation of the study in this folder, in order: its stages file and how it ended (its wall
    key: 'wall', or 'wall (interrupted: why)'), so that stages.json shows a study that spans several runs whole."""
    found = []
    for path in sorted(out.glob("stages.*-*.json"), key=lambda p: p.stat().st_mtime):
        data = keys.read_json(path)
        if data is not None:
            walls = {k: v for k, v in data.items() if isinstance(k, str) and k.startswith("wall")}
            found.append({"file": path.name, **walls})
    return found


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
LAUNCHER_KEY = "launcher"  # in a stages file, not a stage: slurm, where the stages were jobs
JOBS_KEY = "jobs"  # in a stages file, not a stage: {stage: its job's id, nodes, start and seconds} (launcher)
DEVICES_KEY = "devices"  # in a stages file, not a stage: {stage: the device it ran on}, with several devices
RUNS_KEY = "runs"  # in stages.json, not a stage: the study's earlier invocations in this folder (earlier_runs)
NOT_STAGES = (HOST_KEY, THREADS_KEY, DEVICES_KEY, LAUNCHER_KEY, JOBS_KEY, RUNS_KEY)


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

    sentences = (s for doc in iter_documents(base.data.corpus, base.data.max_documents, base.data.doc_sentences) for s in doc)
    WordPieceTokenizer.train(sentences, vocab_size=base.tokenizer_vocab_size, lowercase=base.lowercase).save(tok_dir)


def with_corpus_stage(stages: list[Stage], base, tokenizer: str, pretrains: bool) -> list[Stage]:
    """On Slurm the corpus is tokenised by a job the pre-trainings wait for (studies.launcher), not on the login
    node: its stage first, where a pre-training will read the cache."""
    return [Stage(CORPUS_STAGE, tokenise_corpus, (base, tokenizer)), *stages] if pretrains else stages


def tokenise_corpus(base, tokenizer: str) -> None:
    from bertbench.data.corpus import load_tokenized_corpus

    tok = WordPieceTokenizer.load(Path(tokenizer))
    load_tokenized_corpus(base.data.corpus, tok, base.data.max_documents, base.data.num_proc,
                          doc_sentences=base.data.doc_sentences)


def run_stages_keeping_times(out: Path, stages: list[Stage], workers: int, echo: Callable[[str], None],
                             times: dict[str, Any], t_start: float, threads: dict[str, list[int]],
                             fixed_threads: bool, devices: int = 1, placed: Optional[dict[str, str]] = None,
                             device_kind: str = "cuda", study: str = "") -> None:
    """run_stages; if it stops (a failed or killed stage, Ctrl-C, or a SIGTERM to a side-by-side run, which the
    scheduler turns into an exit), the finished stages' times go to `stages.interrupted-<n>.json` before the
    error goes on, so that a study resumed over several invocations keeps every invocation's times (a finished
    one writes `stages.json`)."""
    try:
        run_stages(stages, workers, echo, times, threads, fixed_threads, devices, placed, device_kind)
    except BaseException as err:
        why = type(err).__name__ if not isinstance(err, BertbenchError) else str(err).split("\n")[0][:200]
        atomic_write_json(numbered_stages_file(out, "interrupted"),
                          {**times, f"wall (interrupted: {why})": round(time.perf_counter() - t_start, 1),
                           THREADS_KEY: threads, **({DEVICES_KEY: placed} if placed else {})})
        from bertbench.registration import log_stop

        log_stop(out, why, study)  # a pre-registered study's page lists its stopped runs
        raise


def write_report(out: Path, preset: RunPreset, plots: bool) -> Path:
    """`bertbench report OUT/results --out OUT/<preset>.md --plots OUT/plots`."""
    from bertbench.report.run import make_report

    path = out / f"{preset.name}.md"
    make_report([out / "results"], out=path, csv=out / f"{preset.name}.csv", plots=(out / "plots") if plots else None,
                index=True, warn=lambda message: print(message, file=sys.stderr))
    return path


def print_sbatch_scripts(preset: RunPreset, data_dir: Path, out: Path, launcher: Any, plots: bool, command: str,
                         echo: Callable[[str], None]) -> dict[str, Any]:
    """The sbatch scripts a fresh study submits (`--print-sbatch FOLDER`), written there as <n>-<job>.sbatch,
    with the markdown block docs/scale.md embeds (sbatch.md); nothing is submitted, and nothing is written to
    `out`: the plan is made in a temporary folder, with a stand-in for the tokenizer that is not trained yet."""
    import shutil
    import tempfile

    folder = Path(launcher.print_sbatch)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "study"
        stages = Planner(preset, data_dir, scratch, str(scratch / "tokenizer"), lambda line: None).plan()
        base = variant_config(preset, VariantSpec("base"), data_dir)
        pretrains = (not base.tokenizer or base.tokenizer == "train") and any(s.name.startswith("pretrain ") for s in stages)
        stages = with_corpus_stage(stages, base, str(scratch / "tokenizer"), pretrains)
        scripts = print_sbatch(job_graph(stages), launcher, scratch, (write_report, (scratch, preset, plots),
                                                                        keep_earlier_stages))
        folder.mkdir(parents=True, exist_ok=True)
        for i, (name, _, text) in enumerate(scripts, 1):  # as submitted, in the study folder given
            atomic_write_text(folder / f"{i:02d}-{name.replace(' ', '-')}.sbatch", text.replace(str(scratch), str(out)))
        # on a page: the same on any machine (the interpreter's path is this machine's)
        block = sbatch_markdown(scripts, _what_is_printed(command), {str(scratch): str(out), sys.executable: "python"})
        atomic_write_text(folder / "sbatch.md", block + "\n")
        shutil.rmtree(scratch, ignore_errors=True)
    if launcher.embed is not None:
        name = f"sbatch-{preset.name}"
        text = replace_marked_block(launcher.embed.read_text(encoding="utf-8"), f"<!-- bertbench run: begin {name} -->",
                                    f"<!-- bertbench run: end {name} -->", block, str(launcher.embed))
        atomic_write_text(launcher.embed, text)
    echo(f"wrote {len(scripts)} sbatch scripts to {folder} (nothing submitted)"
         + (f"; embedded them in {launcher.embed}" if launcher.embed is not None else ""))
    return {}


def _what_is_printed(command: str) -> str:
    """`command` without the options that say where files go or come from (--print-sbatch, --embed,
    --data-dir), which change nothing in the scripts: a page's generated line is the same from any folder."""
    import shlex

    words, kept = shlex.split(command), []
    while words:
        word = words.pop(0)
        if word in ("--print-sbatch", "--embed", "--data-dir"):
            words = words[1:]
        else:
            kept.append(word)
    return shlex.join([*kept, "--print-sbatch", "FOLDER"])
