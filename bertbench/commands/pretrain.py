"""`bertbench pretrain`: train a BERT encoder from raw text (every ablation of the paper is a switch).

Its options are `PretrainConfig`'s fields and its sections' (`bertbench/config.py`), generated with their help
by `cli_options`, like `finetune`'s from its settings class: a new field is a new option. The options below are
the command's own (where to write, which recipe, resume) and `--no-nsp`, a shorthand kept from before.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from bertbench.cli_options import config_overrides, replace_nested, with_config_options
from bertbench.config import PretrainConfig
from bertbench.errors import BertbenchError


def _own_options(
    out: Annotated[Path, typer.Option("--out", help="Run directory to write (checkpoint, metrics.csv, summary.json).")],
    recipe: Annotated[Optional[str], typer.Option("--recipe", help="Recipe name in recipes/ (tiny-debug, tiny-10min, mini-60min, bert-base-paper) or a YAML file; options given beside it override its values.")] = None,
    no_nsp: Annotated[bool, typer.Option("--no-nsp", help="Short for --objective mlm.", rich_help_panel="Model and objective")] = False,
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Expands {data_dir} in recipes (default: $BERTBENCH_DATA_DIR, else ../shared/data beside the bertbench checkout). --corpus paths are read as given, from the current folder.")] = None,
    resume: Annotated[str, typer.Option("--resume", help="'auto': continue from RUN/checkpoints/last.ckpt if present; 'never' (the default): a fresh run.")] = "never",
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="Override any config field, also those without an option: --set optim.betas=[0.9,0.98].")] = None,
    stop_at_step: Annotated[Optional[int], typer.Option("--stop-at-step", hidden=True, help="Checkpoint and stop at this step (simulated pre-emption).")] = None,
) -> None:
    """The command's own options (the signature `with_config_options` starts from)."""


def build_config(config_cls, recipe: Optional[str], values: dict, sets: list[str]):
    """The recipe (or the defaults), then the options given, then --set: later wins."""
    from bertbench.config import apply_overrides, objective_flags, resolve_recipe
    from bertbench.config_files import load_config

    cfg = load_config(config_cls, resolve_recipe(recipe)) if recipe else config_cls()
    overrides = config_overrides(config_cls, values)
    objective = objective_flags(overrides.pop("objective", None), values.get("no_nsp", False))
    if objective is not None:
        overrides["objective"] = objective
    cfg = replace_nested(cfg, overrides)
    return apply_overrides(cfg, sets) if sets else cfg


def corpus_config(config_cls, values: dict):
    """`build_config` from pretrain's (or data build's) values, {data_dir} expanded; it must name a corpus."""
    from bertbench.paths import default_data_dir

    cfg = build_config(config_cls, values["recipe"], values, values["set_"] or [])
    cfg = cfg.with_data_dir(values["data_dir"] or default_data_dir())
    if not cfg.data.corpus:
        raise BertbenchError("no corpus: give --corpus DIR (repeatable) or a recipe that names one")
    return cfg


def pretrain_command(config_cls=PretrainConfig):
    """The `bertbench pretrain` command for `config_cls` (PretrainConfig, or a subclass in a test)."""

    @with_config_options(config_cls, _own_options)
    def pretrain(**values) -> None:
        """Pre-train a BERT encoder (MLM+NSP, MLM only, or the causal LTR baseline) and write a run directory."""
        resume, out = values["resume"], values["out"]
        if resume not in ("never", "auto"):
            raise BertbenchError(f"--resume {resume!r}: expected 'auto' or 'never'")
        cfg = corpus_config(config_cls, values)
        from bertbench.training.pretrain_run import pretrain as run_pretraining

        summary = run_pretraining(cfg, out, resume=resume, stop_at_step=values["stop_at_step"])
        _say_how_it_ended(summary, out)

    return pretrain


def _say_how_it_ended(summary: dict, out: Path) -> None:
    if "worker_rank" in summary:  # one process of several: rank 0 says how the run ended
        return
    if "stopped_at_step" in summary:
        typer.echo(f"stopped at step {summary['stopped_at_step']}; continue with --resume auto")
        return
    typer.echo(f"done: {summary['steps']} steps, {summary['tokens_seen']:,} tokens in {summary['wall_seconds']:.0f} s "
               f"({summary['tokens_per_second']:.0f} tok/s); held-out: {heldout_text(summary.get('heldout', {}))}\n"
               f"checkpoint: {out / 'checkpoint'}")


# What a held-out diagnostic measures, said beside its value at the end of a run: `cross_segment_match 1.427`
# alone said nothing (its scale is 0-100, like the accuracies)
DIAGNOSTICS = {
    "cross_segment_match": "attention a segment-B token puts on the same token in segment A, strongest head: "
                           "whether the model can compare two sentences (bertbench.model.diagnostics)",
}


def heldout_text(heldout: dict) -> str:
    """'mlm_loss 5.210, mlm_accuracy 0.4%, nsp_accuracy 48.3%': accuracies are kept on a 0-100 scale, so they
    are shown with their unit (0.372 read as 37%); a diagnostic says what it measures (`DIAGNOSTICS`)."""
    if not heldout:
        return "none (no held-out documents: --min-heldout-docs 0 --heldout-fraction 0)"
    parts = []
    for k, v in heldout.items():
        if v is None:
            continue
        if k in DIAGNOSTICS:
            parts.append(f"{k} {v:.1f}% ({DIAGNOSTICS[k]})")
        else:
            parts.append(f"{k} {v:.1f}%" if "accuracy" in k else f"{k} {v:.3f}")
    return ", ".join(parts)


pretrain = pretrain_command()
