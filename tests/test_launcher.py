"""`run --launcher slurm` (studies.launcher): the graph of jobs a plan becomes, the options, and the sbatch scripts
docs/scale.md shows (regenerated here, byte for byte). The smoke study on a real one-node Slurm cluster (its time
limit, a requeue, a cancelled job) is tests/test_run_preset.py's test_the_smoke_study_on_slurm_survives_...."""
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


def test_a_job_asks_for_what_its_stages_need_and_a_gpu_only_where_it_uses_one():
    """A pre-training: its nodes, a task per GPU, CPUs for its loader processes and memory from the model
    (studies.slurm_needs); a fine-tuning one GPU; the corpus and the report no GPU line at all, on the CPU
    partition; no --wckey unless asked; --mem and --cpus-per-task override every job's estimate."""
    from bertbench.config import PretrainConfig

    cfg = PretrainConfig(model_size="base")
    plan = [Stage("corpus", time.sleep, (cfg,)), Stage("pretrain ltr", time.sleep, (cfg,)),
            Stage("finetune ltr rte", time.sleep, (0,), after="pretrain ltr")]
    corpus, pretrain, finetune, report = job_graph(plan)
    assert pretrain.after == ["corpus"] and corpus.kind == "corpus"
    opts = LauncherOptions("slurm", partition="gpu", cpu_partition="cpu", account="proj", gpus_per_node=4, nodes=2,
                           time_min=90)
    got = resources(pretrain, opts)
    assert {k: v for k, v in got.items() if k != "setup"} == {
        "job_name": "bertbench pretrain ltr", "time": 90, "nodes": 2, "ntasks_per_node": 4, "gpus_per_node": 4,
        "cpus_per_task": 3, "mem": "32G", "partition": "gpu", "account": "proj", "signal_delay_s": 90, "wckey": None,
        "srun_args": ["--kill-on-bad-exit=1"]}  # a failed rank ends its peers, not left waiting until --time
    assert got["setup"][1:] == ["#   pretrain ltr"]
    assert (resources(finetune, opts)["gpus_per_node"], resources(finetune, opts)["partition"]) == (1, "gpu")
    assert resources(finetune, opts)["setup"][1:] == ["#   element 0: finetune ltr rte"]
    assert "srun_args" not in resources(finetune, opts)
    for job in (corpus, report):
        assert "gpus_per_node" not in resources(job, opts) and resources(job, opts)["partition"] == "cpu"
    cpu = LauncherOptions("slurm", time_min=90)  # a CPU cluster: the model's weights and Adam's moments in memory
    assert (resources(pretrain, cpu)["cpus_per_task"], resources(pretrain, cpu)["mem"]) == (4, "8G")
    mine = LauncherOptions("slurm", mem_gb=64, cpus_per_task=12, wckey="bert", time_min=90)
    assert {k: resources(pretrain, mine)[k] for k in ("mem", "cpus_per_task", "wckey")} == {
        "mem": "64G", "cpus_per_task": 12, "wckey": "bert"}


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "pbs"}, r"^--launcher pbs: expected one of slurm$"),
    ({"kind": "local"}, r"^--launcher local: gone; without --launcher the study runs on this machine"),
    ({"kind": "slurm", "time_min": 1, "signal_s": 60}, r"^--signal-seconds 60: expected a number of seconds between 1 "
                                                        r"and --time's 60"),
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
    assert [s.name for s in scripts[:2]] == ["01-corpus.sbatch", "02-pretrain-ltr-seed1.sbatch"]
    assert scripts[-1].name.endswith("-report.sbatch")
    corpus, first = scripts[0].read_text(), scripts[1].read_text()
    assert "--dependency" not in corpus and "--gpus" not in corpus and "#SBATCH --partition=cpu" in corpus
    assert "#SBATCH --nodes=2" in first and "#SBATCH --ntasks-per-node=4" in first
    assert "#SBATCH --dependency=afterok:1001\n" in first  # after the corpus's job
    arrays = [s.read_text() for s in scripts if "-finetune-after-" in s.name]
    assert arrays and all(re.search(r"#SBATCH --array=0-\d+%\d+\n#SBATCH --cpus-per-task=\d+\n"
                                    r"#SBATCH --dependency=afterok:10\d\d\n", a) for a in arrays)
    assert not [s.name for s in scripts if "--wckey" in s.read_text() or "--gpus-per-node=0" in s.read_text()]
    assert re.search(r"--dependency=afterok:1001(:10\d\d)+\n", scripts[-1].read_text())


def test_a_device_count_that_is_not_a_number_is_one_error_line():
    for value in ("two", "0", "-1"):
        r = runner.invoke(app, ["run", "--preset", "smoke", "--devices", value])
        assert r.exit_code == 2 and r.output == f"error: --devices {value}: expected a whole number ≥ 1\n", r.output
