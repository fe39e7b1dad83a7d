"""`bertbench plan`: the seeds a claim needs to detect an effect, and their cost, from a study's records."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from bertbench.cli_options import TasksDirOption


def plan(
    results: Annotated[list[Path], typer.Argument(metavar="RESULTS_DIR",
                                                  help="Folders searched recursively for *.record.json result records.")],
    claim: Annotated[Optional[str], typer.Option("--claim", help="A paper claim's id (t5-qnli-nsp), a claim line "
                     "('mlm+nsp − mlm on stsb > 0', docs/claims.md), or the name of a claim in a claims.yaml beside the "
                     "records; default: every claim of that claims.yaml.")] = None,
    effect: Annotated[Optional[float], typer.Option("--effect", help="The distance from the claim's bound to detect, "
                                                    "in points; default for a paper claim: its paper's a − b's "
                                                    "distance from the bound (a claim line needs it).")] = None,
    max_seeds: Annotated[int, typer.Option("--max-seeds", min=1, help="The most pre-training (and fine-tuning) "
                                           "seeds a side to consider.")] = 10,
    design: Annotated[Optional[str], typer.Option("--design", help="One design to cost, PxF (pre-training × "
                      "fine-tuning seeds a side, e.g. 4x1), instead of the cheapest one that detects the effect.")] = None,
    embed: Annotated[Optional[Path], typer.Option("--embed", help="Also write the plan into this file (e.g. a docs "
                     "page) between '<!-- bertbench plan: begin NAME -->' and '<!-- bertbench plan: end NAME -->', "
                     "NAME = CLAIM@RESULTS_DIR's name, with the command that made it.")] = None,
    family: Annotated[Optional[int], typer.Option("--family", min=1, help="The number of claims Holm will adjust "
                      "this one with (a pre-registered family's size): each is sized at α/m, Holm's first step. "
                      "Default: the claims of a claims.yaml beside the records, else 1.")] = None,
    tasks_dir: TasksDirOption = None,
) -> None:
    """How many pre-training × fine-tuning seeds a claim needs to detect an effect at 80% power, and what they
    cost in CPU-minutes on the machine the records ran on, from the records' variance components."""
    from bertbench.errors import BertbenchError
    from bertbench.report.model import collect
    from bertbench.report.plan import plan_claim, stage_threads
    from bertbench.results import RECORD_SUFFIX, load_records
    from bertbench.tasks import task_versions
    from bertbench.report.claims import claims_beside

    shape = _design(design)
    beside = claims_beside(results)  # read as the report reads it, before any record
    if claim is None and not beside:
        raise BertbenchError("plan: no --claim, and no claims.yaml beside the records to plan from")
    records = load_records(results, task_versions(tasks_dir))  # each record's task known, at its version
    if not records:
        raise BertbenchError(f"no *{RECORD_SUFFIX} files under {', '.join(map(str, results))}")
    data, threads = collect(records), stage_threads(results)
    lines = [line for name in ([claim] if claim is not None else [c.text for c in beside])
             for line in plan_claim(data, name, effect, max_seeds, threads=threads, beside=beside, design=shape,
                                    family=family or (len(beside) if claim is None and beside else 1))]
    for line in lines:
        typer.echo(line)
    if embed is not None:
        if claim is None:
            raise BertbenchError("plan: --embed needs --claim (the block is named after it)")
        _embed(embed, f"{claim}@{results[0].resolve().name}", results, claim, effect, max_seeds, lines)


def _design(text: Optional[str]) -> Optional[tuple[int, int]]:
    """--design PxF → (P, F); one error line otherwise."""
    if text is None:
        return None
    p, sep, f = text.lower().replace("×", "x").partition("x")
    if not (sep and p.strip().isdigit() and f.strip().isdigit() and int(p) >= 1 and int(f) >= 1):
        from bertbench.errors import BertbenchError

        raise BertbenchError(f"plan: --design {text!r}: expected PxF, pre-training × fine-tuning seeds a side, e.g. 4x1")
    return int(p), int(f)


def _embed(target: Path, name: str, results: list[Path], claim: str, effect: Optional[float], max_seeds: int,
           lines: list[str]) -> None:
    """The plan as printed, in a marked block headed by the command that prints it (tests re-run it to check)."""
    from bertbench.errors import BertbenchError
    from bertbench.runtime.files import atomic_write_text, replace_marked_block

    if not target.is_file():
        raise BertbenchError(f"{target}: no such file to embed the plan in")
    command = " ".join(["bertbench plan", *(p.as_posix() for p in results), "--claim", claim,
                        *(["--effect", f"{effect:g}"] if effect is not None else []), "--max-seeds", str(max_seeds)])
    body = f"_Generated by `{command}`; do not edit between the markers._\n\n```\n" + "\n".join(lines) + "\n```"
    text = replace_marked_block(target.read_text(encoding="utf-8"), f"<!-- bertbench plan: begin {name} -->",
                                f"<!-- bertbench plan: end {name} -->", body, str(target))
    atomic_write_text(target, text)
