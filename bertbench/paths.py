"""Where the project's data-like folders live (tasks/, recipes/) and where data is read from."""
from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TASKS_DIR = Path(os.environ.get("BERTBENCH_TASKS_DIR", PROJECT_ROOT / "tasks"))
RECIPES_DIR = Path(os.environ.get("BERTBENCH_RECIPES_DIR", PROJECT_ROOT / "recipes"))


def default_data_dir() -> Path:
    """`--data-dir` default: $BERTBENCH_DATA_DIR, else ../shared/data beside the checkout."""
    env = os.environ.get("BERTBENCH_DATA_DIR")
    if env:
        return Path(env)
    return PROJECT_ROOT.parent / "shared" / "data"
