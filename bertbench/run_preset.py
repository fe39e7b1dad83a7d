"""`bertbench run --preset NAME`: raw text → tokenizer → pre-train each variant → fine-tune each on every
task with data → report. One command, re-runnable: a stage whose config hash already has a finished
output is skipped, and an interrupted pre-training resumes from its checkpoint.

Output folder:
    tokenizer-<hash>/               WordPiece trained once on the corpus, shared by every variant
    pretrain/<variant>-<hash>/      a pre-training run directory per variant
    results/<variant>-<hash>/<task>/  result records + predictions files
    <preset>.md, <preset>.csv, plots/   `bertbench report` over results/
    stages.json                     wall time of each stage of the last invocation
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bertbench.config import PretrainConfig, deep_merge, from_dict, load_yaml, resolve_recipe, to_dict
from bertbench.errors import BertbenchError, did_you_mean
from bertbench.finetune_settings import FinetuneSettings
from bertbench.paths import RECIPES_DIR

PRESETS_DIR = RECIPES_DIR / "presets"


@dataclass
class VariantSpec:
    name: str  # folder name and the report's provenance key, e.g. "mlm_nsp"
    pretrain: dict = field(default_factory=dict)  # overrides onto the preset's base PretrainConfig
    random_init: bool = False  # no pre-training: the control row (same size, same tokenizer)


@dataclass(kw_only=True)
class FinetuneSpec(FinetuneSettings):
    """A preset's `finetune:` block: the shared fine-tuning settings (the same for every variant), plus which
    tasks run and which extra runs (feature-based, Figure 5) the study makes."""

    tasks: list[str]
    feature_based_tasks: list[str] = field(default_factory=list)  # also run these feature-based (paper Table 7)
    # The paper's Figure 5: these variants' snapshots (pretrain.snapshots) fine-tuned on these tasks too
    figure5_variants: list[str] = field(default_factory=list)
    figure5_tasks: list[str] = field(default_factory=list)


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
        base = load_yaml(resolve_recipe(str(raw["recipe"])))
        raw = {**raw, "pretrain": deep_merge(base, raw.get("pretrain") or {})}
    preset = from_dict(RunPreset, raw, str(p))
    names = [v.name for v in preset.variants]
    if len(set(names)) != len(names):
        raise BertbenchError(f"{p}: variant names repeat: {names}")
    for v in preset.variants:  # every variant's config must be valid before anything runs
        try:
            variant_config(preset, v, Path("."))
        except BertbenchError as err:  # a value check names only the value: say where it came from
            raise BertbenchError(f"{p}: variant {v.name!r}: {err}") from None
    ft = preset.finetune
    ft.check(lambda key: f"{p}: finetune.{key}")
    if bool(ft.figure5_variants) != bool(ft.figure5_tasks):
        raise BertbenchError(f"{p}: finetune.figure5_variants and figure5_tasks go together (Figure 5 needs both)")
    for name in ft.figure5_variants:
        v = next((v for v in preset.variants if v.name == name), None)
        if v is None or v.random_init:
            raise BertbenchError(f"{p}: finetune.figure5_variants: {name!r} is not a pre-trained variant of this preset")
        if variant_config(preset, v, Path(".")).snapshots < 2:
            raise BertbenchError(f"{p}: finetune.figure5_variants: {name!r} keeps no snapshots; set pretrain.snapshots (e.g. 5)")
    return preset


def variant_config(preset: RunPreset, variant: VariantSpec, data_dir: Path) -> PretrainConfig:
    merged = deep_merge(to_dict(preset.pretrain), variant.pretrain)
    return from_dict(PretrainConfig, merged, f"preset {preset.name} variant {variant.name}").with_data_dir(data_dir)


def config_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:10]


def run_preset(
    preset: RunPreset, data_dir: Path, out: Path, echo: Callable[[str], None] = print, plots: bool = True
) -> dict[str, Any]:
    """Run every stage not already done; returns {stage: seconds} of this invocation."""
    from bertbench.tokenizer import WordPieceTokenizer

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stages: dict[str, float] = {}
    data_dir = Path(data_dir)

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        result = fn()
        stages[name] = round(time.perf_counter() - t0, 1)
        echo(f"[{name}] {stages[name]:.0f} s")
        return result

    # 1. one tokenizer for every variant, so the comparison changes only the objective
    base = variant_config(preset, VariantSpec("base"), data_dir)
    tokenizer_path = base.tokenizer
    if not base.tokenizer or base.tokenizer == "train":
        key = config_hash({"corpus": base.data.corpus, "docs": base.data.max_documents, "vocab": base.tokenizer_vocab_size,
                           "lower": base.lowercase})
        tok_dir = out / f"tokenizer-{key}"
        tokenizer_path = str(tok_dir)
        if not (tok_dir / "vocab.txt").is_file():
            def train_tokenizer():
                from bertbench.data.corpus import iter_documents

                sentences = (s for doc in iter_documents(base.data.corpus, base.data.max_documents) for s in doc)
                WordPieceTokenizer.train(sentences, vocab_size=base.tokenizer_vocab_size, lowercase=base.lowercase).save(tok_dir)

            stage("tokenizer", train_tokenizer)
        else:
            echo(f"[tokenizer] done before: {tok_dir}")

    # 2. pre-train each variant (skipped when finished, resumed when interrupted)
    sources: dict[str, tuple[str, str]] = {}  # variant → (model source, results folder name)
    for v in preset.variants:
        cfg = dataclasses.replace(variant_config(preset, v, data_dir), tokenizer=tokenizer_path)
        if v.random_init:
            sources[v.name] = (f"random:{cfg.model_size}", f"{v.name}-{config_hash(['random', cfg.model_size, tokenizer_path])}")
            continue
        h = config_hash(to_dict(cfg))
        run_dir = out / "pretrain" / f"{v.name}-{h}"
        if (run_dir / "summary.json").is_file():
            echo(f"[pretrain {v.name}] done before: {run_dir}")
        else:
            from bertbench.training.pretrain_run import pretrain

            stage(f"pretrain {v.name}", lambda: pretrain(cfg, run_dir, resume="auto"))
        sources[v.name] = (str(run_dir / "checkpoint"), f"{v.name}-{h}")

    # 3. fine-tune each variant on every task with data; then the Figure 5 snapshots on theirs
    from bertbench.training.finetune_run import FinetuneRequest, run_finetune

    ft = preset.finetune
    jobs = []  # (stage name, variant, model, results folder, tasks, feature-based)
    for v in preset.variants:
        model, folder = sources[v.name]
        for feature_based in (False, True):
            tasks = [t for t in ft.tasks if not feature_based or t in ft.feature_based_tasks]
            if tasks:
                jobs.append((f"finetune {v.name}{' features' if feature_based else ''}", v, model,
                             folder + ("-features" if feature_based else ""), tasks, feature_based))
    for v in (v for v in preset.variants if v.name in ft.figure5_variants):
        model, folder = sources[v.name]
        for snap in sorted(Path(model).parent.glob("snapshots/step-*"), key=lambda p: int(p.name.split("-")[1])):
            jobs.append((f"finetune {v.name} {snap.name}", v, str(snap), f"{folder}-{snap.name}", ft.figure5_tasks, False))
    for stage_name, v, model, folder, tasks, feature_based in jobs:
        req = FinetuneRequest(
            model=model, tasks=",".join(tasks), out=out / "results" / folder, data_dir=data_dir,
            tokenizer=tokenizer_path if v.random_init else None, feature_based=feature_based,
            precision=preset.pretrain.precision, **ft.settings(),
        )
        marker = req.out / "done.json"
        key = config_hash({k: str(val) for k, val in dataclasses.asdict(req).items()})
        if marker.is_file() and json.loads(marker.read_text()).get("key") == key:
            echo(f"[{stage_name}] done before: {req.out}")
            continue

        def do_finetune(req=req, marker=marker, key=key):
            from bertbench.io_utils import atomic_write_json

            run_finetune(req, echo=echo)
            atomic_write_json(marker, {"key": key})

        stage(stage_name, do_finetune)

    # 4. the report
    stage("report", lambda: write_report(out, preset, plots))
    from bertbench.io_utils import atomic_write_json

    atomic_write_json(out / "stages.json", stages)
    return stages


def write_report(out: Path, preset: RunPreset, plots: bool) -> Path:
    """`bertbench report OUT/results --out OUT/<preset>.md --plots OUT/plots`."""
    from bertbench.report_run import make_report

    path = out / f"{preset.name}.md"
    make_report([out / "results"], out=path, csv=out / f"{preset.name}.csv", plots=(out / "plots") if plots else None,
                warn=lambda message: print(message, file=sys.stderr))
    return path
