"""`bertbench run`: every preset validates; the smoke preset runs raw text → report on the real data."""
from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.studies.preset import list_presets, load_preset
from tests.slurm_cluster import cluster_fixture

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["smoke", "cpu-quick", "cpu-hour", "cpu-hour-wide", "paper-base", "gpu-quick"])
def test_presets_validate(name):
    assert name in list_presets()
    r = runner.invoke(app, ["run", "--preset", name, "--validate"])
    assert r.exit_code == 0 and "valid" in r.output, r.output


@pytest.mark.parametrize("finetune, message", [
    ({"figure5_variants": ["mlm_nsp"]}, "go together"),
    ({"figure5_variants": ["random"], "figure5_tasks": ["rte"]}, "not a pre-trained variant"),
    ({"figure5_variants": ["nope"], "figure5_tasks": ["rte"]}, "not a pre-trained variant"),
])
def test_figure5_settings_are_checked(tmp_path, finetune, message):
    import yaml

    from bertbench.errors import BertbenchError
    from bertbench.studies.preset import list_presets

    preset = yaml.safe_load(list_presets()["smoke"].read_text())
    preset["finetune"] = {k: v for k, v in preset["finetune"].items() if not k.startswith("figure5")} | finetune
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(preset))
    with pytest.raises(BertbenchError, match=message):
        load_preset(str(path))
    preset["pretrain"].pop("snapshots")
    preset["finetune"].update(figure5_variants=["mlm_nsp"], figure5_tasks=["rte"])
    path.write_text(yaml.safe_dump(preset))
    with pytest.raises(BertbenchError, match="keeps no snapshots"):
        load_preset(str(path))


@pytest.mark.parametrize("finetune, message", [
    ({"figure5_seeds": [-1]}, "expected seeds ≥ 0"),
    ({"feature_based_variants": ["mlm_nsp", "bert"]}, r"\['bert'\] are not variants of this preset"),
    ({"grid": "heldout", "epoch_selection": {"rte": 0}}, r"epoch_selection \{'rte': 0\}: each task's most epochs"),
    ({"epoch_selection": {"rte": 4}}, "needs grid heldout or paper"),  # smoke's grid is none
])
def test_which_runs_a_study_makes_are_checked(tmp_path, finetune, message):
    import yaml

    from bertbench.errors import BertbenchError

    preset = yaml.safe_load(list_presets()["smoke"].read_text())
    preset["finetune"] |= finetune
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(preset))
    with pytest.raises(BertbenchError, match=message):
        load_preset(str(path))


def test_epoch_selection_reaches_its_tasks_only_and_keeps_other_stages_done(tmp_path):
    import dataclasses

    from bertbench.studies.keys import finetune_done, finetune_key, write_key
    from bertbench.training.finetune_run import FinetuneRequest

    req = FinetuneRequest(model="m", tasks="rte", out=tmp_path, grid="heldout")
    marker = tmp_path / "done-rte.json"
    write_key(marker, finetune_key(req, "rte", "model"))
    assert finetune_done(marker, finetune_key(req, "rte", "model"))  # a finished stage stays finished
    selecting = dataclasses.replace(req, select_epoch=True)  # a stage that selects epochs reruns
    assert not finetune_done(marker, finetune_key(selecting, "rte", "model"))


def test_cpu_hour_wide_is_cpu_hour_with_a_wider_model():
    """Its header says each cell compares with cpu-hour's row of the same seed: the same pre-training but for the
    model size, the same fine-tuning, the same pre-training seeds for MLM+NSP, and random init of its own size."""
    from bertbench.studies.preset import pretrain_seeds, variant_config

    hour, wide = load_preset("cpu-hour"), load_preset("cpu-hour-wide")
    assert wide.finetune == hour.finetune
    by_name = {v.name: v for v in hour.variants}
    for v in wide.variants:
        assert pretrain_seeds(wide, v) == pretrain_seeds(hour, by_name[v.name])
        a, b = (variant_config(p, spec, Path("/data")) for p, spec in ((hour, by_name[v.name]), (wide, v)))
        assert b.model_size == "L2-H256" and a.model_size == "tiny"
        assert dataclasses.replace(b, model_size=a.model_size) == a, v.name


def test_epoch_selection_applies_to_the_tasks_it_names():
    from bertbench.studies.preset import task_settings

    ft = load_preset("cpu-hour").finetune
    assert ft.epoch_selection, "cpu-hour selects epochs on its small tasks"
    for task in ft.tasks:
        settings = task_settings(ft, task)
        if task in ft.epoch_selection:
            assert settings["epochs"] == ft.epoch_selection[task] and settings["select_epoch"] is True
        else:
            assert settings["epochs"] == ft.epochs and "select_epoch" not in settings
    assert task_settings(ft, "stsb", seeds=[7])["seeds"] == [7]


def test_unknown_preset_did_you_mean():
    r = runner.invoke(app, ["run", "--preset", "smok", "--validate"])
    assert r.exit_code == 2 and "Did you mean: smoke" in r.output


@pytest.fixture(scope="module")
def smoke_study(tmp_path_factory):
    """The smoke study, run once by the one-node scheduler as a user runs it (its own process, progress lines on,
    a 100-column terminal): (its folder, what it printed, stderr first, its stages.json as first written). Its
    records are what the other ways of running it must reproduce."""
    from conftest import SHARED_DATA as shared_data

    if not shared_data.is_dir():
        pytest.skip(f"{shared_data} is absent")
    out = tmp_path_factory.mktemp("smoke-study") / "smoke"
    r = _bertbench(["run", "--preset", "smoke", "--data-dir", str(shared_data), "--out", str(out)], progress=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out, r.stderr + r.stdout, json.loads((out / "stages.json").read_text())


def _bertbench(args: list[str], progress: bool = False) -> subprocess.CompletedProcess:
    """`bertbench ARGS` in a fresh Python from this checkout, in a 100-column terminal (test_quiet's helper: with
    `progress`, a line at every step, as when the output is redirected)."""
    from tests.test_quiet import _bertbench as bertbench_process

    return bertbench_process(args, {"PYTHONPATH": str(ROOT), "COLUMNS": "100"}, progress, timeout=900)


def assert_our_lines_only(output: str, out: Path) -> None:
    """Every line printed is one of bertbench's (tests/test_quiet.py's allow-list), and the results table sits in
    it whole, exactly as bertbench renders these records in 100 columns."""
    from rich.console import Console

    from bertbench.report.model import collect
    from bertbench.report.render.terminal import print_short
    from bertbench.results import load_records
    from tests.test_quiet import foreign_lines

    table = io.StringIO()
    print_short(collect(load_records([out / "results"])), out / "smoke.md", Console(file=table, width=100))
    assert not foreign_lines(output, table.getvalue().splitlines())


@pytest.mark.integration
@pytest.mark.slow
def test_the_smoke_study_prints_our_lines_only(smoke_study):
    """Stages in this process (one worker); the two-worker run below checks the spawned workers' lines."""
    out, output, _ = smoke_study
    assert "pretrain step 12/12" in output  # progress was on
    assert_our_lines_only(output, out)


@pytest.mark.integration
@pytest.mark.slow
def test_smoke_preset_end_to_end_and_rerun_skips(smoke_study, shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("BERTBENCH_PROGRESS", "0")
    out, output, stages = smoke_study
    report = (out / "smoke.md").read_text()
    assert report.startswith("<!-- generated by bertbench report; do not edit -->")
    for column in ("tiny MLM+NSP", "tiny LTR (causal)", "tiny random init", "BERT-Base", "OpenAI GPT"):
        assert column in report, column
    for task in ("rte", "stsb", "conll2003"):
        assert f"| {task} |" in report
    assert (out / "plots" / "pretraining_curves.png").is_file()
    # 3 variants x 3 tasks, and the Figure 5 stage: 2 snapshots x 2 variants on RTE
    assert len(list((out / "results").rglob("*.record.json"))) == 9 + 4
    assert {"tokenizer", "pretrain mlm_nsp", "pretrain ltr", "finetune random rte", "finetune random conll2003",
            "finetune mlm_nsp step-4 rte", "finetune ltr step-8 rte", "report", "wall"} <= set(stages)
    assert re.search(r"^stage times: .*, wall \d+ s$", output, re.M)  # a one-worker run ends with its wall time
    # and says where it ran: the host's matmul peak, measured, beside its times
    assert stages["host"]["hardware"] and all(stages["host"]["matmul_gflops_per_s"][p] > 0 for p in ("fp32", "bf16"))
    # the snapshots and the final model are one series per objective: a Figure 5 table and plot, no extra columns
    assert "## Figure 5" in report or "Figure 5 at our scale" in report
    assert (out / "plots" / "figure5.rte.v1.dev.accuracy.png").is_file()
    assert "[" not in report.split("| Task |")[1].split("\n")[0]  # no fingerprint-suffixed duplicate column
    # a second run finds every stage done (by config hash) and only re-renders the report
    before = (out / "smoke.md").read_bytes()
    r = runner.invoke(app, ["run", "--preset", "smoke", "--data-dir", str(shared_data), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "done before" in r.output
    rerun = json.loads((out / "stages.json").read_text())
    assert set(rerun) == {"host", "report", "wall", "runs"}  # runs: the study's earlier run in this folder
    assert [r["file"] for r in rerun["runs"]] == ["stages.earlier-1.json"] and "wall" in rerun["runs"][0]
    assert json.loads((out / "stages.earlier-1.json").read_text()) == stages  # the first invocation's times kept
    assert (out / "smoke.md").read_bytes() == before  # deterministic report
    # ... and so does a run in a copy of the study folder elsewhere (stages are keyed on content, not paths)
    moved = tmp_path / "elsewhere" / "smoke-moved"
    shutil.copytree(out, moved)
    r = runner.invoke(app, ["run", "--preset", "smoke", "--data-dir", str(shared_data), "--out", str(moved)])
    assert r.exit_code == 0, r.output
    assert set(json.loads((moved / "stages.json").read_text())) == {"host", "report", "wall", "runs"}, r.output
    # (a second run from scratch, its pre-trainings stopped at Slurm's time limit and requeued, gives the same
    # records: the one on a Slurm cluster below, test_the_smoke_study_on_slurm_survives_its_time_limit_...)
    first = records_without_timings(out)
    assert len(first) == 13
    # side by side: two stages at a time, each in its own process on one thread; the corpus is tokenised once
    # before them, the Figure 5 stages wait for their snapshots, and the records are the same ones
    parallel = tmp_path / "smoke-parallel"
    argv = ["run", "--preset", "smoke", "--data-dir", str(shared_data), "--out", str(parallel), "--workers", "2"]
    # a worker killed (-9, as the out-of-memory killer does) in its first RTE fine-tuning: one line naming the
    # stage and the signal, a non-zero exit, no traceback; the rerun keeps the stages that finished
    killed = subprocess.run([sys.executable, "-m", "bertbench.cli", *argv], capture_output=True, text=True, timeout=900,
                            env=dict(os.environ, PYTHONPATH=str(ROOT), BERTBENCH_FAULT="finetune:rte"))
    assert killed.returncode == 2, killed.stderr[-2000:]
    assert "Traceback" not in killed.stdout + killed.stderr
    assert re.fullmatch(r"error: stage finetune \S+ rte died \(SIGKILL\)[^\n]*; finished stages are kept — rerun the "
                        r"same command to continue\n", killed.stderr), killed.stderr
    assert "[pretrain ltr]" in killed.stdout  # ran alone first, and finished
    r = _bertbench(argv, progress=True)  # the rest, in spawned workers (a fresh Python each): their lines too
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "[pretrain ltr] done before" in r.stdout
    assert "2 stages at a time" in r.stdout
    assert "rte seed 1 lr" in r.stdout  # a worker's progress reached this terminal
    assert_our_lines_only(r.stderr + r.stdout, parallel)
    stages = json.loads((parallel / "stages.json").read_text())
    assert {"corpus", "pretrain mlm_nsp", "finetune ltr step-8 rte", "wall"} <= set(stages)
    from bertbench.studies.run import NOT_STAGES

    ran = {k: v for k, v in stages.items() if k not in (*NOT_STAGES, "wall")}
    assert stages["wall"] < sum(ran.values())  # the stages overlapped
    # what each scheduled stage ran on (test_studies checks the counts); corpus and report run before and after
    assert set(stages["threads"]) == set(ran) - {"corpus", "report"}
    assert all(counts and all(n >= 1 for n in counts) for counts in stages["threads"].values())
    # the same records, though not to the bit: one thread sums in another order than two, so the weights (and
    # the model fingerprint in a record's file name) differ in the last places
    def named(records):
        return sorted(re.sub(r"\.[0-9a-f]{8}\.record", ".record", path) for path in records)

    assert named(records_without_timings(parallel)) == named(first)


# a one-node Slurm cluster (tests/slurm_cluster.py), installed and started where it can be; else a skip saying why
slurm = pytest.fixture(scope="module")(cluster_fixture)


@pytest.mark.integration
@pytest.mark.slow
def test_the_smoke_study_on_slurm_survives_its_time_limit_and_a_cancelled_job(smoke_study, shared_data, slurm, tmp_path):
    """`run --launcher slurm` on a real one-node cluster. Each pre-training waits at step 9 (a fault point) for
    Slurm's warning before its 3-minute limit (USR2, asked for 90 s before it: slurmctld looks at time limits
    every 30 s, so the warning comes 90-120 s before the limit, 60-90 s after the start, and a loaded host still
    has a minute and a half to act on it): it checkpoints at the step it is in (its next one, or an earlier one
    where the warning came before step 9 on a slow start), its job requeues itself and resumes there, and its
    dependants run after it. A running fine-tuning is
    cancelled (scancel): the report, which waits on every job, is cancelled with it, and the same command then
    submits only that fine-tuning and the report. Every record is the one the one-node scheduler wrote."""
    from tests.slurm_cluster import PARTITION, wait_for_jobs

    out = tmp_path / "smoke-slurm"
    argv = [sys.executable, "-m", "bertbench.cli", "run", "--preset", "smoke", "--data-dir", str(shared_data), "--out",
            str(out), "--launcher", "slurm", "--partition", PARTITION, "--time", "3", "--signal-seconds", "90",
            "--cpus-per-task", "1"]
    env = dict(slurm.env, PYTHONPATH=str(ROOT), BERTBENCH_PROGRESS="0")
    first = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                           env=dict(env, BERTBENCH_FAULT="after_step:9", BERTBENCH_FAULT_SIGNAL="PAUSE"))
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    arrays = {job: names.split(", ") for job, names in re.findall(r"^\[[^\]]+\] job (\d+) \(array: ([^)]+)\)", first.stdout, re.M)}
    cancelled: list[str] = []

    def cancel_a_running_finetuning(job: dict[str, str]) -> None:
        array, _, k = job["id"].partition("_")
        # CoNLL's, the smoke study's longest fine-tuning: the least likely to finish before the cancel lands
        if (not cancelled and job["state"] == "RUNNING" and job["name"].startswith("bertbench finetune after") and k
                and arrays[array][int(k)].endswith("conll2003")):
            slurm.run("scancel", job["id"])
            cancelled.append(arrays[array][int(k)])

    ended = {j["name"]: j["state"] for j in wait_for_jobs(slurm, 600, cancel_a_running_finetuning)}
    assert cancelled and ended["bertbench report"] == "CANCELLED", (cancelled, ended)
    logs = {p.name: p.read_text() for p in (out / "jobs").glob("*_log.*")}
    for model in ("ltr", "mlm_nsp"):
        job = re.search(rf"^\[pretrain {model}\] job (\d+), after corpus$", first.stdout, re.M).group(1)
        log = logs[f"{job}_0_log.out"]
        why = log[-2000:] + logs.get(f"{job}_0_log.err", "")[-2000:] + slurm.logs()[-3000:]  # ours, then Slurm's
        # the warning reached the training loop: a checkpoint at the step it was in, the job requeued, resumed
        assert "Caught signal SIGUSR2" in log and "Requeued job" in log, why
        assert re.search(rf"resuming \S+/{model}-\w+ from its checkpoint of step ([1-9]|10)$", log, re.M), why
        assert ended[f"bertbench pretrain {model}"] == "COMPLETED"
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    submitted = re.findall(r"^\[([^\]]+)\] job \d+", r.stdout, re.M)
    if f"[{cancelled[0]}] done before" in r.stdout:  # its done marker was written before the cancel landed
        assert submitted == ["report"], r.stdout  # then only the report is not done
    else:
        assert submitted == ["finetune", "report"] and f"(array: {cancelled[0]})" in r.stdout, r.stdout
    wait_for_jobs(slurm, 300)
    stages = json.loads((out / "stages.json").read_text())
    assert stages["launcher"] == "slurm" and set(stages["jobs"]) <= set(cancelled)  # this invocation's jobs
    assert records_without_timings(out) == records_without_timings(smoke_study[0])


_TIMING_KEYS = ("date", "seconds", "per_s")


def records_without_timings(out: Path) -> dict[str, object]:
    """Every record under `out`, keyed by its path with the run-folder hashes taken out, its timings
    dropped and the output folder's own path replaced by OUT (both depend on where, not what, was run)."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if not any(t in k for t in _TIMING_KEYS)}
        return [strip(v) for v in x] if isinstance(x, list) else x

    found = {}
    for path in sorted(out.rglob("*.record.json")):
        text = re.sub(r"-[0-9a-f]{10}\b", "", path.read_text().replace(str(out), "OUT"))
        found[re.sub(r"-[0-9a-f]{10}\b", "", str(path.relative_to(out)))] = strip(json.loads(text))
    return found


def test_a_preset_starts_from_its_recipe_and_overrides_keys(tmp_path):
    import yaml

    from bertbench.config import PretrainConfig, resolve_recipe
    from bertbench.config_files import load_config
    from bertbench.errors import BertbenchError

    recipe = load_config(PretrainConfig, resolve_recipe("bert-base-paper"))
    assert load_preset("paper-base").pretrain == recipe  # paper-base names the recipe and copies nothing
    preset = yaml.safe_load(list_presets()["paper-base"].read_text())
    preset["pretrain"] = {"max_steps": 20000, "data": {"dupe_factor": 2}}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(preset))
    got = load_preset(str(path)).pretrain
    assert (got.max_steps, got.data.dupe_factor) == (20000, 2)
    assert got.data.corpus == recipe.data.corpus and got.phases == recipe.phases  # the rest from the recipe
    preset["recipe"] = "bert-base-papr"
    path.write_text(yaml.safe_dump(preset))
    with pytest.raises(BertbenchError, match="Did you mean: bert-base-paper"):
        load_preset(str(path))


def test_a_preset_takes_another_presets_finetune_block(tmp_path, monkeypatch):
    """masking and table6 run cpu-quick's fine-tuning protocol: they name it (finetune_from) instead of copying it,
    and a key they write replaces the base's (table6's two tasks)."""
    import yaml

    from bertbench.errors import BertbenchError

    quick = load_preset("cpu-quick").finetune
    assert load_preset("masking").finetune == quick
    table6 = load_preset("table6").finetune
    assert table6.tasks == ["mrpc", "sst2"] and table6 == dataclasses.replace(quick, tasks=["mrpc", "sst2"])
    preset = yaml.safe_load(list_presets()["table6"].read_text())
    path = tmp_path / "p.yaml"
    preset["finetune_from"] = "cpu-quik"
    path.write_text(yaml.safe_dump(preset))
    with pytest.raises(BertbenchError, match="finetune_from: .*Did you mean: cpu-quick"):
        load_preset(str(path))
    preset["finetune_from"] = "cpu-quick"
    preset["finetune"] = {"epoch_selection": {"stbs": 7}}  # a misspelt task is not silently ignored
    path.write_text(yaml.safe_dump(preset))
    with pytest.raises(BertbenchError, match="finetune.epoch_selection: .*Did you mean: stsb"):
        load_preset(str(path))
    presets = tmp_path / "presets"
    presets.mkdir()
    monkeypatch.setattr("bertbench.studies.preset.PRESETS_DIR", presets)
    for name, base in (("a", "b"), ("b", "a")):
        (presets / f"{name}.yaml").write_text(yaml.safe_dump({**preset, "name": name, "finetune_from": base}))
    with pytest.raises(BertbenchError, match=r"finetune_from: a cycle \(a → b → a\)"):
        load_preset("a")


def _append(log: Path, word: str) -> None:  # a stage: module level, so a worker process can be handed it
    with open(log, "a") as f:
        f.write(word + "\n")


def _fail(message: str) -> None:
    from bertbench.errors import BertbenchError

    raise BertbenchError(message)


@pytest.mark.parametrize("workers", [1, 2])
def test_stages_wait_for_their_dependencies_and_follow_ups_run(tmp_path, workers):
    from bertbench.studies.scheduler import Stage as _Stage, run_stages

    log = tmp_path / "log"
    late = _Stage("pretrain", _append, (log, "pretrain"))
    late.then = lambda: [_Stage("figure5", _append, (log, "figure5"), after="finetune")]
    jobs = [_Stage("finetune", _append, (log, "finetune"), after="pretrain"), late]
    stages: dict[str, float] = {}
    run_stages(jobs, workers, lambda message: None, stages)
    assert log.read_text().split() == ["pretrain", "finetune", "figure5"]
    assert set(stages) == {"pretrain", "finetune", "figure5"}


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failed_stage_is_one_line_naming_it(tmp_path, workers):
    from bertbench.errors import BertbenchError
    from bertbench.studies.scheduler import Stage as _Stage, run_stages

    jobs = [_Stage("finetune random rte", _fail, ("rte: no training file",))]
    with pytest.raises(BertbenchError, match=r"rte: no training file") as err:
        run_stages(jobs, workers, lambda message: None, {})
    if workers > 1:
        assert "[finetune random rte]" in str(err.value)


def test_an_interrupted_invocation_keeps_the_times_of_its_finished_stages(tmp_path):
    from bertbench.errors import BertbenchError
    from bertbench.studies.run import run_stages_keeping_times
    from bertbench.studies.scheduler import Stage as _Stage

    log = tmp_path / "log"
    jobs = [_Stage("finetune random rte", _append, (log, "rte")),
            _Stage("finetune random mrpc", _fail, ("mrpc: no training file",))]
    for n in (1, 2):  # each interrupted invocation gets its own file
        with pytest.raises(BertbenchError, match="mrpc: no training file"):
            run_stages_keeping_times(tmp_path, jobs, 1, lambda message: None, {}, 0.0, {}, False)
        saved = json.loads((tmp_path / f"stages.interrupted-{n}.json").read_text())
        assert set(saved) == {"finetune random rte", "wall (interrupted: mrpc: no training file)", "threads"}
        assert set(saved["threads"]) == {"finetune random rte", "finetune random mrpc"}  # what each started on
    assert not (tmp_path / "stages.json").exists()  # that name is the finished invocation's


def _append_with_pid(log: Path, word: str) -> None:
    with open(log, "a") as f:
        f.write(f"{word}:{os.getpid()}\n")


def test_a_stage_marked_alone_runs_by_itself_in_this_process(tmp_path):
    import time

    from bertbench.studies.scheduler import Stage as _Stage, run_stages

    log = tmp_path / "log"
    jobs = [_Stage("a", _append_with_pid, (log, "a")), _Stage("b", time.sleep, (1.0,)),
            _Stage("ltr", _append_with_pid, (log, "ltr"), alone=True), _Stage("c", _append_with_pid, (log, "c"))]
    events = []
    run_stages(jobs, 2, lambda message: events.append(re.sub(r"\] \d+ s$", "] done", message)), {})
    # ltr waits until a and b are done, and c until ltr is
    assert events.index("[ltr] started") > max(events.index("[a] done"), events.index("[b] done"))
    assert events.index("[c] started") > events.index("[ltr] done")
    pids = dict(line.split(":") for line in log.read_text().split())
    assert pids["ltr"] == str(os.getpid()) and pids["a"] != str(os.getpid())


@pytest.mark.integration
@pytest.mark.slow
def test_pretrain_seeds_pretrain_each_seed_and_the_report_shows_one_variant(shared_data, tmp_path, monkeypatch):
    """Two pre-training seeds of MLM+NSP (a few steps each) beside random init, on RTE: two pre-training stages,
    records carrying both seeds (random init's: null), and one MLM+NSP column in the report."""
    import yaml

    monkeypatch.setenv("BERTBENCH_PROGRESS", "0")
    raw = yaml.safe_load(list_presets()["smoke"].read_text())
    raw["name"] = "seeds"
    raw["pretrain_seeds"] = [1, 2]
    raw["pretrain"] |= {"max_steps": 4, "eval_every": 4, "checkpoint_every": 4, "snapshots": 0}
    raw["variants"] = [{"name": "mlm_nsp"}, {"name": "random", "random_init": True}]
    raw["finetune"] = {k: v for k, v in raw["finetune"].items() if not k.startswith("figure5")} | {
        "tasks": ["rte"], "max_steps": 3, "max_train_examples": 32, "max_eval_examples": 32}
    preset = tmp_path / "seeds.yaml"
    preset.write_text(yaml.safe_dump(raw))
    out = tmp_path / "seeds"
    r = runner.invoke(app, ["run", "--preset", str(preset), "--data-dir", str(shared_data), "--out", str(out),
                            "--no-plots"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    stages = json.loads((out / "stages.json").read_text())
    assert {"pretrain mlm_nsp seed1", "pretrain mlm_nsp seed2", "finetune mlm_nsp seed1 rte",
            "finetune mlm_nsp seed2 rte", "finetune random rte"} <= set(stages)
    seeds = {}
    for path in (out / "results").rglob("*.record.json"):
        record = json.loads(path.read_text())
        seeds.setdefault(record["model"]["pretraining"] and record["model"]["pretraining"]["objective"], set()).add(
            (record.get("pretrain_seed"), record["model"]["fingerprint"]))  # absent: unknown
    assert {s for s, _ in seeds["mlm+nsp"]} == {1, 2} and len(seeds["mlm+nsp"]) == 2  # two seeds, two models
    assert {s for s, _ in seeds[None]} == {None}  # random init has no pre-training seed
    header = (out / "seeds.md").read_text().split("| Task |")[1].split("\n")[0]
    assert header.count("tiny MLM+NSP") == 1 and "[" not in header, header


def test_kept_stages_files_take_the_first_free_number_and_never_overwrite(tmp_path):
    from bertbench.studies.run import keep_earlier_stages, numbered_stages_file

    assert numbered_stages_file(tmp_path, "earlier").name == "stages.earlier-1.json"
    (tmp_path / "stages.earlier-2.json").write_text('{"kept": 2}')  # earlier-1 deleted by hand, earlier-2 kept
    (tmp_path / "stages.json").write_text('{"kept": 3}')
    keep_earlier_stages(tmp_path)
    assert json.loads((tmp_path / "stages.earlier-1.json").read_text()) == {"kept": 3}
    assert json.loads((tmp_path / "stages.earlier-2.json").read_text()) == {"kept": 2}
    assert not (tmp_path / "stages.json").exists()
    assert numbered_stages_file(tmp_path, "earlier").name == "stages.earlier-3.json"


@pytest.mark.integration
@pytest.mark.slow
def test_a_study_on_two_devices_places_its_stages_on_both_and_no_rank_reenters_it(shared_data, tmp_path):
    """`run --devices 2` on a machine with two CPU "devices": the fine-tunings sit one per device (each worker
    sees its own one), and a pre-training on two devices (DDP over gloo) runs alone as its own `bertbench
    pretrain` process, whose second rank re-runs that command, not the study."""
    import yaml

    raw = yaml.safe_load(list_presets()["smoke"].read_text())
    raw["name"] = "devices"
    raw["pretrain"] |= {"max_steps": 4, "eval_every": 4, "checkpoint_every": 4, "snapshots": 0, "batch_size": 4,
                        "devices": "2", "accelerator": "cpu", "strategy": "ddp", "precision": "32"}
    raw["variants"] = [{"name": "mlm_nsp"}, {"name": "random", "random_init": True}]
    raw["finetune"] = {k: v for k, v in raw["finetune"].items() if not k.startswith("figure5")} | {
        "tasks": ["rte", "stsb"], "max_steps": 2, "max_train_examples": 16, "max_eval_examples": 16}
    preset = tmp_path / "devices.yaml"
    preset.write_text(yaml.safe_dump(raw))
    out = tmp_path / "devices"
    r = subprocess.run([sys.executable, "-m", "bertbench.cli", "run", "--preset", str(preset), "--data-dir",
                        str(shared_data), "--out", str(out), "--no-plots", "--devices", "2"],
                       capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, PYTHONPATH=str(ROOT), BERTBENCH_PROGRESS="0", OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # a rank that re-ran `bertbench run` would have started the study's stages again, and trained its tokenizer
    assert r.stdout.count("[pretrain mlm_nsp] started") == 1, r.stdout
    assert r.stdout.count("[tokenizer]") == 1 and r.stdout.count("stage times:") == 1, r.stdout
    # CPU devices: said once, and the workers are CPU processes, not GPUs 0 and 1 that do not exist
    assert r.stdout.count("note: --devices 2: accelerator cpu, so 2 CPU processes will be used") == 1, r.stdout
    assert "2 stages at a time" in r.stdout and "on one of devices" not in r.stdout
    stages = json.loads((out / "stages.json").read_text())
    placed = stages["devices"]
    assert set(placed) == {f"finetune {m} {t}" for m in ("mlm_nsp", "random") for t in ("rte", "stsb")}
    assert set(placed.values()) == {"cpu"}
    run_dir = next((out / "pretrain").glob("mlm_nsp-*"))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["batch_size"] == 4  # the global batch: 2 rows on each of the two ranks (training.batches)
    stage_config = yaml.safe_load((run_dir / "stage-config.yaml").read_text())
    assert (stage_config["devices"], stage_config["strategy"]) == ("2", "ddp")  # its own process ran both ranks
    assert len(list((out / "results").rglob("*.record.json"))) >= 4
