"""A preset (recipes/presets/*.yaml): which variants a study pre-trains, with which seeds, and how it
fine-tunes them. Loading one checks all of it, so that a bad value is one line before anything runs."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from bertbench.claims import load_claims
from bertbench.config import PretrainConfig, resolve_recipe, to_dict
from bertbench.config_files import check_file, deep_merge, from_dict, load_yaml
from bertbench.errors import BertbenchError, did_you_mean
from bertbench.registration import parse_preregistration
from bertbench.tasks import resolve_task_names, task_registry, valid_tasks
from bertbench.training.finetune_settings import FinetuneSettings
from bertbench.paths import RECIPES_DIR

PRESETS_DIR = RECIPES_DIR / "presets"


@dataclass
class VariantSpec:
    name: str  # folder name and the report's provenance key, e.g. "mlm_nsp"
    pretrain: dict = field(default_factory=dict)  # overrides onto the preset's base PretrainConfig
    random_init: bool = False  # no pre-training: the control row (same size, same tokenizer)
    # this variant's pre-training seeds, instead of the preset's `pretrain_seeds` (see RunPreset)
    pretrain_seeds: Optional[list[int]] = None
    # this variant's fine-tuning tasks, some of finetune.tasks (None: all of them): a claim on one task need not
    # pay for the others' fine-tunings on every pre-training seed
    tasks: Optional[list[str]] = None


@dataclass(kw_only=True)
class FinetuneSpec(FinetuneSettings):
    """A preset's `finetune:` block: the shared fine-tuning settings (the same for every variant), plus which
    tasks run and which extra runs (feature-based, Figure 5) the study makes."""

    tasks: list[str]
    feature_based_tasks: list[str] = field(default_factory=list)  # also run these feature-based (paper Table 7)
    # ... for these variants only (empty: every one); Table 8's feature-based column compares masking procedures
    feature_based_variants: list[str] = field(default_factory=list)
    # The paper's Figure 5: these variants' snapshots (pretrain.snapshots) fine-tuned on these tasks too
    figure5_variants: list[str] = field(default_factory=list)
    figure5_tasks: list[str] = field(default_factory=list)
    figure5_seeds: list[int] = field(default_factory=list)  # empty: the same seeds as the main fine-tunings
    # task → at most this many epochs, each one scored: the (lr, epoch) pair is selected by the grid's rule
    # (FinetuneRequest.select_epoch). A pre-trained tiny model is still learning STS-B and CoLA after 3 epochs,
    # random init overfits them after 2-3: early stopping on the held-out slice gives each its best.
    epoch_selection: dict[str, int] = field(default_factory=dict)


@dataclass
class RunPreset:
    name: str
    description: str
    pretrain: PretrainConfig
    variants: list[VariantSpec]
    finetune: FinetuneSpec
    title: str = ""
    # A recipe (name in recipes/ or a YAML path) that `pretrain` starts from: the preset then writes only the
    # keys it changes, instead of a copy of the recipe that drifts from it.
    recipe: str = ""
    # Another preset whose `finetune:` block this one starts from (a key written here replaces that key): one
    # fine-tuning protocol shared by several studies, written once (masking and table6 use cpu-quick's).
    finetune_from: str = ""
    # Stages run this many at a time, each in its own process with a share of the threads (1: one after the
    # other in this process); see studies.scheduler. `run --workers` overrides it.
    workers: int = 1
    # Accelerators the stages are spread over, one per worker (worker i pinned to device i mod N); with N > 1
    # the workers default to N (docs/scale-data.md). `run --devices` overrides it.
    devices: int = 1
    # With workers > 1: keep every stage on its first share of the threads, start to end, instead of giving the
    # running stages a freed core. Slower at a study's tail, but then no number depends on which stage ended
    # first (a stage's thread count is the order of its floating-point sums; studies.scheduler).
    fixed_threads: bool = False
    # The pre-trainings' steps: as many as fit this many minutes here, converted once from this host's calibrated
    # step time and kept in the study's folder (studies.budget), at most pretrain.max_steps. None: max_steps.
    step_budget_minutes: Optional[float] = None
    # Pre-train every pre-trained variant once per seed (its initialisation and data order), each a stage of
    # its own; every (variant, seed) checkpoint is fine-tuned with the tasks' fine-tuning seeds. Empty: once,
    # with `pretrain.seed`, as a preset without this key always did. A variant may give its own.
    pretrain_seeds: Optional[list[int]] = None
    # What the study will be judged on, stated before it runs (bertbench.registration): its claims family,
    # headline scores with the outside evidence that admits each task, seeds and any planned extension. Parsed
    # by load_preset into a Preregistration; `run` writes it into results/ before the first stage.
    preregistration: Any = None


def list_presets() -> dict[str, Path]:
    return {p.stem: p for p in sorted(PRESETS_DIR.glob("*.yaml"))}


def load_preset(name_or_path: str) -> RunPreset:
    p = Path(name_or_path)
    if not (p.suffix in (".yaml", ".yml") and p.is_file()):
        known = list_presets()
        if name_or_path not in known:
            raise BertbenchError(did_you_mean(name_or_path, known, "preset"))
        p = known[name_or_path]
    raw = load_yaml(p)
    if isinstance(raw, dict) and raw.get("recipe"):
        recipe = resolve_recipe(str(raw["recipe"]))
        base = load_yaml(recipe)
        check_file(PretrainConfig, base, recipe)  # a recipe's own problems named in the recipe, not the preset
        raw = {**raw, "pretrain": deep_merge(base, raw.get("pretrain") or {})}
    if isinstance(raw, dict) and raw.get("finetune_from"):
        raw = {**raw, "finetune": _finetune_block(raw, p, [p.stem])}
    check_file(RunPreset, raw, p)  # every problem with its line
    preset = from_dict(RunPreset, raw, str(p))
    names = [v.name for v in preset.variants]
    if len(set(names)) != len(names):
        raise BertbenchError(f"{p}: variant names repeat: {names}")
    for v in preset.variants:  # every variant's config must be valid before anything runs
        try:
            cfg = variant_config(preset, v, Path("."))
        except BertbenchError as err:  # a value check names only the value: say where it came from
            raise BertbenchError(f"{p}: variant {v.name!r}: {err}") from None
        if cfg.num_nodes > 1:  # its other nodes' processes must be started there, by the cluster's launcher
            raise BertbenchError(f"{p}: variant {v.name!r}: num_nodes {cfg.num_nodes}: a study runs on one machine; "
                                 "on a Slurm cluster, `run --launcher slurm --nodes N` gives each pre-training N nodes "
                                 "(docs/scale.md)")
    _check_pretrain_seeds(preset, p)
    _check_finetune(preset, p, names)
    if preset.preregistration is not None:
        if isinstance(preset.preregistration, dict) and "seeds" in preset.preregistration:
            raise BertbenchError(f"{p}: preregistration: no 'seeds' key: the seeds are the preset's own "
                                 "(pretrain_seeds, finetune.seeds), and the pre-registration records them from there")
        if isinstance(preset.preregistration, dict) and "design" in preset.preregistration:
            raise BertbenchError(f"{p}: preregistration: no 'design' key: the design is the preset itself, and the "
                                 "pre-registration records its fingerprint from there")
        prereg = parse_preregistration(preset.preregistration, f"{p}: preregistration", load_claims(), preset=preset.name)
        seeds = {v.name: pretrain_seeds(preset, v) for v in preset.variants if not v.random_init}
        preset.preregistration = dataclasses.replace(
            prereg, seeds={"pretrain": seeds, "finetune": preset.finetune.seeds}, design=design_fingerprint(raw),
            decides=decisive_terms(preset, prereg))
    if preset.workers < 1:
        raise BertbenchError(f"{p}: workers {preset.workers}: expected an integer ≥ 1")
    if preset.step_budget_minutes is not None and not preset.step_budget_minutes > 0:
        raise BertbenchError(f"{p}: step_budget_minutes {preset.step_budget_minutes}: expected a positive number")
    if preset.devices < 1:
        raise BertbenchError(f"{p}: devices {preset.devices}: expected an integer ≥ 1")
    return preset


# What a pre-registration fixes beside its claims and seeds is the design the preset states, with its recipe and
# the fine-tuning block it starts from merged in: steps, variants, tasks, fine-tuning settings, workers. A study
# cannot keep its registration while any of them changes (studies.protocol.register: only by `amends`, logged).
# The preset's prose and the registration block itself are not design.
NOT_DESIGN = ("title", "description", "preregistration")


def design_fingerprint(raw: dict) -> str:
    design = {k: v for k, v in raw.items() if k not in NOT_DESIGN}
    return "sha256:" + hashlib.sha256(json.dumps(design, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:16]


def decisive_terms(preset: "RunPreset", prereg) -> dict:
    """What decides a pre-registered verdict beside the design, as it stands now: each paper claim's definition
    (its sides, scores, test and threshold, approach, checkpoint: reference/claims.yaml), each task's version and a
    hash of its definition (includes resolved; task files may change without a new version), and the report's
    family-wise α and bootstrap draws. The registration's hash covers it, so none of these can change under one
    registration without an amendment (studies.protocol.register)."""
    from bertbench.claims import ALPHA, RESAMPLES, RNG_SEED  # read at each call, as the report reads them

    claims = {c.id: c for c in load_claims().claims}
    defined = {cid: {"a": c.a, "b": c.b, "scores": [list(s) for s in c.scores], "test": c.comparator,
                     "threshold": c.threshold, "approach": c.approach, "checkpoint": c.checkpoint}
               for cid in prereg.paper_claims for c in [claims[cid]]}
    ft = preset.finetune
    names = [*ft.tasks, *ft.feature_based_tasks, *ft.figure5_tasks, *(t for v in preset.variants for t in v.tasks or [])]
    specs = task_registry().tasks
    tasks = {}
    for name in sorted({t for n in dict.fromkeys(names) for t in resolve_task_names(n)}):
        spec = dataclasses.asdict(specs[name])
        spec.pop("path", None)  # where it was read, not what it is
        text = json.dumps(spec, sort_keys=True, default=str).encode("utf-8")
        tasks[name] = f"v{spec.get('version')} sha256:{hashlib.sha256(text).hexdigest()[:16]}"
    return {"claims": defined, "tasks": tasks, "report": {"alpha": ALPHA, "bootstrap": RESAMPLES, "rng_seed": RNG_SEED}}


def _finetune_block(raw: dict, p: Path, chain: list[str]) -> dict:
    """`raw`'s finetune block over the one of the preset it names in `finetune_from` (itself resolved the same
    way): each key written here replaces the base's whole value (tasks, epoch_selection), the rest is the base's."""
    name = str(raw["finetune_from"])
    known = list_presets()
    if name not in known:
        raise BertbenchError(f"{p}: finetune_from: " + did_you_mean(name, known, "preset"))
    if name in chain:
        raise BertbenchError(f"{p}: finetune_from: a cycle ({' → '.join([*chain, name])})")
    base = load_yaml(known[name])
    if base.get("finetune_from"):
        base_block = _finetune_block(base, known[name], [*chain, name])
    else:  # a whole block: its problems are named in its own file, not in the preset that borrows it
        base_block = base.get("finetune") or {}
        check_file(FinetuneSpec, base_block, known[name], "finetune.")
    return {**base_block, **(raw.get("finetune") or {})}


def _check_pretrain_seeds(preset: RunPreset, p: Path) -> None:
    def check(seeds: Any, where: str) -> None:
        if (not isinstance(seeds, list) or not seeds
                or any(isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 2**32 for s in seeds)):
            raise BertbenchError(f"{p}: {where} {seeds!r}: expected a non-empty list of integer seeds in [0, 2**32)")
        if len(set(seeds)) != len(seeds):
            raise BertbenchError(f"{p}: {where} {seeds!r}: a seed repeats (each seed is one pre-training)")

    if preset.pretrain_seeds is not None:  # written but empty is an error too, not a silent single pre-training
        check(preset.pretrain_seeds, "pretrain_seeds")
    for v in preset.variants:
        if v.pretrain_seeds is None:
            continue
        if v.random_init:
            raise BertbenchError(f"{p}: variant {v.name!r}: pretrain_seeds given, but random init has no pre-training")
        check(v.pretrain_seeds, f"variant {v.name!r}: pretrain_seeds")


def pretrain_seeds(preset: RunPreset, variant: VariantSpec) -> list[Optional[int]]:
    """The seeds a variant is pre-trained with; [None]: once, with the config's own seed (no `pretrain_seeds`)."""
    seeds = variant.pretrain_seeds if variant.pretrain_seeds is not None else preset.pretrain_seeds
    return [None] if variant.random_init or not seeds else list(seeds)


def _check_finetune(preset: RunPreset, p: Path, names: list[str]) -> None:
    ft = preset.finetune
    ft.check(lambda key: f"{p}: finetune.{key}")
    if bool(ft.figure5_variants) != bool(ft.figure5_tasks):
        raise BertbenchError(f"{p}: finetune.figure5_variants and figure5_tasks go together (Figure 5 needs both)")
    for v in preset.variants:
        if v.tasks is not None and (not v.tasks or set(v.tasks) - set(ft.tasks)):
            raise BertbenchError(f"{p}: variant {v.name!r}: tasks {v.tasks}: expected some of finetune.tasks "
                                 f"({', '.join(ft.tasks)})")
    unknown = [name for name in ft.feature_based_variants if name not in names]
    if unknown:
        raise BertbenchError(f"{p}: finetune.feature_based_variants: {unknown} are not variants of this preset ({', '.join(names)})")
    known = valid_tasks()
    for key, per_task in (("epoch_selection", ft.epoch_selection), ("train_caps", ft.train_caps)):
        # a misspelt task would be ignored, its tasks trained by the default; one a base (finetune_from) names
        # and this preset does not run is fine
        typo = next((task for task in per_task if task not in known), None)
        if typo is not None:
            raise BertbenchError(f"{p}: finetune.{key}: " + did_you_mean(typo, known, "task"))
    bad = {task: n for task, n in ft.epoch_selection.items() if not isinstance(n, int) or n < 1}
    if bad or (ft.epoch_selection and ft.grid == "none"):
        raise BertbenchError(f"{p}: finetune.epoch_selection {bad or ft.epoch_selection}: "
                             + ("each task's most epochs must be an integer ≥ 1" if bad else "needs grid heldout or paper"))
    if any(seed < 0 for seed in ft.figure5_seeds):
        raise BertbenchError(f"{p}: finetune.figure5_seeds {ft.figure5_seeds}: expected seeds ≥ 0")
    for name in ft.figure5_variants:
        v = next((v for v in preset.variants if v.name == name), None)
        if v is None or v.random_init:
            raise BertbenchError(f"{p}: finetune.figure5_variants: {name!r} is not a pre-trained variant of this preset")
        if variant_config(preset, v, Path(".")).snapshots < 2:
            raise BertbenchError(f"{p}: finetune.figure5_variants: {name!r} keeps no snapshots; set pretrain.snapshots (e.g. 5)")


def variant_tasks(preset: RunPreset, variant: VariantSpec) -> tuple[list[str], list[str]]:
    """A variant's fine-tuning tasks and, of those, the ones it also runs feature-based, in finetune.tasks' order:
    what the plan runs and the protocol counts and judges (one rule: a variant's own `tasks` bound both)."""
    ft = preset.finetune
    tasks = [t for t in ft.tasks if variant.tasks is None or t in variant.tasks]
    featured = not ft.feature_based_variants or variant.name in ft.feature_based_variants
    return tasks, [t for t in tasks if t in ft.feature_based_tasks] if featured else []


def task_settings(ft: FinetuneSpec, task: str, seeds: Optional[list[int]] = None) -> dict[str, Any]:
    """The fine-tuning settings one task's stage runs with: the shared ones, with Figure 5's seeds where given,
    and the task's most epochs plus epoch selection where `epoch_selection` names it."""
    settings = ft.settings() if seeds is None else {**ft.settings(), "seeds": seeds}
    if task in ft.epoch_selection:
        settings = {**settings, "epochs": ft.epoch_selection[task], "select_epoch": True}
    return settings


def variant_config(preset: RunPreset, variant: VariantSpec, data_dir: Path) -> PretrainConfig:
    merged = deep_merge(to_dict(preset.pretrain), variant.pretrain)
    return from_dict(PretrainConfig, merged, f"preset {preset.name} variant {variant.name}").with_data_dir(data_dir)
