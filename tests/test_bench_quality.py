"""`bench quality` at tiny scale: both sides train on the clock, score the same held-out positions, and the
JSON carries the curve, tokens, rates and the unigram baseline."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bertbench.cli import app
from tests.test_pretrain import write_corpus

runner = CliRunner()

RECIPE = """
model_size: tiny
tokenizer: train
tokenizer_vocab_size: 150
data:
  corpus: ["{data_dir}/corpus"]
  max_seq_len: 32
  heldout_fraction: 0.2
batch_size: 8
max_steps: 5
precision: "32"
optim:
  lr: 1.0e-3
  warmup_fraction: 0.1
"""


@pytest.fixture(scope="module")
def quality_result(tmp_path_factory):
    from bertbench.model.tokenizer import WordPieceTokenizer

    root = tmp_path_factory.mktemp("quality")
    data_dir = root / "data"
    docs = write_corpus(data_dir / "corpus", n_docs=12, seed=5)
    # the "shared" vocabulary: any WordPiece vocab.txt both sides read (the real run uses bert-base-uncased)
    tok = WordPieceTokenizer.train((p.read_text() for p in sorted(docs.glob("*.txt"))), vocab_size=120)
    tok.save(root / "shared_tok")
    (data_dir / "vocab").mkdir()
    (data_dir / "vocab" / "bert-base-uncased-vocab.txt").write_text((root / "shared_tok" / "vocab.txt").read_text())
    recipe = root / "tiny.yaml"
    recipe.write_text(RECIPE)
    saved = root / "quality.json"
    r = runner.invoke(app, ["bench", "quality", "--minutes", "0.04", "--recipe", str(recipe), "--data-dir", str(data_dir),
                            "--points", "2", "--quiet", "--json", "--save-json", str(saved), "--plot", str(root / "q.png"),
                            "--out", str(root / "runs")], env={"BERTBENCH_PROGRESS": "0"})
    assert r.exit_code == 0, r.output + repr(r.exception)
    result = json.loads(r.stdout)
    assert json.loads(saved.read_text()) == result
    assert (root / "q.png").stat().st_size > 1000
    return result


def test_every_side_trains_for_the_budget_and_reports_a_curve(quality_result):
    sides = quality_result["sides"]
    assert list(sides) == ["ours", "hf", "ours-recipe"]
    # the default: the shared-vocabulary pair trained at once in two processes, half the threads each
    assert quality_result["pair"]["side_by_side"] is True
    assert sides["ours"]["threads"] == sides["hf"]["threads"] == quality_result["pair"]["threads_each"] >= 1
    for name, s in sides.items():
        assert s["impl"] == ("transformers" if name == "hf" else "bertbench")
        assert s["tokens_seen"] > 0 and s["steps"] > 0 and s["tokens_per_s"] > 0
        assert 0.04 * 60 <= s["training_seconds"] < 0.04 * 60 + 5  # stopped at the budget, not at max_steps
        curve = s["curve"]
        # at 0, then at --points 2 marks along the run (a step that crosses two marks records once), last at the end
        assert 2 <= len(curve) <= 3 and curve[-1]["minutes"] >= 0.04
        assert curve[0]["tokens"] == 0 and curve[-1]["tokens"] == s["tokens_seen"]
        assert [p["tokens"] for p in curve] == sorted(p["tokens"] for p in curve)
        assert all(0.0 <= p["mlm_accuracy"] <= 100.0 and p["mlm_loss"] > 0 for p in curve)
        assert s["final"] == curve[-1]
        assert s["gain_over_unigram"] == pytest.approx(s["final"]["mlm_accuracy"] - s["unigram_accuracy"], abs=1e-3)


def _strings(value):
    if isinstance(value, dict):
        yield from (s for v in value.values() for s in _strings(v))
    elif isinstance(value, list):
        yield from (s for v in value for s in _strings(v))
    elif isinstance(value, str):
        yield value


def test_the_saved_config_names_the_data_folder_as_recipes_do(quality_result):
    """A committed result is read on other machines: its corpus is `{data_dir}/...`, not this machine's folder."""
    config = quality_result["config"]
    assert config["corpus"] == config["pretrain"]["data"]["corpus"] == ["{data_dir}/corpus"]
    assert not [s for s in _strings(config) if s.startswith("/") and "/data/" in s]


def test_committed_results_give_their_corpus_as_the_recipes_do():
    from bertbench.paths import PROJECT_ROOT

    saved = sorted(PROJECT_ROOT.glob("leaderboards/quality*/**/*.json")) + [PROJECT_ROOT / "leaderboards/bench/data-scale.json"]
    assert len(saved) > 20
    for path in saved:
        corpus = json.loads(path.read_text())["config"]["corpus"]
        assert all(c.startswith("{data_dir}/") for c in ([corpus] if isinstance(corpus, str) else corpus)), (path, corpus)


def test_portable_rewrites_paths_under_the_data_folder_and_the_checkout_only():
    from bertbench.paths import PROJECT_ROOT, portable

    got = portable({"corpus": ["/d/x/corpus/a", "/d/xy/b"], "n": 3, "recipe": str(PROJECT_ROOT / "recipes" / "r.yaml"),
                    "phases": [{"path": "/d/x"}], "other": "/elsewhere/t.yaml"}, data_dir=Path("/d/x/"))
    assert got == {"corpus": ["{data_dir}/corpus/a", "/d/xy/b"], "n": 3, "recipe": "recipes/r.yaml",
                   "phases": [{"path": "/d/x"}], "other": "/elsewhere/t.yaml"}


def test_both_sides_on_the_shared_vocabulary_score_identical_positions(quality_result):
    sides, held = quality_result["sides"], quality_result["heldout"]
    assert sides["ours"]["heldout_fingerprint"] == sides["hf"]["heldout_fingerprint"] == held["bert-base-uncased"]["fingerprint"]
    assert sides["ours"]["vocab_size"] == sides["hf"]["vocab_size"]
    assert sides["ours-recipe"]["heldout_fingerprint"] == held["own"]["fingerprint"]
    assert quality_result["comparisons"]["same_heldout_positions"] is True
    for h in held.values():
        assert h["masked_positions"] > 0 and 0 < h["unigram_accuracy"] < 100 and h["unigram_loss"] > 0


def test_heldout_masks_are_fixed_and_the_unigram_baseline_is_counted_on_training_documents(tmp_path):
    """Two builds give the same tensors; the baseline guesses the most frequent *training* token."""
    import numpy as np
    import torch

    from bertbench.benchmarks.quality import build_heldout
    from bertbench.config import DataConfig, PretrainConfig
    from bertbench.data.instances import build_pretraining_data
    from bertbench.model.tokenizer import WordPieceTokenizer

    docs = write_corpus(tmp_path / "docs", n_docs=10, seed=2)
    tok = WordPieceTokenizer.train((p.read_text() for p in sorted(docs.glob("*.txt"))), vocab_size=120)
    cfg = PretrainConfig(model_size="tiny", data=DataConfig(corpus=[str(docs)], max_seq_len=32, heldout_fraction=0.2))
    data = build_pretraining_data(cfg.data, tok, seed=1, cache_dir=tmp_path / "cache")
    a, b = build_heldout(cfg, tok, data), build_heldout(cfg, tok, data)
    assert a.fingerprint == b.fingerprint
    for x, y in zip(a.batches, b.batches):
        assert torch.equal(x["input_ids"], y["input_ids"]) and torch.equal(x["lm_labels"], y["lm_labels"])
    # by hand: the most frequent token of the training documents, scored on the masked targets
    c = data.corpus
    train_tokens = np.concatenate([np.asarray(c.tokens[c.sent_offsets[c.doc_offsets[d]]:c.sent_offsets[c.doc_offsets[d + 1]]])
                                   for d in data.train_docs])
    counts = np.bincount(train_tokens.astype(np.int64), minlength=tok.vocab_size)
    targets = torch.cat([x["lm_labels"][x["lm_labels"] != -100] for x in a.batches]).numpy()
    assert a.positions == targets.size
    assert a.unigram_accuracy == pytest.approx(100 * (targets == counts.argmax()).mean())
    add_one = (counts + 1) / (counts.sum() + tok.vocab_size)
    assert a.unigram_loss == pytest.approx(-np.log(add_one[targets]).mean())
    assert not set(data.heldout_docs.tolist()) & set(data.train_docs.tolist())


def test_bad_arguments_are_one_line(tmp_path):
    r = runner.invoke(app, ["bench", "quality", "--minutes", "0", "--data-dir", str(tmp_path)])
    assert r.exit_code == 2 and "--minutes 0" in r.output
    r = runner.invoke(app, ["bench", "quality", "--sides", "ours,gpt", "--data-dir", str(tmp_path)])
    assert r.exit_code == 2 and "--sides" in r.output
    r = runner.invoke(app, ["bench", "quality", "--sides", "hf", "--data-dir", str(tmp_path)])
    assert r.exit_code == 2 and "bert-base-uncased" in r.output


def test_compare_renders_an_ab_table_from_saved_results(quality_result, tmp_path):
    import copy

    base = quality_result
    cand = copy.deepcopy(base)
    cand["config"]["pretrain"]["optim"]["lr"] = 5e-4
    cand["sides"]["ours-recipe"]["final"]["mlm_accuracy"] = base["sides"]["ours-recipe"]["final"]["mlm_accuracy"] + 2.5
    (tmp_path / "base.json").write_text(json.dumps(base))
    (tmp_path / "lower_lr.json").write_text(json.dumps(cand))
    readme = tmp_path / "README.md"
    readme.write_text("x\n<!-- bertbench bench: begin quality-ab -->\nold\n<!-- bertbench bench: end quality-ab -->\n")
    r = runner.invoke(app, ["bench", "quality", "--compare", str(tmp_path / "base.json"), "--compare",
                            str(tmp_path / "lower_lr.json"), "--embed", str(readme)])
    assert r.exit_code == 0, r.output
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("| base") or ln.startswith("| lower_lr")]
    assert "baseline" in rows[0]
    assert "optim.lr: 0.001 → 0.0005" in rows[1] and "+2.5" in rows[1]
    assert f"| {base['sides']['ours-recipe']['parameters'] / 1e6:.2f} M |" in rows[0]  # what a size row is about
    assert "lower_lr" in readme.read_text() and "old" not in readme.read_text()
    # a second A/B series goes into a block of its own, leaving the first as it was
    readme.write_text(readme.read_text() + "<!-- bertbench bench: begin quality-ab2 -->\nold\n<!-- bertbench bench: end quality-ab2 -->\n")
    first = readme.read_text().split("begin quality-ab2")[0]
    r = runner.invoke(app, ["bench", "quality", "--compare", str(tmp_path / "lower_lr.json"), "--embed", str(readme),
                            "--block", "quality-ab2"])
    assert r.exit_code == 0, r.output
    text = readme.read_text()
    assert text.split("begin quality-ab2")[0] == first and "old" not in text and "--block quality-ab2" in text
    r = runner.invoke(app, ["bench", "quality", "--compare", str(tmp_path / "missing.json")])
    assert r.exit_code == 2 and "missing.json" in r.output
    # a result in the older format (no resolved config.pretrain) is one line naming the tag that reads it
    older = copy.deepcopy(base)
    del older["config"]["pretrain"]
    (tmp_path / "older.json").write_text(json.dumps(older))
    r = runner.invoke(app, ["bench", "quality", "--compare", str(tmp_path / "older.json")])
    assert r.exit_code != 0 and "older.json: no config.pretrain" in r.output.replace("\n", "") and "git checkout 37ba1e8" in r.output
    assert "Traceback" not in r.output


def test_compare_takes_its_files_after_one_flag_as_the_readme_records(quality_result, tmp_path):
    """Issue 25 item 9: the command recorded under the README's A/B block, `--compare a.json b.json c.json`."""
    files = []
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.json").write_text(json.dumps(quality_result))
        files.append(str(tmp_path / f"{name}.json"))
    one_flag = runner.invoke(app, ["bench", "quality", "--compare", *files])
    repeated = runner.invoke(app, ["bench", "quality", *[x for f in files for x in ("--compare", f)]])
    assert one_flag.exit_code == 0 == repeated.exit_code, one_flag.output
    assert one_flag.stdout == repeated.stdout and "| c |" in one_flag.stdout
    stray = runner.invoke(app, ["bench", "quality", files[0]])
    assert stray.exit_code == 2 and "follow --compare" in stray.output


def test_render_redraws_a_saved_result(quality_result, tmp_path):
    saved = tmp_path / "q.json"
    saved.write_text(json.dumps(quality_result))
    readme = tmp_path / "README.md"
    readme.write_text("<!-- bertbench bench: begin quality -->\nstale\n<!-- bertbench bench: end quality -->\n")
    r = runner.invoke(app, ["bench", "quality", "--render", str(saved), "--embed", str(readme), "--plot", str(tmp_path / "p.png")])
    assert r.exit_code == 0, r.output
    text = readme.read_text()
    assert "stale" not in text and "| ours (bertbench) |" in text and "| hf (transformers) |" in text
    ratio = quality_result["comparisons"]["gain_ratio_ours_vs_hf"]
    assert (f"**{ratio:.2f}×**" if ratio is not None else "**–**") in text
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_a_failed_side_of_the_pair_is_one_line_naming_it(tmp_path, monkeypatch):
    import sys

    from bertbench.benchmarks import quality
    from bertbench.errors import BertbenchError

    monkeypatch.setattr(sys, "executable", "/bin/false")  # each side's process exits 1 without a word
    with pytest.raises(BertbenchError, match=r"side-by-side pair failed: ours: exit code 1; hf: exit code 1"):
        quality.run_pair_side_by_side(0.01, "tiny-10min", tmp_path, None, 1, None, tmp_path, 1, None)


def test_compare_plots_one_curve_per_file(quality_result, tmp_path, monkeypatch):
    """The size curves' figure: each compared run's recipe side as a curve named for its file."""
    import copy

    from bertbench.benchmarks import quality as bench_quality

    bigger = copy.deepcopy(quality_result)
    bigger["sides"]["ours-recipe"]["curve"] = [dict(p, mlm_accuracy=p["mlm_accuracy"] + 1) for p in bigger["sides"]["ours-recipe"]["curve"]]
    (tmp_path / "tiny.json").write_text(json.dumps(quality_result))
    (tmp_path / "L4-H128.json").write_text(json.dumps(bigger))
    png = tmp_path / "sizes.png"
    r = runner.invoke(app, ["bench", "quality", "--compare", str(tmp_path / "tiny.json"), str(tmp_path / "L4-H128.json"), "--plot", str(png)])
    assert r.exit_code == 0, r.output
    assert png.stat().st_size > 0
    drawn = []
    monkeypatch.setattr(bench_quality, "_plot_curves", lambda curves, baselines, title, path: drawn.append((curves, baselines)))
    r = runner.invoke(app, ["bench", "quality", "--compare", str(tmp_path / "tiny.json"), str(tmp_path / "L4-H128.json"), "--plot", str(png)])
    assert r.exit_code == 0, r.output
    (curves, baselines), = drawn
    assert [name for name, _ in curves] == ["tiny", "L4-H128"]
    assert curves[0][1] == quality_result["sides"]["ours-recipe"]["curve"] and curves[1][1] == bigger["sides"]["ours-recipe"]["curve"]
    assert baselines == [quality_result["sides"]["ours-recipe"]["unigram_accuracy"]]
