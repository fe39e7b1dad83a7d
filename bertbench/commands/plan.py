"""`bertbench plan`: the seeds a claim needs to detect an effect, and their cost, from a study's records."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def plan(
    results: Annotated[list[Path], typer.Argument(metavar="RESULTS_DIR",
                                                  help="Folders searched recursively for *.record.json result records.")],
    claim: Annotated[str, typer.Option("--claim", help="A claim id of claims.yaml, e.g. t5-qnli-nsp (Table 5's NSP "
                                       "claim on QNLI).")] = "t5-qnli-nsp",
    effect: Annotated[Optional[float], typer.Option("--effect", help="The effect to detect, in points; default: the "
                                                    "paper's own |a − b| for the claim.")] = None,
    max_seeds: Annotated[int, typer.Option("--max-seeds", min=1, help="The most pre-training (and fine-tuning) "
                                           "seeds a side to consider.")] = 10,
) -> None:
    """How many pre-training × fine-tuning seeds a claim needs to detect an effect at 80% power, and what they
    cost in CPU-minutes on the machine the records ran on, from the records' variance components."""
    from bertbench.errors import BertbenchError
    from bertbench.report.model import collect
    from bertbench.report.plan import plan_claim
    from bertbench.results import RECORD_SUFFIX, load_records

    records = load_records(results)
    if not records:
        raise BertbenchError(f"no *{RECORD_SUFFIX} files under {', '.join(map(str, results))}")
    for line in plan_claim(collect(records), claim, effect, max_seeds):
        typer.echo(line)
