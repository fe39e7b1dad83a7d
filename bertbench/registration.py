"""A study's pre-registration file and its log, in one place (as results.py is for records): the format, its
parse, write, log and stamp, and the project's copy of each (leaderboards/registrations/<study>/). `bertbench run`
writes and logs them (studies.protocol decides when); the report judges the claims they state. docs/claims.md
("Pre-registration") shows a block and says what each part does.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from bertbench.claims import PREREGISTRATION, Claim, Claims, load_claims, parse_claim
from bertbench.errors import BertbenchError
from bertbench.paths import COMMITTED_RECORDS, PROJECT_ROOT
from bertbench.runtime.files import atomic_write_text
from bertbench.runtime.provenance import now_iso

CONFIRMATORY_PRETRAIN_SEEDS = 3  # the fewest pre-training seeds a side that pre-trains a confirmatory design has
PREREGISTRATION_FILE = "preregistration.yaml"  # in a study's results folder, written before its first stage
ADMISSION_MARGIN = 3.0  # points above the constant predictor a published model must score for a task to enter
_KEYS = {"claims", "scores", "seeds", "extension", "preset", "registered_at", "amends", "design", "decides"}
LOG_FILE = "preregistration-log.yaml"  # beside it: each stopped, partial or amended run, in order (`append_log`)
REGISTERED_AT = "registered_at"  # in the written file: when `bertbench run` first wrote it (UTC, ISO 8601)
_TASK_KEYS = {"task", "metric", "published", "source", "constant", "constant_from"}
# A pre-registered study's registration and log as the project keeps them (leaderboards/registrations/<study>/),
# written by `run` itself beside the run folder's copy, committed with the project: a run checks a registration
# against this, never only against a copy in its output folder, which can be deleted or never made.
# $BERTBENCH_REGISTRATIONS points elsewhere (the tests do, so that they never write into the project).
REGISTRATIONS_VARIABLE = "BERTBENCH_REGISTRATIONS"
WITHDRAWN = "withdrawn"  # a log event: the study will not run (why, when); `run` refuses it from then on


@dataclass(frozen=True)
class Evidence:
    """Why a task may enter a headline score: a published model's number against the constant predictor's."""

    task: str
    metric: str
    published: float
    source: str
    constant: float
    constant_from: str

    @property
    def admitted(self) -> bool:
        return self.published - self.constant >= ADMISSION_MARGIN


@dataclass(frozen=True)
class HeadlineScore:
    name: str
    rule: str
    tasks: tuple[Evidence, ...]


@dataclass(frozen=True)
class Preregistration:
    paper_claims: tuple[str, ...]  # ids of the paper's claims
    user_claims: tuple[Claim, ...]
    scores: tuple[HeadlineScore, ...] = ()
    seeds: Any = None  # as the preset states them (its seeds are also in its config)
    extension: str = ""  # the planned extension, if any ("none")
    preset: str = ""
    where: str = "preregistration"
    registered_at: str = ""  # when `bertbench run` wrote it (the written file's; a preset's own block has none)
    amends: str = ""  # the sha256 of the registration this one replaces (studies.protocol.register), if any
    # the preset's design as registered (studies.preset.design_fingerprint: steps, variants, tasks, fine-tuning
    # settings); empty in registrations written before it was registered
    design: str = ""
    # what else decides a verdict, as registered (studies.preset.decisive_terms): each claim's definition (test,
    # threshold, task, metric), the task files' versions and hashes, the report's α and bootstrap draws; empty in
    # registrations written before it was registered
    decides: Any = None
    log: tuple = ()  # the entries of its LOG_FILE (read with the written file; not part of what is registered)
    # set by the report (check_stamps): records of an earlier registration, or an amendment logged after the first
    # fine-tuning finished: the family changed after results, and is judged as exploratory
    after_results: bool = False

    def as_dict(self) -> dict:
        """What `bertbench run` writes: the block as parsed, in a stable form (a re-run compares it)."""
        claims: list[Any] = list(self.paper_claims)
        claims += [{"claim": c.text, "name": c.name} if c.name else c.text for c in self.user_claims]
        return {"preset": self.preset, "claims": claims,
                "scores": [{"name": s.name, "rule": s.rule, "tasks": [dataclasses.asdict(e) for e in s.tasks]}
                           for s in self.scores],
                "seeds": self.seeds, "extension": self.extension, **({"design": self.design} if self.design else {}),
                **({"decides": self.decides} if self.decides else {}), **({"amends": self.amends} if self.amends else {})}

    @property
    def sha256(self) -> str:
        """The hash of what was registered (`as_dict`'s text; not when): what each record of its run carries."""
        return hashlib.sha256(text(self.as_dict()).encode("utf-8")).hexdigest()

    def stamp(self) -> dict[str, str]:
        """What a record of the study's run carries (`results.ResultRecord.preregistration`)."""
        return {"sha256": self.sha256, "registered_at": self.registered_at}


def text(block: Any) -> str:
    """A block (or the log's entries) as it is written and hashed."""
    import yaml

    return yaml.safe_dump(block, sort_keys=False, allow_unicode=True)


def parse_preregistration(raw: Any, where: str, claims: Claims, preset: str = "") -> Preregistration:
    """The block (a preset's, or a written file's) → Preregistration; one `BertbenchError` naming `where`."""
    if not isinstance(raw, dict) or not raw.get("claims") or not isinstance(raw["claims"], list):
        raise BertbenchError(f"{where}: expected 'claims:' with a list of claim ids or claim lines")
    unknown = set(raw) - _KEYS
    if unknown:
        raise BertbenchError(f"{where}: unknown key(s) {sorted(unknown)}; expected {sorted(_KEYS - {'preset'})}")
    ids = {c.id for c in claims.claims}
    # shown as stated in the pre-registration (its file), never by an index into its list
    shown = f"{PREREGISTRATION} ({where})"
    paper, user = [], []
    for i, entry in enumerate(raw["claims"], 1):
        at = f"{where}: claims[{i}]"
        if isinstance(entry, str) and " on " not in entry:
            if entry not in ids:
                raise BertbenchError(f"{at}: {entry!r} is no claim id of bertbench/reference/claims.yaml and no "
                                     "claim line ('A − B on TASK > T')")
            paper.append(entry)
        elif isinstance(entry, str):
            user.append(parse_claim(entry, at, origin=PREREGISTRATION, source=shown))
        elif isinstance(entry, dict) and set(entry) <= {"claim", "name"} and "claim" in entry:
            user.append(parse_claim(entry["claim"], at, str(entry["name"]) if entry.get("name") else None,
                                    PREREGISTRATION, shown))
        else:
            raise BertbenchError(f"{at}: expected a claim id, a claim line or {{claim: ..., name: ...}}, got {entry!r}")
    texts = [c.text for c in user]
    if len(set(paper)) != len(paper) or len(set(texts)) != len(texts):
        raise BertbenchError(f"{where}: a claim is listed twice")
    scores = tuple(_score(s, f"{where}: scores[{i}]") for i, s in enumerate(raw.get("scores") or [], 1))
    return Preregistration(tuple(paper), tuple(user), scores, raw.get("seeds"), str(raw.get("extension") or ""),
                           str(raw.get("preset") or preset), where, str(raw.get(REGISTERED_AT) or ""),
                           str(raw.get("amends") or ""), design=str(raw.get("design") or ""),
                           decides=raw.get("decides") or None)


def _score(raw: Any, where: str) -> HeadlineScore:
    if not isinstance(raw, dict) or not raw.get("name") or not raw.get("rule") or not raw.get("tasks"):
        raise BertbenchError(f"{where}: expected name, rule and tasks (each with its evidence)")
    tasks = []
    for i, t in enumerate(raw["tasks"], 1):
        if not isinstance(t, dict) or set(t) != _TASK_KEYS:
            raise BertbenchError(f"{where}: tasks[{i}]: expected exactly {sorted(_TASK_KEYS)}")
        try:
            e = Evidence(str(t["task"]), str(t["metric"]), float(t["published"]), str(t["source"]),
                         float(t["constant"]), str(t["constant_from"]))
        except (TypeError, ValueError):
            raise BertbenchError(f"{where}: tasks[{i}]: published and constant must be numbers") from None
        if not e.admitted:
            raise BertbenchError(f"{where}: tasks[{i}]: {e.task} is not admitted: {e.published:g} − {e.constant:g} "
                                 f"< {ADMISSION_MARGIN:g} points above the constant predictor ({e.source})")
        tasks.append(e)
    return HeadlineScore(str(raw["name"]), str(raw["rule"]), tuple(tasks))


def load_preregistration(results: Iterable[Path], claims: Claims) -> Optional[Preregistration]:
    """The pre-registration found under the given folders (searched like the records); None when there is none.
    Two that differ are an error: one report judges one family."""
    import yaml

    found: list[Preregistration] = []
    for folder in results:
        folder = Path(folder)
        paths = [folder] if folder.is_file() else sorted(folder.rglob(PREREGISTRATION_FILE))
        for path in (p for p in paths if p.name == PREREGISTRATION_FILE):
            try:
                raw = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
                raise BertbenchError(f"{path}: cannot read the pre-registration ({err})") from None
            # Named from the folder the report was given, not the machine's root: the name is printed in the
            # claims tables, which must read the same wherever the records are reported from.
            shown = path.name if folder.is_file() else (Path(folder.name) / path.relative_to(folder)).as_posix()
            found.append(dataclasses.replace(parse_preregistration(raw, shown, claims),
                                             log=tuple(read_log(path.parent / LOG_FILE))))
    if len({repr(p.as_dict()) for p in found}) > 1:
        raise BertbenchError(f"two different pre-registrations: {found[0].where} and {found[1].where}; report one "
                             "study at a time")
    return found[0] if found else None


def amended_from(prereg: Preregistration) -> dict[str, dict]:
    """{the sha256 of each registration this one amended (its log's 'amended' entries): that entry}."""
    return {str(e["amends"]): e for e in prereg.log if str(e.get("event", "")).startswith("amended") and e.get("amends")}


def check_stamps(records: Sequence, prereg: Optional[Preregistration]) -> Optional[Preregistration]:
    """The family's registration checked against the stamp each record carries (`record.preregistration`): a record
    of another registration is refused in one line; records of a registration this one amended, or an amendment
    logged after the first fine-tuning had finished, mark the family as changed after results (`after_results`).
    Records without a stamp (written before records carried one) are the registration's own."""
    if prereg is None:
        return None
    earlier = amended_from(prereg)
    after = any((e.get("finished") or {}).get("fine-tunings", 0) > 0 for e in earlier.values())
    for rec in records:
        stamp = rec.data.get("preregistration") or {}
        sha = stamp.get("sha256") if isinstance(stamp, dict) else None
        if not sha or sha == prereg.sha256:
            continue
        if sha not in earlier:
            raise BertbenchError(f"{rec.path}: a record of the pre-registration {sha[:12]}, not of this study's "
                                 f"{prereg.sha256[:12]} ({prereg.where}); one report judges one registered family: "
                                 "report that record's study apart")
        after = True
    return dataclasses.replace(prereg, after_results=after) if after else prereg


def read_log(path: Path) -> list[dict]:
    """A study's pre-registration log (LOG_FILE): its entries in order; [] where there is none."""
    import yaml

    if not path.is_file():
        return []
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise BertbenchError(f"{path}: cannot read the pre-registration log ({err})") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "event" in e and "at" in e for e in entries):
        raise BertbenchError(f"{path}: expected a list of entries, each with 'event' and 'at'")
    return entries


def log_line(entry: dict) -> str:
    """An entry as the study page lists it: when, what happened, how far the study had got."""
    done = entry.get("finished") or {}
    far = ", ".join(f"{n} {kind}" for kind, n in done.items()) if done else "nothing finished"
    planned = entry.get("planned") or {}
    if planned:
        far = ", ".join(f"{done.get(kind, 0)} of {n} {kind}" for kind, n in planned.items())
    why = f" ({entry['why']})" if entry.get("why") else ""
    return f"{entry['at']}: {entry['event']}{why}; {far} finished"


def log_note(prereg) -> str:
    """The study's log entries, for the claims table's family note on its page ("" where there is none)."""
    if prereg is None or not prereg.log:
        return ""
    return (f" Its log ({LOG_FILE}: every stopped, partial or amended run, written before any change to the "
            f"pre-registration was accepted): " + "; ".join(log_line(e) for e in prereg.log) + ".")


# --- writing the registration and its log (`bertbench run`, studies.protocol) ----------------------------------


def write_preregistration(path: Path, prereg):
    """Written before a study's first stage, with the time it is written; an existing file that registers something
    else stops the study, unless the new registration `amends` it (its sha256). Returns the registration as written
    (with its time: the first run's, on a re-run)."""
    import yaml

    if path.is_file():
        written = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        when = str(written.pop(REGISTERED_AT, "") or "") if isinstance(written, dict) else ""
        if text(written) == text(prereg.as_dict()):
            return dataclasses.replace(prereg, registered_at=when)
        old = hashlib.sha256(text(written).encode("utf-8")).hexdigest()
        if prereg.amends != old:  # an amendment names what it replaces (studies.protocol.register logs it first)
            raise BertbenchError(f"{path}: this study was pre-registered with other claims, scores, seeds, "
                                 "extension or design; a pre-registration cannot change once a study has started, unless the "
                                 f"new one says which it amends (amends: {old}), and the change is then logged on its "
                                 "page (or restore the preset)")
    registered = dataclasses.replace(prereg, registered_at=now_iso())
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text({**prereg.as_dict(), REGISTERED_AT: registered.registered_at}))
    return registered


def append_log(path: Path, entry: dict) -> None:
    """One more entry at the end of the log, the whole file rewritten atomically (never half an entry)."""
    atomic_write_text(path, text([*read_log(path), entry]))


def read_stamp(path: Path) -> dict[str, str]:
    """The stamp (`Preregistration.stamp`) of a written pre-registration file."""
    import yaml

    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return parse_preregistration(raw, str(path), load_claims()).stamp()


# --- the project's copy, the run folder's progress, a stop or a withdrawal logged ---------------------------------


def registrations_dir() -> Path:
    return Path(os.environ.get(REGISTRATIONS_VARIABLE) or PROJECT_ROOT / "leaderboards" / "registrations")


def committed_registration(name: str, records: Path = COMMITTED_RECORDS) -> Optional[Path]:
    """The project's registration of the study `name`: its registrations folder's, else its committed records'."""
    for path in (registrations_dir() / name / PREREGISTRATION_FILE,
                 Path(records) / name / "results" / PREREGISTRATION_FILE):
        if path.is_file():
            return path
    return None


def copy_registration(src: Path, dst: Path) -> None:
    """The registration and its log, from one folder to another (each file atomically; a missing log is none)."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in (PREREGISTRATION_FILE, LOG_FILE):
        if (src / name).is_file() and (src / name).resolve() != (dst / name).resolve():
            atomic_write_text(dst / name, (src / name).read_text(encoding="utf-8"))


def refuse_withdrawn(log: Path, name: str) -> None:
    gone = [e for e in read_log(log) if e.get("event") == WITHDRAWN]
    if gone:
        raise BertbenchError(f"{log}: the study {name} was withdrawn at {gone[-1]['at']} ({gone[-1].get('why', '')}); "
                             "a withdrawn pre-registration does not run: pre-register a new study under another name")


def withdraw(name: str, why: str) -> Path:
    """Withdraw the study `name` before it runs, with its reason, in the project's log of its registration (never
    silently dropped: its page lists the entry). Returns the log's path."""
    committed = committed_registration(name)
    if committed is None:
        raise BertbenchError(f"{name}: no registration of this study in {registrations_dir()} or its committed "
                             "records: nothing to withdraw")
    if not why.strip():
        raise BertbenchError("--withdraw: give the reason (it is logged and shown on the study's page)")
    refuse_withdrawn(committed.parent / LOG_FILE, name)
    if committed.parent != registrations_dir() / name:
        copy_registration(committed.parent, registrations_dir() / name)
    log = registrations_dir() / name / LOG_FILE
    append_log(log, {"event": WITHDRAWN, "why": why.strip(), "at": now_iso(),
                     "sha256": read_stamp(registrations_dir() / name / PREREGISTRATION_FILE)["sha256"]})
    return log


def log_stop(out: Path, why: str, name: str = "") -> None:
    """A pre-registered study's run that stops (a failed or killed stage, Ctrl-C, SIGTERM): what had finished."""
    results = Path(out) / "results"
    if not (results / PREREGISTRATION_FILE).is_file():
        return
    stamp = read_stamp(results / PREREGISTRATION_FILE)
    append_log(results / LOG_FILE, {"event": "stopped", "why": why, "at": now_iso(), "sha256": stamp["sha256"],
                                    **progress(Path(out))})
    if name:  # the project's copy of the log, which later runs check (never only the run folder's)
        copy_registration(results, registrations_dir() / name)


def progress(out: Path, planned: Optional[dict[str, int]] = None) -> dict:
    """How far a study's folder has got: the finished pre-trainings (a summary.json) and fine-tunings (a done
    marker), the pre-trainings started and not finished, and how many it plans of each where given
    (studies.protocol.planned)."""
    pre = sorted(p.parent.name for p in (out / "pretrain").glob("*/summary.json"))
    started = sorted(d.name for d in (out / "pretrain").glob("*") if d.is_dir() and not (d / "summary.json").is_file())
    ft = sorted(f"{m.parent.name}/{m.name[len('done-'):-len('.json')]}" for m in (out / "results").glob("*/done-*.json"))
    far = {"finished": {"pre-trainings": len(pre), "fine-tunings": len(ft)}, "started, unfinished": started,
           "ran": {"pre-trainings": pre, "fine-tunings": ft}}
    return {**far, "planned": planned} if planned is not None else far


__all__ = ["ADMISSION_MARGIN", "CONFIRMATORY_PRETRAIN_SEEDS", "Evidence", "HeadlineScore", "LOG_FILE",
           "PREREGISTRATION_FILE", "Preregistration", "REGISTERED_AT", "REGISTRATIONS_VARIABLE", "WITHDRAWN",
           "amended_from", "append_log", "check_stamps", "committed_registration", "copy_registration",
           "load_preregistration", "log_line", "log_note", "log_stop", "parse_preregistration", "progress", "read_log",
           "read_stamp", "refuse_withdrawn", "registrations_dir", "text", "withdraw", "write_preregistration"]
