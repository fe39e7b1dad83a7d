"""`bertbench plan`: the seeds a claim needs to detect an effect, and their cost, from a study's records."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from bertbench.cli_options import TasksDirOption
from bertbench.errors import BertbenchError


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
    pretrain_sd: Annotated[Optional[float], typer.Option("--pretrain-sd", min=0.0, help="Where the records have "
                           "one pre-training seed a side (no pre-training variance measured): also size a design "
                           "assuming this pre-training SD, in points (stated, not measured).")] = None,
    tasks_dir: TasksDirOption = None,
) -> None:
    """How many pre-training × fine-tuning seeds a claim needs to detect an effect at 80% power, and what they
    cost in CPU-minutes on the machine the records ran on, from the records' variance components."""
    from bertbench.report.model import collect
    from bertbench.stages import stage_threads
    from bertbench.report.plan import plan_claim
    from bertbench.results import RECORD_SUFFIX, load_records
    from bertbench.tasks import task_versions
    from bertbench.claims import claims_beside

    import tempfile

    shape = _design(design)
    given = list(results)
    scratch = tempfile.TemporaryDirectory(prefix="bertbench-plan-")
    results = [_from_git(_git_spec(str(p)), Path(scratch.name) / str(i)) if str(p).startswith((GIT_PREFIX, RETIRED_PREFIX))
               else p for i, p in enumerate(given)]
    try:  # everything read from the folders is in memory after this: a folder unpacked from git goes at once
        beside = claims_beside(results)  # read as the report reads it, before any record
        if claim is None and not beside:
            raise BertbenchError("plan: no --claim, and no claims.yaml beside the records to plan from")
        records = load_records(results, task_versions(tasks_dir))  # each record's task known, at its version
        if not records:
            raise BertbenchError(f"no *{RECORD_SUFFIX} files under {', '.join(map(str, results))}")
        data, threads = collect(records), stage_threads(results)
    finally:
        scratch.cleanup()
    lines = [line for name in ([claim] if claim is not None else [c.text for c in beside])
             for line in plan_claim(data, name, effect, max_seeds, threads=threads, beside=beside, design=shape,
                                    family=family or (len(beside) if claim is None and beside else 1),
                                    pretrain_sd=pretrain_sd)]
    for line in lines:
        typer.echo(line)
    if embed is not None:
        if claim is None:
            raise BertbenchError("plan: --embed needs --claim (the block is named after it)")
        extra = [*(["--family", str(family)] if family else []), *(["--design", design] if design else []),
                 *(["--pretrain-sd", f"{pretrain_sd:g}"] if pretrain_sd is not None else [])]
        name = Path(str(given[0]).rstrip("/")).name.rpartition(":")[2]
        _embed(embed, f"{claim}@{name}", given, claim, effect, max_seeds, lines, extra)


GIT_PREFIX = "git:"  # git:REV:PATH, a folder of records as a commit of this repository has it
RETIRED_PREFIX = "retired:"  # retired:NAME, a study leaderboards/retired.yaml names (its commit and folder)


def _git_spec(given: str) -> str:
    """retired:NAME → git:REV:PATH from leaderboards/retired.yaml; git:REV:PATH as it is."""
    if not given.startswith(RETIRED_PREFIX):
        return given
    import yaml

    from bertbench.errors import did_you_mean
    from bertbench.paths import PROJECT_ROOT

    path = PROJECT_ROOT / "leaderboards" / "retired.yaml"
    known = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.is_file() else {}
    name = given[len(RETIRED_PREFIX):]
    if name not in known:
        raise BertbenchError(f"plan: {given}: " + did_you_mean(name, known, f"retired study (in {path})"))
    return f"{GIT_PREFIX}{known[name]['commit']}:{known[name]['path']}"


def _from_git(spec: str, into: Path) -> Path:
    """A records folder read from a commit (`git:REV:PATH`, e.g. a retired study's records: git:7164ca1^:leaderboards/
    records/cpu-hour-v1), unpacked into `into`; one error line where git, the commit or the path is not there."""
    import subprocess

    from bertbench.paths import PROJECT_ROOT

    rev, sep, path = spec[len(GIT_PREFIX):].partition(":")
    if not (rev and sep and path):
        raise BertbenchError(f"plan: {spec!r}: expected git:REV:PATH (a commit and a records folder in it)")
    into.mkdir(parents=True)
    try:
        archive = subprocess.run(["git", "-C", str(PROJECT_ROOT), "archive", "--format=tar", rev, path.rstrip("/")],
                                 capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, capture_output=True, check=True)
    except FileNotFoundError as err:
        raise BertbenchError(f"plan: {spec}: {err.filename} is not installed") from None
    except subprocess.CalledProcessError as err:
        said = (err.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise BertbenchError(f"plan: {spec}: {said[-1] if said else 'git archive failed'}") from None
    return into / path.rstrip("/")


def _design(text: Optional[str]) -> Optional[tuple[int, int]]:
    """--design PxF → (P, F); one error line otherwise."""
    if text is None:
        return None
    p, sep, f = text.lower().replace("×", "x").partition("x")
    if not (sep and p.strip().isdigit() and f.strip().isdigit() and int(p) >= 1 and int(f) >= 1):
        raise BertbenchError(f"plan: --design {text!r}: expected PxF, pre-training × fine-tuning seeds a side, e.g. 4x1")
    return int(p), int(f)


def _embed(target: Path, name: str, results: list[Path], claim: str, effect: Optional[float], max_seeds: int,
           lines: list[str], extra: list[str] = ()) -> None:
    """The plan as printed, in a marked block headed by the command that prints it (tests re-run it to check)."""
    from bertbench.runtime.files import atomic_write_text, replace_marked_block

    if not target.is_file():
        raise BertbenchError(f"{target}: no such file to embed the plan in")
    command = " ".join(["bertbench plan", *(p.as_posix() for p in results), "--claim", claim,
                        *(["--effect", f"{effect:g}"] if effect is not None else []), "--max-seeds", str(max_seeds),
                        *extra])
    body = f"_Generated by `{command}`; do not edit between the markers._\n\n```\n" + "\n".join(lines) + "\n```"
    text = replace_marked_block(target.read_text(encoding="utf-8"), f"<!-- bertbench plan: begin {name} -->",
                                f"<!-- bertbench plan: end {name} -->", body, str(target))
    atomic_write_text(target, text)
