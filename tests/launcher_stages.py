"""Stages for tests/test_launcher.py's local jobs: a job process imports this module (kept light: no torch,
no CLI) to unpickle them."""
from __future__ import annotations

import time
from pathlib import Path

from bertbench.errors import BertbenchError


def stamp(path: str, seconds: float = 0.0) -> None:
    """A stage: sleeps, then notes when it ended."""
    time.sleep(seconds)
    Path(path).write_text(str(time.time()))


def fail(message: str) -> None:
    raise BertbenchError(message)
