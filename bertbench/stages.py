"""A study's stages file (stages.json, written by studies.run, read by `bertbench plan`): each stage's seconds, the
host, and the threads each stage ran on."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from bertbench.errors import BertbenchError


STAGES_FILE = "stages.json"  # beside a study's records: each stage's seconds, the host, each stage's threads
THREADS_KEY = "threads"  # in a stages file, not a stage: {stage: the thread counts it ran on, in order}


@dataclass(frozen=True)
class StageThreads:
    """The threads a study's stages ran on, from its stages.json (studies.run writes it): `bertbench plan` costs a
    stage as its wall time × these."""

    host: Optional[int] = None  # the invocation's threads (what a stage that runs alone takes)
    recorded: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def of(self, stage: Optional[str], alone: bool) -> int:
        """A stage's threads: the most it was given (recorded), else the host's for a stage that runs alone, else 1."""
        if stage is not None and self.recorded.get(stage):
            return max(self.recorded[stage])
        return (self.host or 1) if alone else 1


def stage_threads(folders: Sequence[Path]) -> StageThreads:
    """The thread counts in the stages.json of the given record folders (an empty StageThreads where none is)."""
    host, recorded = None, {}
    for folder in folders:
        path = Path(folder) / STAGES_FILE
        if not path.is_file():
            continue
        try:
            stages = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise BertbenchError(f"{path}: not a stages file ({e})") from e
        host = host or (stages.get("host") or {}).get("threads")
        recorded.update({k: tuple(v) for k, v in (stages.get(THREADS_KEY) or {}).items()})
    return StageThreads(host, recorded)


__all__ = ["STAGES_FILE", "StageThreads", "THREADS_KEY", "stage_threads"]
