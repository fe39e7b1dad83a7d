"""`bertbench run --preset NAME`: one command from raw text to the report."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from bertbench.cli_options import TasksDirOption
from bertbench.errors import BertbenchError


def run(
    ctx: typer.Context,
    preset: Annotated[str, typer.Option("--preset", help="smoke, cpu-quick, cpu-hour, paper-base (recipes/presets/), or a YAML file.")],
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Corpus and task data (default: $BERTBENCH_DATA_DIR or ../shared/data).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Output folder (default: runs/<preset>).")] = None,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write PNG plots with the report.")] = True,
    workers: Annotated[Optional[int], typer.Option("--workers", min=1, help="Stages at a time, each in its own process with a share of the threads (default: the preset's).")] = None,
    devices: Annotated[Optional[str], typer.Option("--devices", metavar="N", show_default=False, help="Devices (GPUs) to spread the stages over, one worker pinned to each (default: the preset's).")] = None,
    validate_only: Annotated[bool, typer.Option("--validate", help="Check the preset and every variant's config, run nothing.")] = False,
    tasks_dir: TasksDirOption = None,
    launcher: Annotated[Optional[str], typer.Option("--launcher", help="slurm: submit each stage as a Slurm job through submitit (dependencies: afterok). Default: this machine's own scheduler.")] = None,
    partition: Annotated[Optional[str], typer.Option("--partition", help="With --launcher slurm: the partition.")] = None,
    account: Annotated[Optional[str], typer.Option("--account", help="With --launcher slurm: the account charged.")] = None,
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", min=0, help="With --launcher: GPUs per node, one task each, for a pre-training (a fine-tuning takes one).")] = 0,
    nodes: Annotated[int, typer.Option("--nodes", min=1, help="With --launcher slurm: nodes per pre-training.")] = 1,
    time_min: Annotated[int, typer.Option("--time", min=1, help="With --launcher: each job's time limit, in minutes.")] = 240,
    cpus_per_task: Annotated[Optional[int], typer.Option("--cpus-per-task", min=1, help="With --launcher: CPUs per task for every job (default: each job's estimate).")] = None,
    mem: Annotated[Optional[int], typer.Option("--mem", help="With --launcher slurm: memory per node in GB for every job (default: each job's estimate, studies/slurm_needs.py).")] = None,
    cpu_partition: Annotated[Optional[str], typer.Option("--cpu-partition", help="With --launcher slurm: the partition of the jobs that need no GPU (tokenising, the report); default: --partition.")] = None,
    wckey: Annotated[Optional[str], typer.Option("--wckey", help="With --launcher slurm: Slurm's workload key (none unless given).")] = None,
    signal_seconds: Annotated[Optional[int], typer.Option("--signal-seconds", help="With --launcher slurm: Slurm's warning (USR2) this many seconds before a job's time limit (default 90, or half a shorter --time); a pre-training checkpoints at its step and the job is requeued.")] = None,
    print_sbatch: Annotated[Optional[Path], typer.Option("--print-sbatch", help="With --launcher slurm: write the sbatch scripts of a fresh study to this folder; submit nothing.")] = None,
    embed: Annotated[Optional[Path], typer.Option("--embed", help="With --print-sbatch: put the scripts between this page's markers.")] = None,
    withdraw: Annotated[Optional[str], typer.Option("--withdraw", metavar="REASON", help="Withdraw this pre-registered study before it runs: the reason goes into its registration's log (leaderboards/registrations/<study>/), and run refuses it from then on.")] = None,
) -> None:
    """Tokenizer → pre-train each variant → fine-tune each on every task with data → report. Re-running
    skips finished stages (by config hash) and resumes an interrupted pre-training."""
    import os

    from bertbench.paths import TASKS_DIR, TASKS_DIR_VARIABLE, default_data_dir, task_folders
    from bertbench.runtime.devices import count_option

    devices = count_option("--devices", devices)  # text, so that a word is one error line (as in `pretrain`)
    from bertbench.studies.preset import load_preset

    if tasks_dir is not None:  # for every stage of the study (each its own process) and its report
        added = [str(f) for f in task_folders(tasks_dir) if f != TASKS_DIR.resolve()]  # tasks/ is always read
        os.environ[TASKS_DIR_VARIABLE] = os.pathsep.join(added)
    from bertbench.studies.run import NOT_STAGES, run_preset

    spec = load_preset(preset)
    if withdraw is not None:
        from bertbench.registration import withdraw as withdraw_study

        typer.echo(f"withdrew {spec.name}: logged in {withdraw_study(spec.name, withdraw)}")
        return
    from bertbench.studies.protocol import check_protocol

    check_protocol(spec)  # a pre-registered study's protocol, before anything runs (and in --validate)
    if validate_only:
        typer.echo(f"preset {spec.name}: {len(spec.variants)} variants ({', '.join(v.name for v in spec.variants)}), "
                   f"tasks {', '.join(spec.finetune.tasks)}: valid")
        return
    options = None
    if launcher is not None:
        from bertbench.studies.launcher import LauncherOptions

        options = LauncherOptions(launcher, partition, account, gpus_per_node, nodes, time_min, cpus_per_task,
                                  signal_seconds, mem, cpu_partition, wckey, print_sbatch, embed)
    elif print_sbatch is not None or embed is not None:
        raise BertbenchError("--print-sbatch writes Slurm's scripts: it goes with --launcher slurm")
    stages = run_preset(spec, data_dir or default_data_dir(), out or Path("runs") / spec.name, echo=typer.echo, plots=plots,
                        workers=workers, devices=devices, command=same_command(ctx), launcher=options)
    if stages:  # none where the jobs were only submitted (slurm) or written (--print-sbatch)
        typer.echo("stage times: " + ", ".join(f"{k} {v:.0f} s" for k, v in stages.items() if k not in NOT_STAGES))


def same_command(ctx: typer.Context) -> str:
    """This `bertbench run` command line as the user gave it (the options they wrote, in the command's order):
    what an interrupted study says to rerun. Rebuilt from the parse, not sys.argv, which names the Python file
    or the test runner rather than `bertbench`."""
    import shlex

    words = ["bertbench", ctx.info_name or "run"]
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name)
        if not param.opts[0].startswith("-") or source is None or source.name != "COMMANDLINE":
            continue
        value = ctx.params[param.name]
        if getattr(param, "is_flag", False):
            words.append(param.opts[0] if value else (param.secondary_opts or param.opts)[0])
        else:
            words += [param.opts[0], str(value)]
    return shlex.join(words)
