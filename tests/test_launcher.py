"""`run --launcher slurm|local` (studies.launcher): the graph of jobs a plan becomes, the options, and the sbatch
scripts docs/scale.md shows (regenerated here, byte for byte). The smoke study through submitit's local jobs is
tests/test_run_preset.py's test_the_smoke_study_runs_through_submitit_jobs_in_dependency_order."""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.errors import BertbenchError
from bertbench.studies.launcher import LauncherOptions, job_graph, resources
from bertbench.studies.scheduler import Stage

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def _plan() -> list[Stage]:
    """A study's plan as studies.plan makes it: two pre-trainings (one with follow-ups), their fine-tunings,
    and random init's, which wait for nothing."""
    return [Stage("pretrain ltr", time.sleep, (0,), alone=True, then=lambda: []),
            Stage("pretrain mlm_nsp", time.sleep, (0,)),
            *(Stage(f"finetune {m} {t}", time.sleep, (0,), after=f"pretrain {m}") for m in ("ltr", "mlm_nsp")
              for t in ("rte", "stsb")),
            *(Stage(f"finetune random {t}", time.sleep, (0,)) for t in ("rte", "stsb"))]


def test_a_plan_is_one_job_per_pretraining_an_array_per_model_after_it_and_the_report_last():
    jobs = job_graph(_plan())
    assert [(j.name, j.kind, [s.name for s in j.stages], j.after) for j in jobs] == [
        ("pretrain ltr", "pretrain", ["pretrain ltr"], []),
        ("pretrain mlm_nsp", "pretrain", ["pretrain mlm_nsp"], []),
        ("finetune after pretrain ltr", "finetune", ["finetune ltr rte", "finetune ltr stsb"], ["pretrain ltr"]),
        ("finetune after pretrain mlm_nsp", "finetune", ["finetune mlm_nsp rte", "finetune mlm_nsp stsb"],
         ["pretrain mlm_nsp"]),
        ("finetune", "finetune", ["finetune random rte", "finetune random stsb"], []),
        ("pretrain ltr follow-ups", "follow-ups", ["pretrain ltr"], ["pretrain ltr"]),
        ("report", "report", [], [j.name for j in jobs[:-1]]),
    ]
    # what a rerun submits when the pre-trainings are done: their fine-tunings wait for nothing
    rest = job_graph([Stage("finetune ltr rte", time.sleep, (0,))])
    assert [(j.name, j.after) for j in rest] == [("finetune", []), ("report", ["finetune"])]


def test_a_pretraining_takes_its_nodes_and_a_task_per_gpu_a_finetuning_one_gpu_the_report_none():
    opts = LauncherOptions("slurm", partition="gpu", account="proj", gpus_per_node=4, nodes=2, time_min=90)
    pretrain, finetune, report = (j for j in job_graph(_plan()) if j.name in ("pretrain ltr", "finetune", "report"))
    assert resources(pretrain, opts) == {"name": "bertbench pretrain ltr", "timeout_min": 90, "nodes": 2,
                                         "tasks_per_node": 4, "gpus_per_node": 4, "slurm_partition": "gpu",
                                         "slurm_account": "proj"}
    assert (resources(finetune, opts)["nodes"], resources(finetune, opts)["gpus_per_node"]) == (1, 1)
    assert resources(report, opts)["gpus_per_node"] == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "pbs"}, r"^--launcher pbs: expected one of slurm, local$"),
    ({"kind": "local", "nodes": 2}, r"^--nodes 2: --launcher local runs on this one machine$"),
    ({"kind": "local", "print_sbatch": Path("x")}, r"^--print-sbatch writes Slurm's scripts"),
    ({"kind": "slurm", "time_min": 0}, r"^--time 0: expected an integer ≥ 1$"),
])
def test_launcher_options_are_checked_in_one_line(kwargs, message):
    with pytest.raises(BertbenchError, match=message):
        LauncherOptions(**kwargs)


def test_the_sbatch_scripts_in_scale_md_regenerate_byte_for_byte(tmp_path):
    """docs/scale.md's block is what `--print-sbatch ... --embed` writes for the cpu-hour preset: regenerated
    into a copy of the page, the copy is the committed page. Each script is submitit's own (a stand-in sbatch
    took it); the pre-trainings ask for their nodes and a task per GPU, the arrays wait for their pre-training."""
    page = tmp_path / "scale.md"
    committed = (ROOT / "docs" / "scale.md").read_text()
    page.write_text(committed)
    command = re.search(r"```bash\n(bertbench run --preset cpu-hour [^`]*?--print-sbatch sbatch --embed docs/scale.md)\n```",
                        committed).group(1)
    argv = command.replace("\\\n", " ").split()[1:]
    argv[argv.index("sbatch")] = str(tmp_path / "sbatch")
    argv[argv.index("docs/scale.md")] = str(page)
    r = runner.invoke(app, [*argv, "--data-dir", str(tmp_path / "no-data-needed")])
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert page.read_text() == committed, "docs/scale.md: regenerate with the command above its block"
    scripts = sorted((tmp_path / "sbatch").glob("*.sbatch"))
    assert scripts[0].name == "01-pretrain-ltr-seed1.sbatch" and scripts[-1].name.endswith("-report.sbatch")
    first = scripts[0].read_text()
    assert "#SBATCH --nodes=2" in first and "#SBATCH --ntasks-per-node=4" in first and "--dependency" not in first
    arrays = [s.read_text() for s in scripts if "-finetune-after-" in s.name]
    assert arrays and all(re.search(r"#SBATCH --array=0-\d+%\d+\n#SBATCH --dependency=afterok:10\d\d\n", a)
                          for a in arrays)
    assert re.search(r"--dependency=afterok:1001(:10\d\d)+\n", scripts[-1].read_text())


@pytest.mark.parametrize("first_fails", [False, True])
def test_local_jobs_start_after_the_jobs_they_wait_for_and_not_after_a_failed_one(tmp_path, monkeypatch, first_fails):
    """--launcher local through submitit's LocalExecutor (which starts what it is given at once): a fine-tuning
    job starts only once its pre-training's job has succeeded, the report last; where the pre-training fails, its
    dependants never start, and one line names it."""
    import json
    import os

    from bertbench.studies.launcher import launch
    from launcher_stages import fail, stamp

    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{ROOT / 'tests'}")  # a job imports this module's stages
    ended = tmp_path / "pretrain-ended"
    pretrain = Stage("pretrain x", fail, ("no data",)) if first_fails else Stage("pretrain x", stamp, (str(ended), 1.0))
    stages = [pretrain, Stage("finetune x rte", stamp, (str(tmp_path / "rte"),), after="pretrain x"),
              Stage("finetune random rte", stamp, (str(tmp_path / "random"),))]
    said: list[str] = []
    report = (stamp, (str(tmp_path / "report"),), os.path.exists)  # what studies.run's report would be
    opts = LauncherOptions("local", time_min=5)
    if first_fails:
        with pytest.raises(BertbenchError, match=r"^1 job\(s\) failed, first pretrain x \(job \d+\): .*no data; "
                                                 r"finished stages are kept"):
            launch(job_graph(stages), opts, tmp_path, report, 2, {}, said.append)
        assert not (tmp_path / "rte").exists() and not (tmp_path / "report").exists()
        assert (tmp_path / "random").exists()  # it waits for nothing
        return
    times = launch(job_graph(stages), opts, tmp_path, report, 2, {"tokenizer": 1.0}, said.append)
    jobs = times["jobs"]
    assert set(jobs) == {"pretrain x", "finetune x rte", "finetune random rte"}
    assert jobs["finetune x rte"]["started"] >= float(ended.read_text())
    assert float((tmp_path / "report").read_text()) >= max(float((tmp_path / n).read_text()) for n in ("rte", "random"))
    assert times["tokenizer"] == 1.0 and json.loads((tmp_path / "stages.json").read_text()) == times
    assert [line.split("]")[0] for line in said] == ["[pretrain x", "[finetune random rte", "[finetune x rte", "[report"]


def test_a_device_count_that_is_not_a_number_is_one_error_line():
    for value in ("two", "0", "-1"):
        r = runner.invoke(app, ["run", "--preset", "smoke", "--devices", value])
        assert r.exit_code == 2 and r.output == f"error: --devices {value}: expected a whole number ≥ 1\n", r.output
