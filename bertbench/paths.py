"""Where the project's data-like folders live (tasks/, recipes/) and where data is read from."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Union

from bertbench.errors import BertbenchError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TASKS_DIR = PROJECT_ROOT / "tasks"  # the shipped tasks
COMMITTED_RECORDS = PROJECT_ROOT / "leaderboards" / "records"  # one folder per committed study (make archive)
TASKS_DIR_VARIABLE = "BERTBENCH_TASKS_DIR"  # `run --tasks-dir` adds to it for its stages (each its own process)
TASKS_DIR_HELP = (f"Folders of task YAML files of your own, read beside the project's tasks/ (several joined by "
                  f"'{os.pathsep}'; ${TASKS_DIR_VARIABLE} adds more the same way).")


def _folder_list(value: str, said_as: str) -> list[Path]:
    folders = [Path(part) for part in value.split(os.pathsep) if part]
    for folder in folders:
        if not folder.is_dir():
            raise BertbenchError(f"{said_as} {folder}: {'a file, not a folder' if folder.exists() else 'no such folder'}")
    return folders


def task_folders(tasks_dir: Union[str, Path, None] = None) -> tuple[Path, ...]:
    """Where task YAML files are read from, all of them together: `tasks_dir` (a `--tasks-dir` value: one folder
    or several joined by os.pathsep), then those of $BERTBENCH_TASKS_DIR (read now, so that `run --tasks-dir`
    reaches every stage), then the project's tasks/, each once. They add up rather than replace one another: a
    researcher's own task is run and reported beside the paper's (tasks.py makes a name two of them define an
    error)."""
    folders = _folder_list(str(tasks_dir), "--tasks-dir") if tasks_dir else []
    folders += _folder_list(os.environ.get(TASKS_DIR_VARIABLE, ""), f"${TASKS_DIR_VARIABLE}:")
    return tuple(dict.fromkeys(folder.resolve() for folder in [*folders, TASKS_DIR]))


# The bert-base-uncased WordPiece vocabulary, inside the data folder: what a run tokenises with when given none.
BERT_VOCAB = Path("vocab") / "bert-base-uncased-vocab.txt"
RECIPES_DIR = Path(os.environ.get("BERTBENCH_RECIPES_DIR", PROJECT_ROOT / "recipes"))


DATA_DIR_VARIABLE = "BERTBENCH_DATA_DIR"


def default_data_dir() -> Path:
    """`--data-dir` default: $BERTBENCH_DATA_DIR, else ../shared/data beside the checkout."""
    return Path(os.environ.get(DATA_DIR_VARIABLE) or PROJECT_ROOT.parent / "shared" / "data")


def _relative(path: str, folder: Path, spelling: str) -> str:
    prefix = str(folder).rstrip("/") + "/"
    return spelling + path[len(prefix):] if path.startswith(prefix) else path


def data_dir_relative(path: str, data_dir: Path) -> str:
    """A path under the data folder written `{data_dir}/...`, the recipes' own spelling; any other path as given."""
    return _relative(path, Path(data_dir), "{data_dir}/")


def portable(value: Any, data_dir: Path) -> Any:
    """`value` (a result's config: dicts, lists, strings) with each path under the data folder written
    `{data_dir}/...` and each path inside the checkout relative to it. A committed result then names no folder
    of the machine that made it, and the same run on two machines writes the same config."""
    if isinstance(value, dict):
        return {k: portable(v, data_dir) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable(v, data_dir) for v in value]
    if isinstance(value, str):
        return _relative(data_dir_relative(value, data_dir), PROJECT_ROOT, "")
    return value


def portable_folder(given: str, data_dir: Path) -> str:
    """A folder the user named on the command line (e.g. `finetune --model`), as a result record keeps it: a
    relative path as given; an absolute one under the data folder as `{data_dir}/...`, inside the checkout or
    the working folder relative to it, under the home folder as `~/...`, and anywhere else by its name alone.
    A record then names no folder of the machine that made it, yet says what the user gave."""
    path = Path(given)
    if not path.is_absolute():
        return path.as_posix()
    for folder, spelling in ((Path(data_dir), "{data_dir}/"), (PROJECT_ROOT, ""), (Path.cwd(), ""),
                             (Path.home(), "~/")):
        try:
            rest = path.relative_to(folder)
        except ValueError:
            continue
        if rest.parts and len(folder.parts) > 1:  # not the root ("/" as the working folder names nothing)
            return spelling + rest.as_posix()
    return path.name
