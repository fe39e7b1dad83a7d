"""The confirmatory protocol a pre-registered preset must keep before it runs (`bertbench run` and `run --validate`):
every pre-registered claim measurable by the preset, at least CONFIRMATORY_PRETRAIN_SEEDS pre-training seeds a
side that pre-trains, and seeds no committed study's records used; each refusal is one `BertbenchError` line. The
rules, why each holds, and the registration's log (`register`) are in docs/claims.md, "The confirmatory protocol".
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bertbench.claims import load_claims, masking_suffix, names_variant, objective_label
from bertbench.errors import BertbenchError
from bertbench.paths import COMMITTED_RECORDS, PROJECT_ROOT  # COMMITTED_RECORDS: one folder per committed study
from bertbench.reference import load_paper_numbers
from bertbench.registration import (
    CONFIRMATORY_PRETRAIN_SEEDS, LOG_FILE, PREREGISTRATION_FILE, append_log, committed_registration, copy_registration,
    progress, read_stamp, refuse_withdrawn, registrations_dir, write_preregistration,
)
from bertbench.studies.preset import RunPreset, VariantSpec, pretrain_seeds, variant_config, variant_tasks


@dataclass(frozen=True)
class UsedSeeds:
    """The seeds the committed studies' records used: {seed: the first study (by name) that used it}."""

    pretrain: dict[int, str]
    finetune: dict[int, str]


def committed_seeds(root: Path = COMMITTED_RECORDS, skip: str = "") -> UsedSeeds:
    """Every pre-training seed (`pretrain_seed`) and fine-tuning seed (`seed`) of the records under `root`'s study
    folders, the study `skip` left out."""
    pretrain: dict[int, str] = {}
    finetune: dict[int, str] = {}
    for study in sorted(p for p in Path(root).glob("*") if p.is_dir() and p.name != skip):
        for path in sorted(study.rglob("*.record.json")):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as err:
                raise BertbenchError(f"{path}: not a result record ({err})") from None
            if record.get("pretrain_seed") is not None:
                pretrain.setdefault(int(record["pretrain_seed"]), study.name)
            if record.get("seed") is not None:
                finetune.setdefault(int(record["seed"]), study.name)
    return UsedSeeds(pretrain, finetune)


def check_protocol(preset: RunPreset, root: Path = COMMITTED_RECORDS) -> None:
    """A pre-registered preset's protocol (the module's notes); nothing for a preset without a pre-registration."""
    if preset.preregistration is None:
        return
    where = preset.preregistration.where  # "<the preset's file>: preregistration"
    check_measurable(preset, where)
    check_pretrain_seeds(preset, where)
    check_fresh_seeds(preset, where, root)


def _pretrained_seeds(preset: RunPreset, v: VariantSpec) -> list[int]:
    """The pre-training seeds a variant runs with (the config's own seed where the preset gives none)."""
    return [s if s is not None else variant_config(preset, v, Path(".")).seed for s in pretrain_seeds(preset, v)]


def check_fresh_seeds(preset: RunPreset, where: str, root: Path = COMMITTED_RECORDS) -> None:
    used = committed_seeds(root, skip=preset.name)
    ft = preset.finetune
    if ft.seeds is None:
        raise BertbenchError(f"{where}: finetune.seeds: a pre-registered study names its fine-tuning seeds (fresh "
                             "ones: no committed study's), not the tasks' defaults")
    for v in preset.variants:
        if v.random_init:
            continue
        for seed in _pretrained_seeds(preset, v):
            if seed in used.pretrain:
                raise BertbenchError(_reused(where, f"pre-training seed {seed} of variant {v.name!r}",
                                             used.pretrain[seed], root))
    for seed in [*ft.seeds, *ft.figure5_seeds]:
        if seed in used.finetune:
            arms = ", ".join(v.name for v in preset.variants)
            raise BertbenchError(_reused(where, f"fine-tuning seed {seed} (every arm: {arms})", used.finetune[seed],
                                         root))


def _reused(where: str, what: str, study: str, root: Path) -> str:
    shown = (Path(root) / study).relative_to(PROJECT_ROOT) if Path(root).is_relative_to(PROJECT_ROOT) else Path(root) / study
    return (f"{where}: {what} was used by the committed study {study} ({shown.as_posix()}); a pre-registered study "
            "draws seeds no committed study has used (its evidence would not be new)")


def check_pretrain_seeds(preset: RunPreset, where: str) -> None:
    for v in preset.variants:
        seeds = pretrain_seeds(preset, v)
        if not v.random_init and len(seeds) < CONFIRMATORY_PRETRAIN_SEEDS:
            raise BertbenchError(f"{where}: variant {v.name!r} pre-trains with {len(seeds)} seed(s): a confirmatory "
                                 f"design needs at least {CONFIRMATORY_PRETRAIN_SEEDS} pre-training seeds a side that "
                                 "pre-trains (`bertbench plan` sizes it)")


# --- what the preset can measure ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Arm:
    """A preset variant as the report will name it, and what it is fine-tuned on."""

    size: str
    objective: str  # the report's label without the size ("MLM+NSP", "random init", "MLM+NSP 40%")
    tasks: frozenset[str]  # fine-tuned
    feature_based: frozenset[str]
    figure5: frozenset[str]  # fine-tuned from its snapshots too

    external = None  # what claims.names_variant reads of a variant: a preset's arm is never an external model

    @property
    def label(self) -> str:
        return f"{self.size} {self.objective}"


def _arms(preset: RunPreset) -> list[_Arm]:
    ft = preset.finetune
    arms = []
    for v in preset.variants:
        cfg = variant_config(preset, v, Path("."))
        # what its records' model.pretraining will say of its objective and masking
        pre = None if v.random_init else {"objective": cfg.objective, "mask_ratio": cfg.data.mask_ratio,
                                          "mask_procedure": list(cfg.data.mask_procedure),
                                          "whole_word_mask": cfg.data.whole_word_mask}
        label, suffix = objective_label(pre), masking_suffix(pre)
        tasks, features = map(frozenset, variant_tasks(preset, v))
        figure5 = frozenset(ft.figure5_tasks) if v.name in ft.figure5_variants else frozenset()
        arms.append(_Arm(cfg.model_size, f"{label} {suffix}" if suffix else label, tasks, features, figure5))
    return arms


def _unmeasurable(what: str, text: str, where: str) -> BertbenchError:
    return BertbenchError(f"{where}: pre-registered claim {text!r}: the preset cannot measure it ({what}); a claim "
                          "it cannot measure would leave Holm's family silently")


def check_measurable(preset: RunPreset, where: str) -> None:
    """Every pre-registered claim has both of its variants at one size, each fine-tuned on every task it scores."""
    prereg, arms = preset.preregistration, _arms(preset)
    aliases = load_paper_numbers().task_aliases
    claims = {c.id: c for c in load_claims().claims}
    for claim_id in prereg.paper_claims:
        c = claims[claim_id]
        for task, _ in c.scores:
            if not any(aliases.get(t, t) == task for a in arms for t in a.tasks):
                raise _unmeasurable(f"no task of it stands for the paper's {task}", claim_id, where)
        pairs = [(x, y) for x in arms for y in arms if x is not y and x.size == y.size
                 and (x.objective, y.objective) == (c.a, c.b)]
        if not pairs:
            raise _unmeasurable(f"no model size has both {c.a} and {c.b}", claim_id, where)
        if not any(_runs(x, c, aliases) and _runs(y, c, aliases) for x, y in pairs):
            kind = "feature-based" if c.approach == "feature-based" else (
                "from its snapshots (Figure 5)" if c.checkpoint != "last" else "fine-tuned")
            raise _unmeasurable(f"{c.a} and {c.b} are not both {kind} on {', '.join(t for t, _ in c.scores)}",
                                claim_id, where)
    for claim in prereg.user_claims:
        _check_user_claim(claim, arms, where)


def _runs(arm: _Arm, claim, aliases) -> bool:
    """Whether the arm is fine-tuned on every task of a paper claim, as the claim needs it."""
    tasks = arm.feature_based if claim.approach == "feature-based" else (
        arm.figure5 if claim.checkpoint != "last" else arm.tasks)
    return all(any(aliases.get(t, t) == task for t in tasks) for task, _ in claim.scores)


def _check_user_claim(claim, arms: list[_Arm], where: str) -> None:
    def named(name: str) -> list[tuple[_Arm, bool]]:
        return [(a, exact) for a in arms if (exact := names_variant(name, a)) is not None]

    sides_a, sides_b = named(claim.a), named(claim.b)
    for name, found in ((claim.a, sides_a), (claim.b, sides_b)):
        if not found:
            raise _unmeasurable(f"no variant of it is {name!r}", claim.text, where)
    pairs = [(x, y) for x, ex in sides_a for y, ey in sides_b if x is not y and ((ex and ey) or x.size == y.size)]
    if not pairs:
        raise _unmeasurable(f"no model size has both {claim.a} and {claim.b}", claim.text, where)
    tasks = [task for task, _ in claim.scores]
    if not any(set(tasks) <= x.tasks and set(tasks) <= y.tasks for x, y in pairs):
        raise _unmeasurable(f"{claim.a} and {claim.b} are not both fine-tuned on {', '.join(tasks)}", claim.text, where)


# --- the registration and its log ------------------------------------------------------------------------------


def register(out: Path, preset: RunPreset):
    """Write (or re-check) the study's pre-registration before its first stage, the log first: a folder where an
    earlier run stopped part-way gets a 'resumed after a partial run' entry (what ran, how far), and a changed
    registration is accepted only when it `amends` the written one, after an 'amended' entry. Returns the
    registration as written (write_preregistration)."""
    from bertbench.runtime.provenance import now_iso

    results = Path(out) / "results"
    path, prereg = results / PREREGISTRATION_FILE, preset.preregistration
    far = progress(Path(out), planned(preset))  # its stages' output: copying the registration changes nothing
    committed = committed_registration(preset.name)
    if committed is not None:
        refuse_withdrawn(committed.parent / LOG_FILE, preset.name)
        if not path.is_file():  # a new or emptied run folder starts from the project's registration and its log
            copy_registration(committed.parent, results)
            append_log(results / LOG_FILE, {"event": "started in a folder without the earlier run's files",
                                            "at": now_iso(), "sha256": read_stamp(path)["sha256"], **far})
    if path.is_file():
        was = read_stamp(path)["sha256"]
        short = any(far["finished"][kind] < n for kind, n in far["planned"].items())
        if short and (any(far["finished"].values()) or far["started, unfinished"]):
            append_log(results / LOG_FILE, {"event": "resumed after a partial run", "at": now_iso(), "sha256": was,
                                            **far})
        if was != prereg.sha256 and prereg.amends == was:
            append_log(results / LOG_FILE, {"event": f"amended (was {was[:12]}, now {prereg.sha256[:12]})",
                                            "at": now_iso(), "sha256": prereg.sha256, "amends": was, **far})
    written = write_preregistration(path, prereg)  # an amendment replaces the file atomically, with its own time
    copy_registration(results, registrations_dir() / preset.name)  # the project's copy: the one later runs check
    return written


def planned(preset: RunPreset) -> dict[str, int]:
    """How many pre-trainings and fine-tunings the preset plans (Figure 5's follow-ups aside: they are known only
    once their snapshots exist)."""
    planned_pre = planned_ft = 0
    for v in preset.variants:
        models = 1 if v.random_init else len(pretrain_seeds(preset, v))
        tasks, features = variant_tasks(preset, v)
        planned_pre += 0 if v.random_init else models
        planned_ft += models * (len(tasks) + len(features))
    return {"pre-trainings": planned_pre, "fine-tunings": planned_ft}


__all__ = ["UsedSeeds", "check_fresh_seeds", "check_measurable", "check_pretrain_seeds", "check_protocol",
           "committed_seeds", "planned", "register"]
