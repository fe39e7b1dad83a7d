"""`bertbench run --preset NAME`: one command from raw text to the report."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def run(
    preset: Annotated[str, typer.Option("--preset", help="smoke, cpu-quick, cpu-hour, paper-base (recipes/presets/), or a YAML file.")],
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Corpus and task data (default: $BERTBENCH_DATA_DIR or ../shared/data).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Output folder (default: runs/<preset>).")] = None,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write PNG plots with the report.")] = True,
    workers: Annotated[Optional[int], typer.Option("--workers", min=1, help="Stages at a time, each in its own process with a share of the threads (default: the preset's).")] = None,
    devices: Annotated[Optional[int], typer.Option("--devices", min=1, help="Devices (GPUs) to spread the stages over, one worker pinned to each (default: the preset's).")] = None,
    validate_only: Annotated[bool, typer.Option("--validate", help="Check the preset and every variant's config, run nothing.")] = False,
    tasks_dir: Annotated[Optional[Path], typer.Option("--tasks-dir", help="Folder of task YAML files, your own tasks (default: $BERTBENCH_TASKS_DIR, else the project's tasks/).")] = None,
) -> None:
    """Tokenizer → pre-train each variant → fine-tune each on every task with data → report. Re-running
    skips finished stages (by config hash) and resumes an interrupted pre-training."""
    import os

    from bertbench.paths import TASKS_DIR_VARIABLE, default_data_dir
    from bertbench.studies.preset import load_preset

    if tasks_dir is not None:  # for every stage of the study (each its own process) and its report
        if not tasks_dir.is_dir():
            from bertbench.errors import BertbenchError

            raise BertbenchError(f"--tasks-dir {tasks_dir}: no such folder")
        os.environ[TASKS_DIR_VARIABLE] = str(tasks_dir.resolve())
    from bertbench.studies.run import NOT_STAGES, run_preset

    spec = load_preset(preset)
    from bertbench.studies.protocol import check_protocol

    check_protocol(spec)  # a pre-registered study's protocol, before anything runs (and in --validate)
    if validate_only:
        typer.echo(f"preset {spec.name}: {len(spec.variants)} variants ({', '.join(v.name for v in spec.variants)}), "
                   f"tasks {', '.join(spec.finetune.tasks)}: valid")
        return
    stages = run_preset(spec, data_dir or default_data_dir(), out or Path("runs") / spec.name, echo=typer.echo, plots=plots,
                        workers=workers, devices=devices)
    typer.echo("stage times: " + ", ".join(f"{k} {v:.0f} s" for k, v in stages.items() if k not in NOT_STAGES))
