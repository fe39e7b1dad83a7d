"""A researcher's own task: its YAML outside tasks/ (`--tasks-dir`, read beside the project's tasks/), its data
outside the data folder (an absolute path, or ./… beside the YAML file), fine-tuned and reported beside the
paper's tasks, and a malformed file that fails only the command that asks for it."""
from __future__ import annotations

import os
from csv import DictReader
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.paths import TASKS_DIR
from bertbench.results import load_records

runner = CliRunner()
FIXTURE_DATA = Path(__file__).parent / "fixtures" / "tasks" / "data"
VOCAB = Path(__file__).parent / "fixtures" / "corpus" / "vocab.txt"
ROWS = [("the cat sat on the mat", "a cat sat", "same"), ("the dog ran away", "the dog stayed", "other"),
        ("it rained all day", "it was wet", "same"), ("the shop was shut", "the shop was open", "other")]


def my_task(train: str, dev: str) -> str:
    return f"""\
name: mine
version: 1
type: classification
description: my own sentence-pair task
inputs: {{text_a: first, text_b: second, label: gold}}
labels: [same, other]
metrics: [accuracy]
splits: {{train: train, eval: dev}}
local: {{format: tsv, files: {{train: {train}, dev: {dev}}}}}
hparams: {{source: my lab, batch_size: 2, epochs: 1, learning_rates: [1.0e-3], max_seq_len: 32}}
seeds: [1]
"""


def write_tsv(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("first\tsecond\tgold\n" + "".join("\t".join(r) + "\n" for r in ROWS))
    return path


def finetune(*args: str):
    return runner.invoke(app, ["finetune", "--model", "random:tiny", "--tokenizer", str(VOCAB), "--max-steps", "2",
                               "--seeds", "1", "--precision", "32", "--data-dir", str(FIXTURE_DATA), *args])


def error_lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("error:")]


def test_own_task_outside_tasks_and_data_folders(tmp_path):
    """The YAML in a folder of its own; train beside it (./data/train.tsv), dev by an absolute path elsewhere."""
    tasks_dir = tmp_path / "my-tasks"
    write_tsv(tasks_dir / "lab" / "data" / "train.tsv")
    dev = write_tsv(tmp_path / "elsewhere" / "dev.tsv")
    (tasks_dir / "lab" / "mine.yaml").write_text(my_task("./data/train.tsv", str(dev)))
    r = runner.invoke(app, ["tasks", "validate", "--tasks-dir", str(tasks_dir)])
    assert r.exit_code == 0 and ", mine, " in r.output and ", rte, " in r.output, r.output  # beside tasks/
    out = tmp_path / "out"
    r = finetune("--tasks", "mine", "--tasks-dir", str(tasks_dir), "--out", str(out))
    assert r.exit_code == 0, r.output + repr(r.exception)
    [rec] = load_records([out])
    assert rec.data["task"] == "mine" and rec.data["split"]["eval_size"] == len(ROWS)
    files = rec.data["extra"]["data_fingerprint"]
    assert set(files["train"]["files"]) == {"./data/train.tsv"} and set(files["eval"]["files"]) == {str(dev)}


def test_a_path_into_the_data_folder_may_not_climb_out_of_it(tmp_path):
    tasks_dir = tmp_path / "my-tasks"
    (tasks_dir / "lab").mkdir(parents=True)
    (tasks_dir / "lab" / "mine.yaml").write_text(my_task("data/../../train.tsv", "dev.tsv"))
    r = runner.invoke(app, ["tasks", "validate", "--tasks-dir", str(tasks_dir)])
    assert r.exit_code == 2 and "starting ./ or ../" in r.output


def test_a_missing_tasks_dir_is_one_line(tmp_path):
    r = finetune("--tasks", "rte", "--tasks-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out"))
    assert r.exit_code == 2 and error_lines(r.output) == [f"error: --tasks-dir {tmp_path / 'nowhere'}: no such folder"]


@pytest.fixture
def tasks_with_a_bad_file(tmp_path) -> Path:
    tasks_dir = tmp_path / "tasks"  # read beside the project's tasks/
    (tasks_dir / "lab").mkdir(parents=True)
    (tasks_dir / "lab" / "broken.yaml").write_text(my_task("a.tsv", "b.tsv").replace("name: mine", "name: broken")
                                                   .replace("labels:", "lables:"))
    return tasks_dir


def test_rte_runs_beside_a_malformed_custom_task(tmp_path, tasks_with_a_bad_file):
    out = tmp_path / "out"
    r = finetune("--tasks", "rte", "--tasks-dir", str(tasks_with_a_bad_file), "--out", str(out))
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert [rec.data["task"] for rec in load_records([out])] == ["rte"]


@pytest.mark.parametrize("asked", ["broken", "lab", "all", "rte,broken"])
def test_the_malformed_task_fails_when_asked_for(tmp_path, tasks_with_a_bad_file, asked):
    r = finetune("--tasks", asked, "--tasks-dir", str(tasks_with_a_bad_file), "--out", str(tmp_path / "out"))
    assert r.exit_code == 2 and "Traceback" not in r.output
    [line] = error_lines(r.output)
    assert "broken.yaml" in line and "did you mean 'labels'" in line and "tasks validate" in line


def test_validate_lists_the_malformed_task_and_ls_still_lists_the_rest(tasks_with_a_bad_file):
    r = runner.invoke(app, ["tasks", "validate", "--tasks-dir", str(tasks_with_a_bad_file)])
    assert r.exit_code == 2 and "broken.yaml:6: lables: unknown key (did you mean 'labels'?)" in r.output
    assert "2 problem(s)" in r.output  # the misspelt key, and the labels it left out
    r = runner.invoke(app, ["tasks", "ls", "--tasks-dir", str(tasks_with_a_bad_file), "--data-dir", str(FIXTURE_DATA)])
    assert r.exit_code == 0 and "rte" in r.output and "not loaded: broken" in r.output


def test_run_takes_tasks_dir_for_every_stage(tmp_path, monkeypatch):
    """`run --tasks-dir`: a preset that fine-tunes (random init, no pre-training) on my own task."""
    tasks_dir = tmp_path / "my-tasks"
    write_tsv(tasks_dir / "lab" / "data" / "train.tsv")
    write_tsv(tasks_dir / "lab" / "data" / "dev.tsv")
    (tasks_dir / "lab" / "mine.yaml").write_text(my_task("./data/train.tsv", "./data/dev.tsv"))
    preset = tmp_path / "mine.yaml"
    preset.write_text(f"""\
name: mine
description: random init on my own task
pretrain: {{model_size: tiny, tokenizer: {VOCAB}, data: {{corpus: ["{FIXTURE_DATA}"]}}}}
variants:
  - {{name: random, random_init: true}}
finetune: {{tasks: [mine], seeds: [1], max_steps: 2}}
""")
    monkeypatch.setenv("BERTBENCH_TASKS_DIR", str(TASKS_DIR))  # restored after the test: `run` sets it for its stages
    out = tmp_path / "study"
    r = runner.invoke(app, ["run", "--preset", str(preset), "--tasks-dir", str(tasks_dir), "--out", str(out),
                            "--data-dir", str(FIXTURE_DATA), "--no-plots"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert [rec.data["task"] for rec in load_records([out])] == ["mine"]


def test_own_task_beside_rte_in_one_finetune_and_one_report(tmp_path, monkeypatch):
    """The researcher's second day: their task (a folder outside the repo and outside the data folder) and RTE
    in one `finetune` call, then reported beside RTE; its records carry where the task was defined, so the report
    reads them without --tasks-dir too (issue 57). A record without that says how to name the folder."""
    monkeypatch.delenv("BERTBENCH_TASKS_DIR", raising=False)
    tasks_dir = tmp_path / "my-tasks"
    write_tsv(tasks_dir / "data" / "train.tsv")
    write_tsv(tasks_dir / "data" / "dev.tsv")
    (tasks_dir / "mine.yaml").write_text(my_task("./data/train.tsv", "./data/dev.tsv"))
    out = tmp_path / "results"
    r = finetune("--tasks", "mine,rte", "--tasks-dir", str(tasks_dir), "--out", str(out))
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert sorted(rec.data["task"] for rec in load_records([out])) == ["mine", "rte"]
    csv = tmp_path / "report.csv"
    r = runner.invoke(app, ["report", str(out), "--tasks-dir", str(tasks_dir), "--csv", str(csv)])
    assert r.exit_code == 0, r.output + repr(r.exception)
    rows = list(DictReader(csv.open()))
    assert {(row["kind"], row["task"]) for row in rows if row["primary"] == "True"} == {("ours", "mine"), ("ours", "rte")}
    # the record carries where its task was defined (and the file's hash): the report reads it without --tasks-dir
    mine = next(rec for rec in load_records([out]) if rec.data["task"] == "mine")
    definition = mine.data["extra"]["task_definition"]
    assert definition["version"] == 1 and definition["sha256"].startswith("sha256:")
    assert Path(definition["file"]).name == "mine.yaml"
    assert "task_definition" not in next(rec for rec in load_records([out]) if rec.data["task"] == "rte").data["extra"]
    r = runner.invoke(app, ["report", str(out), "--csv", str(tmp_path / "again.csv")])
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert (tmp_path / "again.csv").read_text() == csv.read_text()  # the same report as with --tasks-dir
    # a record of a task nobody defined still fails, naming --tasks-dir
    del mine.data["extra"]["task_definition"]
    from bertbench.results import write_record

    write_record(mine.path, mine.data)
    r = runner.invoke(app, ["report", str(out)])
    assert r.exit_code == 2 and "Unknown task 'mine'" in r.output and "--tasks-dir" in error_lines(r.output)[0]


def test_task_folders_add_up_and_a_name_defined_twice_names_both_files(tmp_path, monkeypatch):
    from bertbench.errors import BertbenchError
    from bertbench.tasks import resolve_task_names

    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    for folder in (mine, theirs):
        folder.mkdir()
    (mine / "mine.yaml").write_text(my_task("./train.tsv", "./dev.tsv"))
    (theirs / "other.yaml").write_text(my_task("./train.tsv", "./dev.tsv").replace("name: mine", "name: other"))
    monkeypatch.setenv("BERTBENCH_TASKS_DIR", str(theirs))  # a path list that adds to tasks/, not replaces it
    assert resolve_task_names("mine,other,rte", str(mine)) == ["mine", "other", "rte"]
    monkeypatch.setenv("BERTBENCH_TASKS_DIR", os.pathsep.join([str(mine), str(theirs)]))
    assert resolve_task_names("mine,other,rte") == ["mine", "other", "rte"]
    with pytest.raises(BertbenchError, match="Unknown task or task group 'mien'.*add its folder with --tasks-dir"):
        resolve_task_names("mien")
    clash = tmp_path / "clash"
    clash.mkdir()
    (clash / "rte.yaml").write_text(my_task("./train.tsv", "./dev.tsv").replace("name: mine", "name: rte"))
    with pytest.raises(BertbenchError) as err:
        resolve_task_names("rte", str(clash))
    assert f"{TASKS_DIR / 'glue' / 'rte.yaml'}: name: task 'rte' is defined twice, here and in {clash / 'rte.yaml'}" \
        in str(err.value)
    assert resolve_task_names("mine", str(clash)) == ["mine"]  # a clash fails only the name it concerns


def test_every_command_that_reads_tasks_takes_tasks_dir():
    for command in (["finetune"], ["run"], ["report"], ["plan"], ["tasks", "ls"], ["tasks", "validate"]):
        r = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
        assert "--tasks-dir" in r.output, command
