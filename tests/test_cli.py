from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from bertbench import __version__
from bertbench.cli import app

runner = CliRunner()
COMMANDS = ["pretrain", "finetune", "report", "plan", "run", "tasks", "data", "convert", "bench"]


def test_help_lists_every_command():
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0
    for cmd in COMMANDS:
        assert cmd in r.output, cmd


def test_version():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and __version__ in r.output


def test_cli_import_is_light():
    """`bertbench --help` must be instant: no torch, lightning, datasets or transformers at import."""
    code = (
        "import sys, bertbench.cli\n"
        "heavy = [m for m in ('torch', 'lightning', 'datasets', 'transformers', 'pandas', 'matplotlib') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_recipe_key_is_a_clear_error(tmp_path):
    from bertbench.config import PretrainConfig
    from bertbench.config_files import load_config
    from bertbench.errors import BertbenchError

    recipe = tmp_path / "r.yaml"
    recipe.write_text("model_size: tiny\ndata:\n  mask_ratoi: 0.2\n")
    try:
        load_config(PretrainConfig, recipe)
    except BertbenchError as err:
        assert "mask_ratoi" in str(err) and "did you mean 'mask_ratio'" in str(err) and str(recipe) in str(err)
    else:
        raise AssertionError("unknown key accepted")


def test_imports_run_downward_only():
    """Commands (Typer) sit on top: nothing below them imports bertbench.commands, so domain code never
    depends on a CLI signature (run --preset's report stage calls report.run.make_report, not the command)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "bertbench"
    upward = [str(p.relative_to(root)) for p in root.rglob("*.py")
              if p.parent.name != "commands" and p.name != "cli.py"
              and re.search(r"^\s*(from|import) bertbench\.commands", p.read_text(encoding="utf-8"), re.M)]
    assert upward == []


def test_an_error_is_said_once_by_rank_zero_only(tmp_path, monkeypatch):
    """Every rank of a DDP run meets the same error: rank 0 prints the `error:` line, the others exit silently
    with the same code (each launcher's rank variable counts: Lightning's, torchrun's, srun's)."""
    from bertbench.runtime.devices import RANK_VARIABLES

    args = ["tasks", "ls", "--tasks-dir", str(tmp_path / "nowhere")]
    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and r.output == f"error: --tasks-dir {tmp_path / 'nowhere'}: no such folder\n"
    monkeypatch.setenv("LOCAL_RANK", "0")  # rank 0 of a launched run: still the one that speaks
    assert runner.invoke(app, args).output.startswith("error:")
    for name in RANK_VARIABLES:
        monkeypatch.setenv(name, "1")
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and r.output == "", name
        monkeypatch.setenv(name, "0")


def test_a_script_beside_a_clone_folder_named_bertbench_imports_the_package(tmp_path):
    """`import bertbench` from a script saved beside the clone: the clone folder comes first on sys.path. It
    was an empty namespace package (the README's `bertbench.load_checkpoint` an AttributeError); the root
    __init__.py hands over to the installed package, or (no site-packages: -S) to the one inside the clone."""
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    (tmp_path / "bertbench").symlink_to(root, target_is_directory=True)
    (tmp_path / "script.py").write_text(
        "import bertbench, bertbench.config\n"
        "assert 'load_checkpoint' in bertbench.__all__ and bertbench.__version__\n"
        "print(bertbench.__file__, bertbench.config.__file__)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for flags in ([], ["-S"]):
        r = subprocess.run([sys.executable, *flags, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        package, config = map(Path, r.stdout.split())
        assert package.name == "__init__.py" and package.parent.name == "bertbench" and config.parent == package.parent
        if flags:
            assert package == root / "bertbench" / "__init__.py"


def test_a_bad_environment_variable_is_one_error_line_naming_it(tmp_path, monkeypatch):
    """BERTBENCH_PROGRESS_SECONDS that is not seconds was a ValueError traceback; BERTBENCH_DATA_DIR that is a file
    was reported as a missing vocabulary inside it. Each is now one line naming the variable, before any work."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("One sentence here. Another one there.\n\nA third one. And a fourth.\n")
    monkeypatch.setenv("BERTBENCH_PROGRESS", "1")
    for bad in ("abc", "-5", "nan"):
        monkeypatch.setenv("BERTBENCH_PROGRESS_SECONDS", bad)
        r = runner.invoke(app, ["pretrain", "--corpus", str(corpus), "--out", str(tmp_path / "run"), "--max-steps", "1"])
        assert r.exit_code == 2 and r.output.splitlines() == [
            f"error: BERTBENCH_PROGRESS_SECONDS={bad!r}: expected the seconds between progress lines, a number ≥ 0 "
            "(BERTBENCH_PROGRESS=0 turns them off)"], r.output
        assert not (tmp_path / "run").exists()
    monkeypatch.setenv("BERTBENCH_PROGRESS", "0")
    monkeypatch.setenv("BERTBENCH_DATA_DIR", str(corpus))
    r = runner.invoke(app, ["finetune", "--model", "random:tiny", "--tasks", "rte", "--out", str(tmp_path / "ft")])
    assert r.exit_code == 2 and r.output.splitlines() == [f"error: BERTBENCH_DATA_DIR={corpus}: a file, not a folder"]


def test_a_cache_folder_that_cannot_be_made_is_one_error_line(tmp_path, monkeypatch):
    """BERTBENCH_CACHE_DIR naming a file (or a place no folder can be made) was a FileExistsError traceback."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("One sentence here. Another one there.\n\nA third one. And a fourth.\n")
    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(corpus))
    r = runner.invoke(app, ["pretrain", "--corpus", str(corpus), "--out", str(tmp_path / "run"), "--max-steps", "1",
                            "--doc-sentences", "2", "--min-heldout-docs", "0", "--heldout-fraction", "0"])
    assert r.exit_code == 2 and r.output.splitlines()[-1] == (
        f"error: {corpus}: cannot keep the cache here (a file, not a folder); set BERTBENCH_CACHE_DIR to a writable "
        "folder"), r.output
    assert not (tmp_path / "run").exists()
