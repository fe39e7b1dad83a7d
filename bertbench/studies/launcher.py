"""`run --launcher slurm`: a study's stages as Slurm jobs, through submitit (PyPI; imported here only).

The same plan as the one-node scheduler (studies.plan: only the stages not done, keyed as always), as a graph of
jobs (`job_graph`) submitted at once with Slurm's dependencies; the report job writes stages.json, with each stage
job's record from jobs/records/. docs/scale.md ("A study on Slurm") says what each job runs and asks for, and how a
time limit's warning (`--signal=USR2@S`) checkpoints and requeues a job; `print_sbatch` writes the scripts
submitit writes for the graph, submitting nothing (a stand-in `sbatch` takes them).
"""
from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from bertbench.errors import BertbenchError
from bertbench.runtime.files import atomic_write_json
from bertbench.studies.keys import read_json
from bertbench.studies.scheduler import Stage

LAUNCHERS = ("slurm",)
JOBS_DIR = "jobs"  # under the study folder: submitit's folder (scripts, pickles, logs) and records/
JOBS_KEY = "jobs"  # in a stages file, not a stage: {stage: {job_id, nodes, started, seconds}}
# What each kind of job runs (a comment in its script; submitit's pickle in JOBS_DIR holds the call itself)
JOB_RUNS = {
    "corpus": "runs the corpus's tokenising into its cache, as `bertbench run` does first on one machine:",
    "pretrain": "runs `bertbench pretrain` of this stage's config in every task (--resume auto), then records it:",
    "finetune": "runs, as element $SLURM_ARRAY_TASK_ID, one fine-tuning stage of `bertbench run`:",
    "follow-ups": "plans and runs the fine-tunings of the pre-training's snapshots (Figure 5), after it:",
    "report": "writes the study's report and stages.json once every other job has succeeded:",
}
CORPUS_STAGE = "corpus"  # the corpus's token cache, made by a job before the pre-trainings (not the login node)
# Requeues after a time limit's warning before a job is left failed (submitit's max_num_timeout; a pre-emption
# does not count): a pre-training longer than its --time resumes this many times.
MAX_REQUEUES = 20
REQUEUE_WAIT_SECONDS = 60  # a pre-training's other tasks wait this long for the first task's requeue to end them


@dataclass
class LauncherOptions:
    kind: str  # slurm
    partition: Optional[str] = None
    account: Optional[str] = None
    gpus_per_node: int = 0  # per pre-training node, one task each; a fine-tuning takes one (none where 0)
    nodes: int = 1  # per pre-training
    time_min: int = 240  # each job's time limit
    cpus_per_task: Optional[int] = None
    signal_s: Optional[int] = None  # Slurm's warning (USR2) this many seconds before the time limit (default:
    # submitit's 90, or half of a shorter --time)
    mem_gb: Optional[int] = None  # memory per node for every job (default: each job's needs, studies.slurm_needs)
    cpu_partition: Optional[str] = None  # the jobs without a GPU (report, tokenising); default: partition
    wckey: Optional[str] = None  # Slurm's workload key, only where asked for
    print_sbatch: Optional[Path] = None  # write the scripts there, submit nothing
    embed: Optional[Path] = None  # ... and put them between a page's markers (docs/scale.md)

    def __post_init__(self) -> None:
        if self.kind == "local":
            raise BertbenchError("--launcher local: gone; without --launcher the study runs on this machine "
                                 "(its own scheduler: dependencies, signals, threads)")
        if self.kind not in LAUNCHERS:
            raise BertbenchError(f"--launcher {self.kind}: expected one of {', '.join(LAUNCHERS)}")
        for flag, value in (("--nodes", self.nodes), ("--time", self.time_min)):
            if value < 1:
                raise BertbenchError(f"{flag} {value}: expected an integer ≥ 1")
        if self.mem_gb is not None and self.mem_gb < 1:
            raise BertbenchError(f"--mem {self.mem_gb}: expected a number of GB ≥ 1")
        if self.gpus_per_node < 0:
            raise BertbenchError(f"--gpus-per-node {self.gpus_per_node}: expected an integer ≥ 0")
        if self.signal_s is None:
            self.signal_s = min(90, 30 * self.time_min)
        if not 0 < self.signal_s < 60 * self.time_min:
            raise BertbenchError(f"--signal-seconds {self.signal_s}: expected a number of seconds between 1 and "
                                 f"--time's {60 * self.time_min} (Slurm's warning comes that long before the limit)")
        if self.embed is not None and self.print_sbatch is None:
            raise BertbenchError("--embed puts the scripts of --print-sbatch in a page: give --print-sbatch too")
        if self.embed is not None and not self.embed.is_file():
            raise BertbenchError(f"--embed {self.embed}: no such file")


@dataclass
class Job:
    name: str
    kind: str  # corpus | pretrain | finetune | follow-ups | report
    stages: list[Stage]  # its stage, or an array's elements (none for the report)
    after: list[str] = field(default_factory=list)  # the jobs it waits for (afterok)

    @property
    def array(self) -> bool:
        return self.kind == "finetune"


def job_graph(stages: list[Stage]) -> list[Job]:
    """The jobs of a plan, each after the ones it depends on; the report last, after all of them."""
    corpus = [s for s in stages if s.name == CORPUS_STAGE]
    pretrainings = [s for s in stages if s.name.startswith("pretrain ")]
    jobs = [Job(s.name, "corpus", [s]) for s in corpus]
    jobs += [Job(s.name, "pretrain", [s], [s.name for s in corpus]) for s in pretrainings]
    arrays: dict[Optional[str], list[Stage]] = {}
    for s in stages:
        if s not in pretrainings and s not in corpus:
            arrays.setdefault(s.after, []).append(s)
    for after, group in arrays.items():
        jobs.append(Job(f"finetune after {after}" if after else "finetune", "finetune", group,
                        [after] if after else []))
    jobs += [Job(f"{s.name} follow-ups", "follow-ups", [s], [s.name]) for s in pretrainings if s.then is not None]
    return [*jobs, Job("report", "report", [], [j.name for j in jobs])]


# -- what runs inside a job ---------------------------------------------------------------------------------


def _record(records: Path, invocation: str, name: str, started: float) -> None:
    """This stage's job id, nodes, start and wall time, beside the others of its invocation."""
    import submitit

    env = submitit.JobEnvironment()
    if env.global_rank != 0:  # one record per stage, however many tasks ran it
        return
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
    atomic_write_json(records / f"{safe}.json", {
        "stage": name, "invocation": invocation, "job_id": env.job_id, "nodes": list(env.hostnames),
        "started": round(started, 3), "seconds": round(time.time() - started, 1)})


class StageJob:
    """A stage as a job's function: it runs the stage and records it. submitit's checkpointable (`checkpoint`): a
    pre-training stopped by Slurm's warning signal hands it back to submitit, which requeues the job with the same
    call, so it resumes from its checkpoint (docs/scale.md, "Time limits, pre-emption and requeue")."""

    def __call__(self, stage_fn: Callable[..., None], args: tuple, name: str, records: Path, invocation: str) -> None:
        from bertbench.training.stop_signals import WARNING_SIGNAL, Interrupted

        started = time.time()
        try:
            stage_fn(*args)
        except Interrupted as stop:
            if stop.signum != WARNING_SIGNAL:
                raise  # scancel or a pre-emption's SIGTERM: the job ends; its checkpoint stays for a rerun
            import signal

            from bertbench.runtime.devices import first_process

            if first_process():  # submitit's handler is back in place (the run restored it): it requeues, exits
                signal.raise_signal(WARNING_SIGNAL)
            else:  # another task: the first requeues the job, which ends this one (were it to exit first, srun's
                time.sleep(REQUEUE_WAIT_SECONDS)  # --kill-on-bad-exit could end the first before its requeue)
            raise SystemExit(1) from None
        _record(records, invocation, name, started)

    def checkpoint(self, *args: Any) -> Any:
        """What submitit runs when it requeues the job: this same call."""
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self, *args)


run_stage_job = StageJob()


def run_follow_ups_job(then: Callable[[], list[Stage]], records: Path, invocation: str) -> None:
    for stage in then():  # planned now: its pre-training's snapshots exist
        run_stage_job(stage.fn, stage.args, stage.name, records, invocation)


def run_report_job(report: tuple[Callable[..., Any], tuple], keep_earlier: Callable[[Path], None], out: Path,
                   records: Path, invocation: str, times: dict[str, Any], t_submit: float) -> None:
    """The report (`report`: studies.run's write_report and its arguments), then stages.json (the one before
    kept by `keep_earlier`, studies.run's keep_earlier_stages): passed in, as this module is below studies.run."""
    started = time.time()
    report[0](*report[1])
    times = {**invocation_times(records, invocation, times), "report": round(time.time() - started, 1)}
    times["wall"] = round(time.time() - t_submit, 1)  # from the first submission to the report's end
    keep_earlier(out)
    atomic_write_json(out / "stages.json", times)


def invocation_times(records: Path, invocation: str, times: dict[str, Any]) -> dict[str, Any]:
    """`times` (what ran before the jobs) with each stage job's seconds of this invocation, and its job under
    JOBS_KEY, in the order they started."""
    found = [r for r in map(read_json, sorted(records.glob("*.json")))
             if r is not None and r.get("invocation") == invocation]
    found.sort(key=lambda r: r["started"])
    out = {**times, **{r["stage"]: r["seconds"] for r in found}}
    out[JOBS_KEY] = {r["stage"]: {k: r[k] for k in ("job_id", "nodes", "started", "seconds")} for r in found}
    return out


# -- submitting ---------------------------------------------------------------------------------------------


def launch(jobs: list[Job], opts: LauncherOptions, out: Path, report: tuple, times: dict[str, Any],
           echo: Callable[[str], None]) -> dict[str, Any]:
    """Submit the graph to Slurm; returns {} (the report job writes the stage times)."""
    import uuid

    folder = out / JOBS_DIR
    records = folder / "records"
    records.mkdir(parents=True, exist_ok=True)
    invocation = uuid.uuid4().hex[:12]
    t_submit = time.time()
    calls = {j.name: _calls(j, opts, out, report, records, invocation, times, t_submit) for j in jobs}
    ids = _submit_slurm(jobs, calls, opts, folder, echo)
    echo(f"submitted {len(ids)} jobs; the report job ({ids['report']}) writes {out / 'stages.json'} when every "
         "stage is done (squeue --me shows them)")
    return {}


def _calls(job: Job, opts: LauncherOptions, out: Path, report: tuple, records: Path, invocation: str,
           times: dict[str, Any], t_submit: float) -> list[tuple]:
    """Each (function, args) the job runs: one, or an array's elements. `report`: (write the report, its
    arguments, keep the earlier stages.json)."""
    if job.kind == "report":
        return [(run_report_job, (report[:2], report[2], out, records, invocation, times, t_submit))]
    if job.kind == "follow-ups":
        return [(run_follow_ups_job, (job.stages[0].then, records, invocation))]
    if job.kind == "pretrain":
        return [(run_stage_job, _on_allocation(job.stages[0], opts) + (job.name, records, invocation))]
    return [(run_stage_job, (s.fn, s.args, s.name, records, invocation)) for s in job.stages]


def _on_allocation(stage: Stage, opts: LauncherOptions) -> tuple:
    """A pre-training as Slurm runs it: in each task of the job (srun starts one per GPU and node), with the
    config's devices and nodes those of the allocation, so that Lightning joins the tasks and launches nothing."""
    from bertbench.studies.plan import _pretrain_stage

    cfg, run_dir, key = stage.args[:3]
    tasks = max(1, opts.gpus_per_node)
    world = {"devices": str(tasks), "num_nodes": opts.nodes,
             "strategy": "ddp" if tasks * opts.nodes > 1 else cfg.strategy,
             "accelerator": "cuda" if opts.gpus_per_node else cfg.accelerator}
    return (_pretrain_stage, (dataclasses.replace(cfg, **world), run_dir, key))


def needs(job: Job, opts: LauncherOptions):
    """What the job's stages need (studies.slurm_needs): CPUs per task, memory per node."""
    from bertbench.studies import slurm_needs

    if job.kind == "pretrain":
        return slurm_needs.pretrain_needs(job.stages[0].args[0], max(1, opts.gpus_per_node), opts.gpus_per_node > 0)
    if job.kind in ("finetune", "follow-ups"):
        return slurm_needs.finetune_needs(opts.gpus_per_node > 0)
    if job.kind == "corpus":
        return slurm_needs.corpus_needs(job.stages[0].args[0])
    return slurm_needs.light_needs()


def resources(job: Job, opts: LauncherOptions) -> dict[str, Any]:
    """submitit's SlurmExecutor parameters of a job (sbatch's names). A job that needs no GPU asks for none (not
    for zero, which some sites refuse on a GPU partition) and goes to --cpu-partition."""
    pretrain = job.kind == "pretrain"
    gpus = opts.gpus_per_node if pretrain else min(1, opts.gpus_per_node) if job.kind in ("finetune", "follow-ups") else 0
    need = needs(job, opts)
    params: dict[str, Any] = {
        "job_name": f"bertbench {job.name}", "time": opts.time_min, "nodes": opts.nodes if pretrain else 1,
        "ntasks_per_node": max(1, gpus) if pretrain else 1,
        "cpus_per_task": opts.cpus_per_task or need.cpus_per_task,
        "mem": f"{opts.mem_gb or need.mem_gb}G",
        "signal_delay_s": opts.signal_s,  # Slurm's warning, that long before the time limit
        "wckey": opts.wckey,  # None: no --wckey line (submitit's default writes its own name)
        # what the job runs, said in its script: srun's command only names submitit's pickle of the call
        "setup": [f"# {JOB_RUNS[job.kind]}"] + [f"#   {'element ' + str(k) + ': ' if job.array else ''}{s.name}"
                                                 for k, s in enumerate(job.stages)],
    }
    if gpus:
        params["gpus_per_node"] = gpus
    if pretrain:  # one task failing ends the others (a DDP rank left alone would wait for its peers until --time)
        params["srun_args"] = ["--kill-on-bad-exit=1"]
    partition = opts.partition if gpus or not opts.cpu_partition else opts.cpu_partition
    if partition:
        params["partition"] = partition
    if opts.account:
        params["account"] = opts.account
    return params


def _submit_slurm(jobs: list[Job], calls: dict[str, list[tuple]], opts: LauncherOptions, folder: Path,
                  echo: Callable[[str], None]) -> dict[str, str]:
    """Every job at once, each with `afterok` on the jobs it waits for; {job name: its Slurm job id}."""
    import submitit

    ids: dict[str, str] = {}
    for job in jobs:
        # a job whose dependency failed is cancelled, not left pending for ever
        extra = {"kill-on-invalid-dep": "yes"}
        if job.after:
            extra["dependency"] = "afterok:" + ":".join(ids[name] for name in job.after)
        # an executor per job: parameters accumulate, and one job's GPUs would stay on the next job's script
        executor = submitit.SlurmExecutor(folder=folder, max_num_timeout=MAX_REQUEUES)
        executor.update_parameters(**resources(job, opts), additional_parameters=extra)
        with executor.batch():
            submitted = [executor.submit(fn, *args) for fn, args in calls[job.name]]
        ids[job.name] = submitted[0].job_id.split("_")[0]  # an array's id: afterok on it waits for every element
        names = [s.name for s in job.stages] or [job.name]
        echo(f"[{job.name}] job {ids[job.name]}" + (f" (array: {', '.join(names)})" if job.array else "")
             + (f", after {', '.join(job.after)}" if job.after and job.kind != "report" else ""))
    return ids


def print_sbatch(jobs: list[Job], opts: LauncherOptions, out: Path, report: tuple) -> list[tuple[str, str, str]]:
    """[(job name, its kind, the sbatch script submitit writes for it)] for the graph, submitting nothing: submitit runs
    a stand-in `sbatch` that answers with made-up job ids (1001, 1002, …, in submission order)."""
    import shutil
    import stat
    import tempfile

    with tempfile.TemporaryDirectory() as bin_dir:
        counter = Path(bin_dir) / "count"
        fake = {"srun": "#!/bin/sh\nexit 0\n",
                "sbatch": f"#!/bin/sh\nn=$(($(cat {counter} 2>/dev/null || echo 1000) + 1))\necho $n > {counter}\n"
                          "echo \"Submitted batch job $n\"\n"}
        for name, text in fake.items():
            path = Path(bin_dir) / name
            path.write_text(text)
            path.chmod(path.stat().st_mode | stat.S_IEXEC)
        path_before = os.environ.get("PATH", "")
        os.environ["PATH"] = os.pathsep.join([bin_dir, path_before])
        try:
            assert shutil.which("sbatch", path=os.environ["PATH"]).startswith(bin_dir)
            folder = out / JOBS_DIR
            calls = {j.name: _calls(j, opts, out, report, folder / "records", "print-sbatch", {}, 0.0)
                     for j in jobs}
            ids = _submit_slurm(jobs, calls, opts, folder, lambda line: None)
        finally:
            os.environ["PATH"] = path_before
    return [(job.name, job.kind, (folder / f"{ids[job.name]}_submission.sh").read_text()) for job in jobs]


def sbatch_markdown(scripts: list[tuple[str, str, str]], command: str, replace: dict[str, str]) -> str:
    """The scripts as a generated block of markdown (docs/scale.md): the first of each kind of job whole, each
    other one by the lines in which it differs from that one; `replace`: machine-specific text (the
    interpreter's path, a temporary folder) → what the page shows instead."""
    lines = [f"_Generated by `{command}`; do not edit between the markers._", ""]
    first: dict[str, list[str]] = {}
    for name, kind, text in scripts:
        for old, new in replace.items():
            text = text.replace(old, new)
        own = text.rstrip("\n").splitlines()
        if kind not in first:
            first[kind] = own
            lines += [f"`{name}`:", "", "```bash", *own, "```", ""]
        else:
            differ = [line for line in own if line not in first[kind]]
            lines += [f"`{name}`, as the first {kind} job but for:", "", "```bash", *differ, "```", ""]
    return "\n".join(lines)
