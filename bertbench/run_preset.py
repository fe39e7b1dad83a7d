"""`bertbench run --preset NAME`: raw text → tokenizer → pre-train each variant → fine-tune each on every
task with data → report. One command, re-runnable: a stage whose config hash already has a finished
output is skipped, and an interrupted pre-training resumes from its checkpoint.

Output folder:
    tokenizer-<hash>/               WordPiece trained once on the corpus, shared by every variant
    pretrain/<variant>-<hash>/      a pre-training run directory per variant
    results/<variant>-<hash>/<task>/  result records + predictions files
    <preset>.md, <preset>.csv, plots/   `bertbench report` over results/
    stages.json                     wall time of each stage of the last invocation
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from bertbench.config import PretrainConfig, deep_merge, from_dict, is_causal, load_yaml, resolve_recipe, to_dict
from bertbench.errors import BertbenchError, did_you_mean
from bertbench.training.finetune_settings import FinetuneSettings
from bertbench.paths import RECIPES_DIR

PRESETS_DIR = RECIPES_DIR / "presets"


@dataclass
class VariantSpec:
    name: str  # folder name and the report's provenance key, e.g. "mlm_nsp"
    pretrain: dict = field(default_factory=dict)  # overrides onto the preset's base PretrainConfig
    random_init: bool = False  # no pre-training: the control row (same size, same tokenizer)


@dataclass(kw_only=True)
class FinetuneSpec(FinetuneSettings):
    """A preset's `finetune:` block: the shared fine-tuning settings (the same for every variant), plus which
    tasks run and which extra runs (feature-based, Figure 5) the study makes."""

    tasks: list[str]
    feature_based_tasks: list[str] = field(default_factory=list)  # also run these feature-based (paper Table 7)
    # ... for these variants only (empty: every one); Table 8's feature-based column compares masking procedures
    feature_based_variants: list[str] = field(default_factory=list)
    # The paper's Figure 5: these variants' snapshots (pretrain.snapshots) fine-tuned on these tasks too
    figure5_variants: list[str] = field(default_factory=list)
    figure5_tasks: list[str] = field(default_factory=list)
    figure5_seeds: list[int] = field(default_factory=list)  # empty: the same seeds as the main fine-tunings
    # task → at most this many epochs, each one scored: the (lr, epoch) pair is selected by the grid's rule
    # (FinetuneRequest.select_epoch). A pre-trained tiny model is still learning STS-B and CoLA after 3 epochs,
    # random init overfits them after 2-3: early stopping on the held-out slice gives each its best.
    epoch_selection: dict[str, int] = field(default_factory=dict)


@dataclass
class RunPreset:
    name: str
    description: str
    pretrain: PretrainConfig
    variants: list[VariantSpec]
    finetune: FinetuneSpec
    title: str = ""
    # A recipe (name in recipes/ or a YAML path) that `pretrain` starts from: the preset then writes only the
    # keys it changes, instead of a copy of the recipe that drifts from it.
    recipe: str = ""
    # Stages run this many at a time, each in its own process with an equal share of the threads (1: one
    # after the other in this process); see run_stages. `run --workers` overrides it.
    workers: int = 1


def list_presets() -> dict[str, Path]:
    return {p.stem: p for p in sorted(PRESETS_DIR.glob("*.yaml"))}


def load_preset(name_or_path: str) -> RunPreset:
    p = Path(name_or_path)
    if not (p.suffix in (".yaml", ".yml") and p.is_file()):
        known = list_presets()
        if name_or_path not in known:
            raise BertbenchError(did_you_mean(name_or_path, known, "preset"))
        p = known[name_or_path]
    raw = load_yaml(p)
    if isinstance(raw, dict) and raw.get("recipe"):
        base = load_yaml(resolve_recipe(str(raw["recipe"])))
        raw = {**raw, "pretrain": deep_merge(base, raw.get("pretrain") or {})}
    preset = from_dict(RunPreset, raw, str(p))
    names = [v.name for v in preset.variants]
    if len(set(names)) != len(names):
        raise BertbenchError(f"{p}: variant names repeat: {names}")
    for v in preset.variants:  # every variant's config must be valid before anything runs
        try:
            variant_config(preset, v, Path("."))
        except BertbenchError as err:  # a value check names only the value: say where it came from
            raise BertbenchError(f"{p}: variant {v.name!r}: {err}") from None
    ft = preset.finetune
    ft.check(lambda key: f"{p}: finetune.{key}")
    if bool(ft.figure5_variants) != bool(ft.figure5_tasks):
        raise BertbenchError(f"{p}: finetune.figure5_variants and figure5_tasks go together (Figure 5 needs both)")
    unknown = [name for name in ft.feature_based_variants if name not in names]
    if unknown:
        raise BertbenchError(f"{p}: finetune.feature_based_variants: {unknown} are not variants of this preset ({', '.join(names)})")
    bad = {task: n for task, n in ft.epoch_selection.items() if not isinstance(n, int) or n < 1}
    if bad or (ft.epoch_selection and ft.grid == "none"):
        raise BertbenchError(f"{p}: finetune.epoch_selection {bad or ft.epoch_selection}: "
                             + ("each task's most epochs must be an integer ≥ 1" if bad else "needs grid heldout or paper"))
    if any(seed < 0 for seed in ft.figure5_seeds):
        raise BertbenchError(f"{p}: finetune.figure5_seeds {ft.figure5_seeds}: expected seeds ≥ 0")
    if preset.workers < 1:
        raise BertbenchError(f"{p}: workers {preset.workers}: expected an integer ≥ 1")
    for name in ft.figure5_variants:
        v = next((v for v in preset.variants if v.name == name), None)
        if v is None or v.random_init:
            raise BertbenchError(f"{p}: finetune.figure5_variants: {name!r} is not a pre-trained variant of this preset")
        if variant_config(preset, v, Path(".")).snapshots < 2:
            raise BertbenchError(f"{p}: finetune.figure5_variants: {name!r} keeps no snapshots; set pretrain.snapshots (e.g. 5)")
    return preset


def task_settings(ft: FinetuneSpec, task: str, seeds: Optional[list[int]] = None) -> dict[str, Any]:
    """The fine-tuning settings one task's stage runs with: the shared ones, with Figure 5's seeds where given,
    and the task's most epochs plus epoch selection where `epoch_selection` names it."""
    settings = ft.settings() if seeds is None else {**ft.settings(), "seeds": seeds}
    if task in ft.epoch_selection:
        settings = {**settings, "epochs": ft.epoch_selection[task], "select_epoch": True}
    return settings


def variant_config(preset: RunPreset, variant: VariantSpec, data_dir: Path) -> PretrainConfig:
    merged = deep_merge(to_dict(preset.pretrain), variant.pretrain)
    return from_dict(PretrainConfig, merged, f"preset {preset.name} variant {variant.name}").with_data_dir(data_dir)


def config_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:10]


def run_preset(
    preset: RunPreset, data_dir: Path, out: Path, echo: Callable[[str], None] = print, plots: bool = True,
    workers: Optional[int] = None,
) -> dict[str, Any]:
    """Run every stage not already done; returns {stage: seconds} of this invocation, and its wall time
    under "wall"."""
    from bertbench.model.tokenizer import WordPieceTokenizer

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    workers = preset.workers if workers is None else workers
    if workers < 1:
        raise BertbenchError(f"workers {workers}: expected an integer ≥ 1")
    stages: dict[str, float] = {}
    data_dir = Path(data_dir)
    t_start = time.perf_counter()

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        result = fn()
        stages[name] = round(time.perf_counter() - t0, 1)
        echo(f"[{name}] {stages[name]:.0f} s")
        return result

    # 1. one tokenizer for every variant, so the comparison changes only the objective
    base = variant_config(preset, VariantSpec("base"), data_dir)
    tokenizer_path = base.tokenizer
    trains_tokenizer = not base.tokenizer or base.tokenizer == "train"
    if trains_tokenizer:
        key = config_hash({"corpus": base.data.corpus, "docs": base.data.max_documents, "vocab": base.tokenizer_vocab_size,
                           "lower": base.lowercase})
        tok_dir = out / f"tokenizer-{key}"
        tokenizer_path = str(tok_dir)
        if not (tok_dir / "vocab.txt").is_file():
            def train_tokenizer():
                from bertbench.data.corpus import iter_documents

                sentences = (s for doc in iter_documents(base.data.corpus, base.data.max_documents) for s in doc)
                WordPieceTokenizer.train(sentences, vocab_size=base.tokenizer_vocab_size, lowercase=base.lowercase).save(tok_dir)

            stage("tokenizer", train_tokenizer)
        else:
            echo(f"[tokenizer] done before: {tok_dir}")

    # 2. pre-train each variant (skipped when finished, resumed when interrupted)
    jobs: list[_Stage] = []
    sources: dict[str, tuple[str, str]] = {}  # variant → (model source, results folder name)
    for v in preset.variants:
        cfg = dataclasses.replace(variant_config(preset, v, data_dir), tokenizer=tokenizer_path)
        if v.random_init:
            sources[v.name] = (f"random:{cfg.model_size}", f"{v.name}-{config_hash(['random', cfg.model_size, tokenizer_path])}")
            continue
        h = config_hash(to_dict(cfg))
        run_dir = out / "pretrain" / f"{v.name}-{h}"
        if (run_dir / "summary.json").is_file():
            echo(f"[pretrain {v.name}] done before: {run_dir}")
        else:
            jobs.append(_Stage(f"pretrain {v.name}", _pretrain_stage, (cfg, run_dir), alone=_runs_alone(cfg)))
        sources[v.name] = (str(run_dir / "checkpoint"), f"{v.name}-{h}")
    # the causal LM (the longest, and it runs alone) before the masked LMs pair up, so that fine-tuning
    # stages fill both workers at the end instead of waiting behind it; the sort is stable
    jobs.sort(key=lambda s: not s.alone)
    if workers > 1 and jobs and trains_tokenizer:
        # the corpus tokenised here once, with every thread, into the cache that every pre-training then
        # reads: not once per process at the same time on a share of the threads
        def tokenise_corpus():
            from bertbench.data.corpus import load_tokenized_corpus

            tok = WordPieceTokenizer.load(Path(tokenizer_path))
            load_tokenized_corpus(base.data.corpus, tok, base.data.max_documents, base.data.num_proc)

        stage("corpus", tokenise_corpus)

    # 3. fine-tune each variant on every task with data, one stage per task (a stage waits for its variant's
    # pre-training); then the Figure 5 snapshots on theirs, once their pre-training has written them
    from bertbench.training.finetune_run import FinetuneRequest

    ft = preset.finetune

    def finetune_stages(v: VariantSpec, model: str, folder: str, tasks: list[str], feature_based: bool,
                        label: str, seeds: Optional[list[int]] = None) -> list[_Stage]:
        result = []
        for task in tasks:
            settings = task_settings(ft, task, seeds)
            req = FinetuneRequest(
                model=model, tasks=task, out=out / "results" / folder, data_dir=data_dir,
                tokenizer=tokenizer_path if v.random_init else None, feature_based=feature_based,
                precision=preset.pretrain.precision, **settings,
            )
            marker = req.out / f"done-{task}.json"
            key = _finetune_key(req)
            name = f"finetune {label} {task}"
            if marker.is_file() and json.loads(marker.read_text()).get("key") == key:
                echo(f"[{name}] done before: {req.out}")
                continue
            after = f"pretrain {v.name}" if any(j.name == f"pretrain {v.name}" for j in jobs) else None
            result.append(_Stage(name, _finetune_stage, (req, marker, key), after=after))
        return result

    def figure5_stages(v: VariantSpec) -> list[_Stage]:
        model, folder = sources[v.name]
        snaps = sorted(Path(model).parent.glob("snapshots/step-*"), key=lambda p: int(p.name.split("-")[1]))
        return [s for snap in snaps
                for s in finetune_stages(v, str(snap), f"{folder}-{snap.name}", ft.figure5_tasks, False,
                                         f"{v.name} {snap.name}", seeds=ft.figure5_seeds or None)]

    for v in preset.variants:
        model, folder = sources[v.name]
        jobs += finetune_stages(v, model, folder, ft.tasks, False, v.name)
        features = [t for t in ft.tasks if t in ft.feature_based_tasks
                    and (not ft.feature_based_variants or v.name in ft.feature_based_variants)]
        jobs += finetune_stages(v, model, folder + "-features", features, True, f"{v.name} features")
    for v in (v for v in preset.variants if v.name in ft.figure5_variants):
        pretraining = next((j for j in jobs if j.name == f"pretrain {v.name}"), None)
        if pretraining is None:
            jobs += figure5_stages(v)
        else:  # its snapshots exist only once it has run
            pretraining.then = lambda v=v: figure5_stages(v)

    run_stages_keeping_times(out, jobs, workers, echo, stages, t_start)

    # 4. the report
    stage("report", lambda: write_report(out, preset, plots))
    stages["wall"] = round(time.perf_counter() - t_start, 1)  # every run ends with its wall time (README)
    from bertbench.runtime.files import atomic_write_json

    atomic_write_json(out / "stages.json", stages)
    return stages


def run_stages_keeping_times(out: Path, jobs: list["_Stage"], workers: int, echo: Callable[[str], None],
                             stages: dict[str, float], t_start: float) -> None:
    """run_stages; if it stops (a failed stage, Ctrl-C, or a SIGTERM to a side-by-side run, which run_stages turns
    into an exit), the finished stages' times go to `stages.interrupted-<n>.json` before the error goes on, so
    that a study resumed over several invocations keeps every invocation's times (a finished one writes
    `stages.json`)."""
    try:
        run_stages(jobs, workers, echo, stages)
    except BaseException as err:
        from bertbench.runtime.files import atomic_write_json

        n = 1 + len(list(out.glob("stages.interrupted-*.json")))
        why = type(err).__name__ if not isinstance(err, BertbenchError) else str(err).split("\n")[0][:200]
        atomic_write_json(out / f"stages.interrupted-{n}.json",
                          {**stages, f"wall (interrupted: {why})": round(time.perf_counter() - t_start, 1)})
        raise


@dataclass
class _Stage:
    name: str
    fn: Callable[..., None]  # a module-level function, so that a worker process can be handed it
    args: tuple
    after: Optional[str] = None  # a stage of this invocation that must have finished first
    then: Optional[Callable[[], list["_Stage"]]] = None  # stages known only once this one has run
    alone: bool = False  # runs by itself, in the main process with every thread (see _runs_alone)


def _runs_alone(cfg: PretrainConfig) -> bool:
    # The causal LM's logits (every position x the vocabulary: 4,096 x 8,192 a step in cpu-hour) are memory
    # traffic, not arithmetic: tiny at 2 threads alone made 36.6k tok/s (cpu-quick), at 1 thread beside a
    # masked LM 8.7k (the first cpu-hour attempt). It takes the whole machine; the masked LMs pair up.
    return is_causal(cfg.objective)


def _pretrain_stage(cfg: PretrainConfig, run_dir: Path) -> None:
    from bertbench.training.pretrain_run import pretrain

    pretrain(cfg, run_dir, resume="auto")


# Request fields added after studies were committed, left out of a stage's key while at their default: a
# finished stage stays finished when the code learns a setting that it did not use.
_KEY_OMITS_AT_DEFAULT = ("select_epoch",)


def _finetune_key(req) -> str:
    defaults = {f.name: f.default for f in dataclasses.fields(req) if f.name in _KEY_OMITS_AT_DEFAULT}
    fields = {k: val for k, val in dataclasses.asdict(req).items() if not (k in defaults and val == defaults[k])}
    return config_hash({k: str(val) for k, val in fields.items()})


def _finetune_stage(req, marker: Path, key: str, echo: Optional[Callable[[str], None]] = None) -> None:
    from bertbench.runtime.files import atomic_write_json
    from bertbench.training.finetune_run import run_finetune

    from bertbench.runtime.progress import say

    run_finetune(req, echo=echo or say)
    atomic_write_json(marker, {"key": key})


def _init_worker(threads: int, quiet: bool) -> None:
    import torch

    torch.set_num_threads(threads)
    if quiet:  # a spawned worker starts with Python's defaults: silence what the main process silenced
        from bertbench.runtime.quiet import silence_library_noise

        silence_library_noise()


def _timed(fn: Callable[..., None], *args: Any, **kwargs: Any) -> float:
    t0 = time.perf_counter()
    fn(*args, **kwargs)
    return round(time.perf_counter() - t0, 1)


def run_stages(jobs: list[_Stage], workers: int, echo: Callable[[str], None], stages: dict[str, float]) -> None:
    """Run `jobs` in list order as their `after` stages finish: one after the other in this process when
    `workers` is 1, else `workers` at a time, each in its own process with an equal share of the threads.
    A small model uses two cores poorly from one process (a tiny fine-tuning: 8 s on two threads, 9 s on
    one, so two side by side do 1.8x the work); each stage keeps its own seeds, so only the order of
    floating-point sums changes. A stage marked `alone` waits until nothing else runs, then runs in this
    process with every thread, and nothing starts beside it."""
    pending = list(jobs)
    finished: set[str] = set()

    def complete(job: _Stage, seconds: float) -> None:
        stages[job.name] = seconds
        finished.add(job.name)
        echo(f"[{job.name}] {seconds:.0f} s")
        if job.then is not None:
            pending.extend(job.then())

    def next_ready() -> Optional[_Stage]:
        job = next((j for j in pending if j.after is None or j.after in finished), None)
        if job is not None:
            pending.remove(job)
        return job

    def run_here(job: _Stage) -> None:  # in this process, with every thread
        echo(f"[{job.name}] started")
        kwargs = {"echo": echo} if job.fn is _finetune_stage else {}
        complete(job, _timed(job.fn, *job.args, **kwargs))

    if workers == 1:
        while (job := next_ready()) is not None:
            run_here(job)
        return

    import multiprocessing
    import signal
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    import torch

    from bertbench.runtime.quiet import is_quiet

    threads = max(1, torch.get_num_threads() // workers)
    echo(f"{workers} stages at a time, {threads} thread(s) each")
    # spawn, not fork: a forked child of a process that has started torch's thread pool can hang
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker, initargs=(threads, is_quiet()))
    running: dict = {}
    # a `kill` (SIGTERM) ends the workers too, as Ctrl-C does; each stage resumes or reruns next time
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        while pending or running:
            while len(running) < workers and (job := next_ready()) is not None:
                if job.alone:
                    if running:  # it waits until the others are done, and nothing new starts meanwhile
                        pending.insert(0, job)
                        break
                    run_here(job)
                    continue
                echo(f"[{job.name}] started")
                running[pool.submit(_timed, job.fn, *job.args)] = job
            if not running:
                if pending:  # nothing ready, nothing running: what is left waits on a stage that will not run
                    raise BertbenchError(f"stages {', '.join(j.name for j in pending)} wait on stages that did not run")
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                job = running.pop(future)
                try:
                    seconds = future.result()
                except BertbenchError as err:
                    raise BertbenchError(f"[{job.name}] {err}") from None
                complete(job, seconds)
    except BaseException:
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
        pool.shutdown(wait=True, cancel_futures=True)


def write_report(out: Path, preset: RunPreset, plots: bool) -> Path:
    """`bertbench report OUT/results --out OUT/<preset>.md --plots OUT/plots`."""
    from bertbench.report.run import make_report

    path = out / f"{preset.name}.md"
    make_report([out / "results"], out=path, csv=out / f"{preset.name}.csv", plots=(out / "plots") if plots else None, index=True,
                warn=lambda message: print(message, file=sys.stderr))
    return path
