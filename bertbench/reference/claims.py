"""The BERT paper's qualitative claims as data: `claims.yaml` beside this file, loaded and checked (every problem
listed in one `BertbenchError`). `bertbench.claims` writes each claim in the grammar of `report --claim`."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from bertbench.config_files import load_yaml
from bertbench.errors import BertbenchError
from bertbench.reference import PaperNumbers

CLAIMS_PATH = Path(__file__).resolve().parent / "claims.yaml"
SCHEMA = 1
TESTS = ("greater", "not_worse", "much_greater", "equivalent")  # each one claim of the grammar
CHECKPOINTS = ("last", "first", "gain")
APPROACHES = ("fine-tuning", "feature-based")
THRESHOLDS = ("about_a_point", "much_greater")
_REQUIRED = {"id", "source", "claim", "a", "b", "test"}
_OPTIONAL = {"task", "metric", "tasks", "approach", "checkpoint", "paper"}


def check_claims(path: Path, paper: PaperNumbers) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """(thresholds, the claims as written) of a claims.yaml, every problem listed in one `BertbenchError`."""
    data = load_yaml(path)
    problems: list[str] = []
    if not isinstance(data, dict) or set(data) != {"schema", "thresholds", "claims"}:
        raise BertbenchError(f"{path}: expected the top-level keys schema, thresholds, claims")
    if data["schema"] != SCHEMA:
        problems.append(f"schema {data['schema']!r} is not {SCHEMA}")
    thresholds = data["thresholds"] if isinstance(data["thresholds"], dict) else {}
    if set(thresholds) != set(THRESHOLDS) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in thresholds.values()):
        problems.append(f"thresholds: expected positive numbers for exactly {', '.join(THRESHOLDS)}")
        thresholds = {k: 1.0 for k in THRESHOLDS}
    claims, seen = [], set()
    for i, raw in enumerate(data["claims"] if isinstance(data["claims"], list) else []):
        if _check(raw, f"claims[{i}]", paper, problems):
            if raw["id"] in seen:
                problems.append(f"claims[{i}]: id {str(raw['id'])!r} repeats")
            seen.add(raw["id"])
            claims.append(raw)
    if not claims and not problems:
        problems.append("claims: expected a non-empty list")
    if problems:
        raise BertbenchError(f"{path}: {len(problems)} problem(s) in the claims:\n  " + "\n  ".join(problems))
    return {k: float(v) for k, v in sorted(thresholds.items())}, claims


def _check(raw: Any, where: str, paper: PaperNumbers, problems: list[str]) -> bool:
    if not isinstance(raw, dict):
        problems.append(f"{where}: expected a mapping")
        return False
    before = len(problems)
    missing, unknown = _REQUIRED - set(raw), set(raw) - _REQUIRED - _OPTIONAL
    if missing:
        problems.append(f"{where}: missing {', '.join(sorted(missing))}")
        return False
    if unknown:
        problems.append(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    if ("tasks" in raw) == ("task" in raw or "metric" in raw):
        problems.append(f"{where}: give either task and metric, or tasks")
        return False
    scores = [tuple(s) for s in raw["tasks"]] if "tasks" in raw else [(raw.get("task"), raw.get("metric"))]
    for ptask, pmetric in scores:
        if ptask not in paper.tasks or pmetric not in paper.metrics:
            problems.append(f"{where}: {ptask!r} / {pmetric!r} is not a task and metric of paper_numbers.yaml")
    for key, allowed in (("test", TESTS), ("checkpoint", CHECKPOINTS), ("approach", APPROACHES)):
        if key in raw and raw[key] not in allowed:
            problems.append(f"{where}: {key} {raw[key]!r} is not one of {', '.join(allowed)}")
    systems = raw.get("paper")
    if systems is not None:
        if not (isinstance(systems, list) and len(systems) == 2):
            problems.append(f"{where}: paper must be [a's system, b's system]")
        else:
            for system in systems:
                if not paper.find(source=raw["source"], system=system):
                    problems.append(f"{where}: no number of system {system!r} in source {raw['source']!r}")
    return len(problems) == before
