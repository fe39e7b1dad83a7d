"""`bertbench pretrain`'s options are generated from PretrainConfig's fields (issue 21; issue 25 item 11):
a new field is a new option with its help, old flags stay as aliases, booleans are on/off flags."""
from __future__ import annotations

import dataclasses

import pytest
import typer
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.cli_options import config_options
from bertbench.commands import pretrain as pretrain_cmd
from bertbench.config import PretrainConfig, setting

runner = CliRunner()


def _captured_config(monkeypatch, config_cls, args):
    """Run the command built for `config_cls` up to the training call and return the config it would train."""
    import bertbench.training.pretrain_run as pretrain_run

    seen = []
    monkeypatch.setattr(pretrain_run, "pretrain", lambda cfg, out, **kw: seen.append(cfg) or {"stopped_at_step": 0})
    cli = typer.Typer()
    cli.command()(pretrain_cmd.pretrain_command(config_cls))
    r = runner.invoke(cli, ["--out", "unused", "--corpus", "c", *args])
    assert r.exit_code == 0, r.output + repr(r.exception)
    return seen[0], r


def test_a_new_config_field_is_an_option_with_its_help(monkeypatch):
    @dataclasses.dataclass
    class Extended(PretrainConfig):
        ema_decay: float = setting(0.0, "Keep an exponential moving average of the weights.", panel="Optimisation")
        fancy: bool = setting(False, "A new switch.")

    monkeypatch.setenv("COLUMNS", "200")
    help_text = runner.invoke(_app(Extended), ["--help"]).output
    assert "--ema-decay" in help_text and "moving average" in help_text and "--no-fancy" in help_text
    cfg, _ = _captured_config(monkeypatch, Extended, ["--ema-decay", "0.9", "--fancy"])
    assert cfg.ema_decay == 0.9 and cfg.fancy is True


def _app(config_cls):
    cli = typer.Typer(add_completion=False)
    cli.command()(pretrain_cmd.pretrain_command(config_cls))
    return cli


def test_every_field_has_an_option_or_says_why_not():
    def leaves(obj, prefix=()):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):  # a section (data, optim): its own fields are the options
                yield from leaves(value, prefix + (f.name,))
            else:
                yield prefix + (f.name,), f

    options = {opt.path for opt in config_options(PretrainConfig)}
    for path, f in leaves(PretrainConfig()):
        assert f.metadata.get("help"), f"{'.'.join(path)} has no help"
        assert path in options or f.metadata.get("cli") is False, f"{'.'.join(path)} has no option"
    # every option of the command says what it does
    command = typer.main.get_command(app).commands["pretrain"]
    assert all(p.help for p in command.params if not p.hidden), [p.name for p in command.params if not p.help]


def test_a_field_without_help_fails_at_once():
    @dataclasses.dataclass
    class Undocumented(PretrainConfig):
        knob: int = 3

    with pytest.raises(TypeError, match="knob has no help"):
        config_options(Undocumented)


def test_old_flags_are_aliases_and_booleans_are_flags(monkeypatch, tmp_path):
    cfg, _ = _captured_config(monkeypatch, PretrainConfig, [
        "--vocab-size", "500", "--no-nsp", "--mask-procedure", "100/0/0", "--whole-word-mask", "--lr", "3e-4",
        "--data-seed", "7", "--seed", "3", "--max-steps", "20", "--set", "optim.eps=1e-8"])
    assert cfg.tokenizer_vocab_size == 500 and cfg.objective == "mlm" and cfg.data.mask_procedure == [100, 0, 0]
    assert cfg.data.whole_word_mask is True and cfg.optim.lr == 3e-4 and cfg.optim.eps == 1e-8
    assert (cfg.data.seed, cfg.seed, cfg.max_steps) == (7, 3, 20)
    recipe = tmp_path / "wwm.yaml"
    recipe.write_text("data: {whole_word_mask: true}\nlowercase: false\n")
    cfg, _ = _captured_config(monkeypatch, PretrainConfig, ["--recipe", str(recipe), "--no-whole-word-mask"])
    assert cfg.data.whole_word_mask is False and cfg.lowercase is False  # the option overrides, the rest stays
    r = runner.invoke(app, ["pretrain", "--out", "x", "--whole-word-mask", "true"])
    assert r.exit_code == 2 and "unexpected extra argument" in r.output
    monkeypatch.setenv("COLUMNS", "200")  # rich's width: no flag name cut short
    help_text = runner.invoke(app, ["pretrain", "--help"]).output
    assert "<bool>" not in help_text and "--no-whole-word-mask" in help_text, help_text


def test_held_out_accuracies_are_printed_as_percentages():
    """Issue 25 item 6: 'mlm_accuracy 0.372' meant 0.37% and read as 37%."""
    from bertbench.commands.pretrain import heldout_text

    assert heldout_text({"mlm_loss": 5.2104, "mlm_accuracy": 0.372, "nsp_accuracy": 48.309, "clm_ppl": None}) == (
        "mlm_loss 5.210, mlm_accuracy 0.4%, nsp_accuracy 48.3%")


def test_the_end_of_run_line_says_what_its_diagnostics_measure():
    """Issue 40: `cross_segment_match 1.427` was printed without a word of what it is (or of its 0-100 scale)."""
    from bertbench.commands.pretrain import heldout_text

    text = heldout_text({"mlm_loss": 5.2104, "nsp_accuracy": 48.309, "cross_segment_match": 1.4271})
    assert text.startswith("mlm_loss 5.210, nsp_accuracy 48.3%, cross_segment_match 1.4% (attention a segment-B token")
    assert "compare two sentences" in text
    assert heldout_text({}) == "none (no held-out documents: --min-heldout-docs 0 --heldout-fraction 0)"
