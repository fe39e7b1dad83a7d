"""Fine-tuning settings are one class: the `finetune` command, a preset's `finetune:` block and the request
`run_finetune` carries out hold the same fields and are checked by the same rule, each error spelled the way
its caller writes the setting."""
from __future__ import annotations

import dataclasses
from typing import Optional  # noqa: F401 (the Toy dataclass's string annotations resolve here)

import pytest
import yaml
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.errors import BertbenchError
from bertbench.training.finetune_settings import FinetuneSettings
from bertbench.run_preset import FinetuneSpec, list_presets, load_preset
from bertbench.training.finetune_settings import FinetuneRequest

runner = CliRunner()
SHARED = {f.name for f in dataclasses.fields(FinetuneSettings)}

# (setting, bad value, CLI spelling of the value or None where the CLI has no flag for it, what the error says)
BAD = [
    ("grid", "dev", "dev", "expected one of none, heldout, paper"),
    ("batch_size", 0, "0", "expected an integer ≥ 1"),
    ("max_seq_len", -4, "-4", "expected an integer ≥ 1"),
    ("max_steps", 0, "0", "expected an integer ≥ 1"),
    ("max_train_examples", 0, "0", "expected an integer ≥ 1"),
    ("max_eval_examples", -1, "-1", "expected an integer ≥ 1"),
    ("lr", -2e-5, "-2e-5", "expected a positive learning rate"),
    ("epochs", 0.0, "0", "expected a positive number of epochs"),
    ("seeds", [-1], "-1", "expected one or more seeds ≥ 0"),
    ("lrs", [1e-4], None, "needs grid heldout or paper"),
    ("train_caps", {"sst2": 0}, None, "each cap must be a positive number"),
]


def test_request_and_preset_hold_the_shared_settings_without_copying_them():
    for holder in (FinetuneRequest, FinetuneSpec):
        assert issubclass(holder, FinetuneSettings)
        own = {f.name for f in dataclasses.fields(holder)} - SHARED
        # what each adds is its own business, never a second spelling of a shared setting
        assert not own & SHARED
    assert {"model", "tasks", "out"} <= {f.name for f in dataclasses.fields(FinetuneRequest)} - SHARED


@pytest.mark.parametrize("key, value, cli, message", BAD)
def test_the_same_rule_checks_the_preset_and_the_command_line(tmp_path, key, value, cli, message):
    preset = yaml.safe_load(list_presets()["smoke"].read_text())
    preset["finetune"][key] = value
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(preset))
    with pytest.raises(BertbenchError, match=rf"p\.yaml: finetune\.{key} .*{message}"):
        load_preset(str(path))
    if cli is None:
        return
    flag = "--" + key.replace("_", "-")
    r = runner.invoke(app, ["finetune", "--model", "random:tiny", "--tasks", "rte", "--out", str(tmp_path / "f"),
                            flag, cli])
    assert r.exit_code != 0
    assert message in r.output and r.output.strip().count("\n") == 0, r.output  # one line, no traceback
    assert f"{flag} " in r.output
    assert not (tmp_path / "f").exists()


def test_good_settings_pass_and_reach_the_request_unchanged():
    spec = load_preset("cpu-quick").finetune
    req = FinetuneRequest(model="random:tiny", tasks="rte", out="x", **spec.settings())
    assert {k: getattr(req, k) for k in SHARED} == {k: getattr(spec, k) for k in SHARED}
    req.check(lambda key: key)  # no error


def test_the_finetune_command_options_are_the_request_fields():
    from bertbench.cli_options import cli_fields

    r = runner.invoke(app, ["finetune", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    options = {f.name for f in cli_fields(FinetuneRequest)}
    assert options == {f.name for f in dataclasses.fields(FinetuneRequest)} - {"train_caps"}  # presets only
    for name in options:
        assert f"--{name.replace('_', '-')}" in r.output
        help_start = dataclasses.fields(FinetuneRequest)[[f.name for f in dataclasses.fields(FinetuneRequest)]
                                                        .index(name)].metadata["help"].split()[0]
        assert help_start in r.output


def test_a_new_field_becomes_an_option_with_its_type_default_and_list_parsing():
    import typer

    from bertbench.cli_options import options_from, parse_values
    from bertbench.training.finetune_settings import required, setting

    @dataclasses.dataclass(kw_only=True)
    class Toy:
        name: str = required("a name")
        ratios: Optional[list[float]] = setting(None, "ratios")
        steps: int = setting(3, "steps")
        hidden: dict = setting(help="not on the CLI", cli=False, factory=dict)

    seen = []
    toy = typer.Typer()

    @toy.command()
    @options_from(Toy)
    def run(**values):
        seen.append(Toy(**parse_values(Toy, values)))

    @toy.command()
    def other():  # two commands, so Typer keeps `run` as a subcommand
        pass

    assert runner.invoke(toy, ["run", "--name", "a", "--ratios", "0.5, 1e-3"]).exit_code == 0
    assert seen[-1] == Toy(name="a", ratios=[0.5, 1e-3], steps=3)
    assert runner.invoke(toy, ["run", "--ratios", "1"]).exit_code != 0  # --name is required
    assert runner.invoke(toy, ["run", "--name", "a", "--hidden", "x"]).exit_code != 0  # cli=False: no option
    with pytest.raises(BertbenchError, match=r"--ratios '1,x': expected comma-separated float values"):
        parse_values(Toy, {"ratios": "1,x"})


def test_lrs_reach_the_request_from_the_command_line(tmp_path, monkeypatch):
    import bertbench.training.finetune_run as finetune_run

    got = []
    monkeypatch.setattr(finetune_run, "run_finetune", lambda req, echo: got.append(req) or [])
    r = runner.invoke(app, ["finetune", "--model", "random:tiny", "--tasks", "rte", "--out", str(tmp_path),
                            "--grid", "heldout", "--lrs", "1e-4,3e-4", "--seeds", "1,2", "--feature-based"])
    assert r.exit_code == 0, r.output
    assert (got[0].lrs, got[0].seeds, got[0].feature_based, got[0].grid) == ([1e-4, 3e-4], [1, 2], True, "heldout")
