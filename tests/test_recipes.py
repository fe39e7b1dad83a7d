"""Every pre-training recipe in recipes/ loads into PretrainConfig (unknown keys would be errors)."""
from __future__ import annotations

import pytest

from bertbench.config import PretrainConfig, resolve_recipe
from bertbench.config_files import load_config
from bertbench.paths import RECIPES_DIR
from bertbench.training.pretrain_run import phase_plan

RECIPES = sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def test_the_four_recipes_exist():
    assert {"tiny-debug", "tiny-10min", "mini-60min", "bert-base-paper"} <= set(RECIPES)


def test_a_recipe_is_named_for_what_it_is():
    """<size>-<N>min: that model size on an N-minute clock (a recipe is not named for a preset that uses it)."""
    import re

    from bertbench.studies.preset import list_presets, load_yaml

    for name in RECIPES:
        m = re.fullmatch(r"(\w+)-(\d+)min", name)
        if m:
            cfg = load_config(PretrainConfig, resolve_recipe(name))
            assert (cfg.model_size, cfg.budget_minutes) == (m[1], int(m[2])), name
    presets = {name: load_yaml(path) for name, path in list_presets().items()}
    assert not set(presets) & set(RECIPES)  # no name is both a preset and a recipe
    assert {raw["recipe"] for raw in presets.values() if raw.get("recipe")} <= set(RECIPES)


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_loads(name, tmp_path):
    cfg = load_config(PretrainConfig, resolve_recipe(name)).with_data_dir(tmp_path)
    assert cfg.data.corpus and all(c.startswith(str(tmp_path)) for c in cfg.data.corpus)
    plan = phase_plan(cfg)
    assert plan[0][0] == 0
    if cfg.budget_minutes:  # later phases begin on the clock
        assert all(start is None for start, _, _ in plan[1:])
    else:
        assert all(a[0] < b[0] for a, b in zip(plan, plan[1:]))


def test_cpu_recipes_are_the_measured_winners():
    """What leaderboards/quality-ab measured: short-then-128 phases and a 20% warm-up on a wall-clock budget."""
    for name in ("tiny-10min", "mini-60min"):
        cfg = load_config(PretrainConfig, resolve_recipe(name))
        assert cfg.budget_minutes and cfg.optim.warmup_fraction == 0.2 and cfg.optim.warmup_steps is None
        assert [p.max_seq_len for p in cfg.phases] == [32, 128] and cfg.phases[0].fraction == 0.6
    assert load_config(PretrainConfig, resolve_recipe("tiny-10min")).model_size == "tiny"


def test_paper_recipe_is_the_papers():
    cfg = load_config(PretrainConfig, resolve_recipe("bert-base-paper"))
    assert (cfg.model_size, cfg.batch_size, cfg.max_steps, cfg.optim.lr, cfg.optim.warmup_steps) == ("base", 256, 1_000_000, 1e-4, 10_000)
    assert [(p.fraction, p.max_seq_len) for p in cfg.phases] == [(0.9, 128), (0.1, 512)]
    assert phase_plan(cfg)[1][0] == 900_000
    assert cfg.optim.betas == [0.9, 0.999] and cfg.optim.weight_decay == 0.01


def test_tiny_10min_takes_the_size_the_committed_size_curves_found_best():
    """Issue 23: a recipe takes the size best at its budget. The size curves at 25 minutes (its budget and more:
    a larger model only gains with minutes) are committed, one series a folder (two threads one size at a time;
    one thread each, side by side); the recipe's size is the winner of every series."""
    import json

    from bertbench.paths import PROJECT_ROOT

    recipe_size = load_config(PretrainConfig, resolve_recipe("tiny-10min")).model_size
    seen = set()
    for series in ("sizes-25min", "sizes-25min-1thr"):
        final = {}
        for path in sorted((PROJECT_ROOT / "leaderboards" / "quality" / series).glob("*.json")):
            result = json.loads(path.read_text())
            assert result["config"]["recipe"] == "tiny-10min" and result["config"]["minutes"] == 25, path
            final[result["config"]["model_size"]] = result["sides"]["ours-recipe"]["final"]["mlm_accuracy"]
        assert len(final) >= 2 and recipe_size in final, (series, sorted(final))  # a series compares sizes
        assert max(final, key=final.get) == recipe_size, (series, final)
        seen |= set(final)
    assert {"tiny", "L4-H128", "mini", "small", "L2-H256"} <= seen, sorted(seen)  # deeper, wider, both


def test_a_bad_recipe_names_every_problem_with_its_file_and_line(tmp_path):
    """As a task file's: each unknown key, missing key and wrong value at once, `file:line: field: what`, in the
    file's order; a phase's by its own item's line."""
    from bertbench.errors import BertbenchError

    recipe = tmp_path / "bad.yaml"
    recipe.write_text("model_size: tiny\nlearning_rate: 1e-4\nphases:\n  - fraction: 0.5\n    max_seq_len: x\n"
                      "  - fraction: 0.5\n    bogus: 1\noptim:\n  lr: fast\n")
    with pytest.raises(BertbenchError) as e:
        load_config(PretrainConfig, recipe)
    assert str(e.value).split("; ") == [
        f"{recipe}:2: learning_rate: unknown key (known: accelerator, batch_size, budget_minutes, checkpoint_every, "
        "compile, data, ddp, devices, eval_batches, eval_every, grad_accum, log_every, lowercase, max_steps, model, "
        "model_size, num_nodes, num_workers, objective, optim, phases, precision, seed, snapshots, strategy, tokenizer, "
        "tokenizer_vocab_size)",
        f"{recipe}:5: phases[0].max_seq_len: expected an integer, got 'x'",
        f"{recipe}:6: phases[1].max_seq_len: missing: a required key",
        f"{recipe}:7: phases[1].bogus: unknown key (known: batch_size, fraction, max_predictions_per_seq, max_seq_len)",
        f"{recipe}:9: optim.lr: expected a number, got 'fast'",
    ]


def test_a_recipes_folder_without_recipes_is_named(tmp_path, monkeypatch):
    """$BERTBENCH_RECIPES_DIR set to an empty or missing folder said "Unknown recipe 'x'. Available: " and nothing."""
    import bertbench.config as config
    from bertbench.errors import BertbenchError

    monkeypatch.setattr(config, "RECIPES_DIR", tmp_path / "none")
    with pytest.raises(BertbenchError, match=r"^recipe 'tiny-debug': no recipes in .*none \(the recipes folder; "
                                             r"\$BERTBENCH_RECIPES_DIR sets another\), and no such YAML file$"):
        resolve_recipe("tiny-debug")
