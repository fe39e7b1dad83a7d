"""The studies package: the scheduler (worker death, the freed core), stage keys (a copied study resumes, one
task's cap re-keys that task only, older folders still count), and pre-training seeds."""
from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from bertbench.errors import BertbenchError
from bertbench.studies.scheduler import Stage, run_stages, thread_shares


# --- scheduler ---------------------------------------------------------------------------------------------
def _kill_self() -> None:  # a stage: module level, so that a worker process can be handed it
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)


def _write(path: Path, text: str) -> None:
    path.write_text(text)


def _threads_once_alone(path: Path, wait_s: float) -> None:
    """Record this worker's torch threads at the start, and once they have grown (or after wait_s)."""
    import torch

    start = torch.get_num_threads()
    path.with_suffix(".started").touch()
    deadline = time.monotonic() + wait_s
    while torch.get_num_threads() == start and time.monotonic() < deadline:
        sum(range(10_000))  # Python bytecodes: the safe points at which a new share is taken up
    path.write_text(f"{start} {torch.get_num_threads()}")


def _write_allocator(path: Path) -> None:
    from bertbench.runtime.allocator import allocator_name

    path.write_text(allocator_name())


def _wait_for(path: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_thread_shares():
    assert thread_shares(2, 2) == [1, 1] and thread_shares(2, 1) == [2] and thread_shares(5, 2) == [3, 2]
    assert thread_shares(1, 2) == [1, 1] and thread_shares(4, 0) == []


def test_a_killed_worker_is_one_line_naming_the_stage_and_the_signal(tmp_path):
    long = Stage("pretrain mlm_nsp", time.sleep, (60,))
    jobs = [Stage("finetune random rte", _write, (tmp_path / "rte", "done")), long,
            Stage("finetune random stsb", _kill_self)]
    times: dict[str, float] = {}
    t0 = time.monotonic()
    with pytest.raises(BertbenchError) as err:
        run_stages(jobs, 2, lambda message: None, times)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("stage finetune random stsb died (SIGKILL)")
    assert message.endswith("finished stages are kept — rerun the same command to continue")
    assert time.monotonic() - t0 < 30  # the other worker (sleeping 60 s) was stopped, not waited for
    assert set(times) == {"finetune random rte"} and (tmp_path / "rte").read_text() == "done"


def _kill_idle_workers(pids: Path) -> None:
    """A stage that runs alone, here in the main process: kills (-9) every idle worker, as the out-of-memory
    killer may while the causal LM pre-trains alone, and notes their pids."""
    import multiprocessing

    killed = [p for p in multiprocessing.active_children() if p.name == "bertbench-stage"]
    for p in killed:
        os.kill(p.pid, signal.SIGKILL)
        p.join(timeout=30)
    pids.write_text(" ".join(str(p.pid) for p in killed))


def test_an_idle_worker_killed_while_a_stage_runs_alone_ends_the_study_in_one_line(tmp_path):
    # before: the next stage was sent down the dead worker's pipe (BrokenPipeError), and the CLI exited 1 silently
    jobs = [Stage("a", _write, (tmp_path / "a", "a")), Stage("b", _write, (tmp_path / "b", "b")),
            Stage("ltr", _kill_idle_workers, (tmp_path / "pids",), after="a", alone=True),
            Stage("c", _write, (tmp_path / "c", "c"), after="ltr"), Stage("d", _write, (tmp_path / "d", "d"), after="ltr")]
    times: dict[str, float] = {}
    with pytest.raises(BertbenchError) as err:
        run_stages(jobs, 2, lambda message: None, times)
    pids = (tmp_path / "pids").read_text().split()
    assert len(pids) == 2
    message = str(err.value)
    assert "\n" not in message and message.split("(pid ")[1].split(")")[0] in pids
    assert "died while idle (SIGKILL)" in message and message.endswith("rerun the same command to continue")
    assert set(times) == {"a", "b", "ltr"} and not (tmp_path / "c").exists()  # the finished stages are kept


def test_a_worker_dead_as_its_stage_is_handed_over_is_one_line(tmp_path):
    import multiprocessing

    from bertbench.studies.scheduler import _Worker

    worker = _Worker(multiprocessing.get_context("spawn"), 1)
    os.kill(worker.process.pid, signal.SIGKILL)
    worker.process.join(timeout=30)
    with pytest.raises(BertbenchError) as err:
        for _ in range(3):  # the first send may still fit in the pipe's buffer of a process that just died
            worker.start(Stage("finetune random rte", _write, (tmp_path / "x", "x")))
            worker.stage = None
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"a worker process (pid {worker.process.pid}) died (SIGKILL) as stage finetune random rte")
    assert message.endswith("rerun the same command to continue")
    worker.stage = None
    worker.stop()


def _note_device_when_both_run(path: Path, other: Path) -> None:
    """A stage: writes the device its worker sees, then waits for the other stage to have written its own (so
    the two run at once, on two workers)."""
    path.write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))
    _wait_for(other)


@pytest.mark.parametrize("visible, expected", [(None, {"0", "1"}), ("5,7", {"5", "7"})])
def test_with_two_devices_the_stages_sit_one_per_device(tmp_path, monkeypatch, visible, expected):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:  # a batch system's allocation: device i is the i-th of the devices this process was given
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    a, b = tmp_path / "a", tmp_path / "b"
    jobs = [Stage("finetune random rte", _note_device_when_both_run, (a, b)),
            Stage("finetune random stsb", _note_device_when_both_run, (b, a))]
    placed: dict[str, str] = {}
    said: list[str] = []
    run_stages(jobs, 2, said.append, {}, devices=2, placed=placed)
    assert {a.read_text(), b.read_text()} == expected  # each worker process saw its own one device
    assert placed == {"finetune random rte": a.read_text(), "finetune random stsb": b.read_text()}
    assert f"[finetune random rte] started on device {a.read_text()}" in said
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == visible  # this process still sees every device


def test_on_cpu_processes_the_stages_are_placed_on_cpu_and_pinned_to_no_gpu(tmp_path, monkeypatch):
    """`run --devices 2` where no GPU is: two workers, neither pinned to a GPU id, each stage placed on "cpu"
    (before, stages.json recorded devices 0 and 1 of a machine that has none)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    a, b = tmp_path / "a", tmp_path / "b"
    jobs = [Stage("finetune random rte", _note_device_when_both_run, (a, b)),
            Stage("finetune random stsb", _note_device_when_both_run, (b, a))]
    placed: dict[str, str] = {}
    said: list[str] = []
    run_stages(jobs, 2, said.append, {}, devices=2, placed=placed, device_kind="cpu")
    assert a.read_text() == b.read_text() == "unset"
    assert placed == {"finetune random rte": "cpu", "finetune random stsb": "cpu"}
    assert "[finetune random rte] started" in said and not any("device" in line for line in said), said


def test_fewer_workers_than_devices_is_one_line(monkeypatch):
    from bertbench.studies.scheduler import device_list

    with pytest.raises(BertbenchError, match=r"workers 1, devices 2: each device needs a worker"):
        run_stages([Stage("a", time.sleep, (0,))], 1, lambda message: None, {}, devices=2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with pytest.raises(BertbenchError, match=r"devices 3: CUDA_VISIBLE_DEVICES=0,1 names only 2 device"):
        device_list(3)


def test_a_study_refuses_a_pretraining_across_nodes(tmp_path):
    with pytest.raises(BertbenchError, match=r"variant 'mlm_nsp': num_nodes 2: a study runs on one machine"):
        _preset(tmp_path, **{"pretrain.num_nodes": 2})


def test_a_pretraining_on_several_devices_runs_alone_as_its_own_process(tmp_path):
    """With several devices each one-device pre-training takes a worker (and its device), the causal LM too; one
    that asks for several devices runs alone, through `bertbench pretrain` (its ranks re-run that command line)."""
    from bertbench.studies.plan import _pretrain_process_stage, _pretrain_stage

    preset = _preset(tmp_path, **{"pretrain.devices": "2", "pretrain.strategy": "ddp"})
    stages = {s.name: s for s in _plan(preset, tmp_path / "out", tmp_path)}
    assert stages["pretrain mlm_nsp"].fn is _pretrain_process_stage and stages["pretrain mlm_nsp"].alone
    one = _preset(tmp_path)
    for devices, alone in ((1, True), (2, False)):
        from bertbench.studies.plan import Planner

        tokenizer = tmp_path / "out" / "tokenizer-x"
        planned = {s.name: s for s in Planner(one, tmp_path, tmp_path / "out", str(tokenizer), lambda m: None,
                                              devices).plan()}
        assert planned["pretrain ltr"].fn is _pretrain_stage and planned["pretrain ltr"].alone is alone
        assert planned["pretrain mlm_nsp"].fn is _pretrain_stage and not planned["pretrain mlm_nsp"].alone


def _short_then_long(tmp_path: Path, wait_s: float, fixed_threads: bool) -> tuple[list[str], dict[str, list[int]]]:
    """Two stages on two one-thread workers; "short" ends once "long" runs beside it (a loaded machine may take
    long to start a worker). The threads "long" saw at its start and at its end, and what the scheduler says."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)  # two workers of one thread each, whatever this machine has
    threads: dict[str, list[int]] = {}
    try:
        jobs = [Stage("short", _wait_for, (tmp_path / "t.started",)), Stage("long", _threads_once_alone, (tmp_path / "t", wait_s))]
        run_stages(jobs, 2, lambda message: None, {}, threads, fixed_threads)
    finally:
        torch.set_num_threads(before)
    return (tmp_path / "t").read_text().split(), threads


def test_the_remaining_stage_takes_the_freed_core(tmp_path):
    seen, said = _short_then_long(tmp_path, 60.0, fixed_threads=False)
    assert seen == ["1", "2"]
    assert said == {"short": [1], "long": [1, 2]}


def test_with_fixed_threads_a_stage_keeps_its_share_and_the_freed_core_idles(tmp_path):
    seen, said = _short_then_long(tmp_path, 3.0, fixed_threads=True)  # 3 s: the share would have grown by then
    assert seen == ["1", "1"]
    assert said == {"short": [1], "long": [1]}


@pytest.mark.skipif(os.environ.get("BERTBENCH_MALLOC_TUNING") == "0" or "tcmalloc" in os.environ.get("LD_PRELOAD", ""),
                    reason="the tuning is switched off, or another allocator serves the process")
def test_a_worker_process_tunes_malloc_as_the_cli_process_does(tmp_path):
    # spawned workers start with glibc's defaults; untuned, cpu-quick's stages ran 1.3-1.9x slower
    jobs = [Stage(f"w{i}", _write_allocator, (tmp_path / f"w{i}",)) for i in range(2)]
    run_stages(jobs, 2, lambda message: None, {})
    assert [(tmp_path / f"w{i}").read_text() for i in range(2)] == ["glibc-tuned", "glibc-tuned"]


# --- stage keys ---------------------------------------------------------------------------------------------
FIXTURE_VOCAB = Path(__file__).parent / "fixtures" / "corpus" / "vocab.txt"


def _preset(tmp_path: Path, **changes):
    import yaml

    from bertbench.studies.preset import list_presets, load_preset

    raw = yaml.safe_load(list_presets()["smoke"].read_text())
    for key, value in changes.items():
        section, _, field = key.partition(".")
        if field:
            raw[section][field] = value
        else:
            raw[section] = value
    path = tmp_path / f"preset-{len(list(tmp_path.glob('preset-*')))}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_preset(str(path))


def _plan(preset, out: Path, data_dir: Path):
    """The stages a `run` in `out` would run, given the tokenizer it trained there (a fixture vocabulary)."""
    from bertbench.studies.plan import Planner

    tokenizer = out / "tokenizer-x"
    if not tokenizer.is_dir():
        tokenizer.mkdir(parents=True)
        shutil.copy(FIXTURE_VOCAB, tokenizer / "vocab.txt")
    return Planner(preset, data_dir, out, str(tokenizer), lambda message: None).plan()


def _finish(stages) -> None:
    """Leave each stage's output as it does when it finishes (a summary; a marker with its key)."""
    from bertbench.studies import keys

    for stage in stages:
        if stage.name.startswith("pretrain "):
            cfg, run_dir, key = stage.args[:3]  # then the study's step decision, if any
            keys.write_key(run_dir / keys.STAGE_FILE, key)
            (run_dir / "summary.json").write_text("{}")
        else:
            req, marker, key = stage.args[:3]  # then the pre-registration stamp, if any
            keys.write_key(marker, key)


def test_a_copied_study_resumes_without_rerunning_a_finished_stage(tmp_path):
    preset = _preset(tmp_path, **{"finetune.figure5_variants": [], "finetune.figure5_tasks": []})
    data = tmp_path / "data"
    first = _plan(preset, tmp_path / "a" / "study", data)
    assert {s.name for s in first} >= {"pretrain mlm_nsp", "pretrain ltr", "finetune random rte", "finetune mlm_nsp rte"}
    _finish(first)
    assert _plan(preset, tmp_path / "a" / "study", data) == []  # in place: everything done
    shutil.copytree(tmp_path / "a" / "study", tmp_path / "elsewhere" / "copy")
    assert _plan(preset, tmp_path / "elsewhere" / "copy", data) == []  # copied: everything done too


def test_one_tasks_cap_rekeys_that_tasks_stages_only(tmp_path):
    preset = _preset(tmp_path, **{"finetune.figure5_variants": [], "finetune.figure5_tasks": []})
    out, data = tmp_path / "study", tmp_path / "data"
    _finish(_plan(preset, out, data))
    capped = _preset(tmp_path, **{"finetune.figure5_variants": [], "finetune.figure5_tasks": [],
                                  "finetune.train_caps": {"stsb": 50}})
    assert {s.name for s in _plan(capped, out, data)} == {f"finetune {v} stsb" for v in ("mlm_nsp", "ltr", "random")}
    # a cap at or above the shared one changes no stage's effective settings
    loose = _preset(tmp_path, **{"finetune.figure5_variants": [], "finetune.figure5_tasks": [],
                                 "finetune.train_caps": {"stsb": 10_000}})
    assert _plan(loose, out, data) == []


def test_how_many_processes_tokenise_changes_no_pretraining_key(tmp_path):
    """data.num_proc changes how fast the corpus is tokenised, never the arrays: a study keeps its keys on a
    machine with more cores."""
    import dataclasses

    from bertbench.config import PretrainConfig
    from bertbench.studies import keys

    cfg = PretrainConfig()
    many = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, num_proc=16))
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    cfg, many = (dataclasses.replace(c, tokenizer=str(tmp_path / "vocab.txt")) for c in (cfg, many))
    assert keys.pretrain_key(cfg, tmp_path) == keys.pretrain_key(many, tmp_path)


def test_a_bad_preset_names_every_problem_with_its_line(tmp_path, monkeypatch):
    """As a recipe's and a task file's: each problem `file:line: field: what`, in the file's order (was the first
    one only, as '/x.yaml.pretrain: unknown key …')."""
    from bertbench.studies.preset import list_presets, load_preset

    text = list_presets()["smoke"].read_text()
    bad = (text.replace("  batch_size: 16", "  batchsize: 16", 1)
           .replace("  - {name: ltr, pretrain: {objective: clm}}", "  - {name: ltr, pretrain: {objective: clm}, colour: red}")
           .replace("  seeds: [1]", "  seeds: [one]"))
    lines = bad.splitlines()
    at = {needle: next(i + 1 for i, line in enumerate(lines) if needle in line)
          for needle in ("batchsize", "colour", "seeds: [one]")}
    (tmp_path / "p.yaml").write_text(bad)
    with pytest.raises(BertbenchError) as e:
        load_preset(str(tmp_path / "p.yaml"))
    p = tmp_path / "p.yaml"
    assert str(e.value).split("; ") == [
        f"{p}:{at['batchsize']}: pretrain.batchsize: unknown key (did you mean 'batch_size'?)",
        f"{p}:{at['colour']}: variants[1].colour: unknown key (known: name, pretrain, pretrain_seeds, random_init, tasks)",
        f"{p}:{at['seeds: [one]']}: finetune.seeds[0]: expected an integer, got 'one'",
    ]
    recipe = tmp_path / "recipe.yaml"  # a recipe the preset starts from: its problems are named in the recipe
    recipe.write_text("model_size: tiny\nbatchsize: 3\n")
    p.write_text(text.replace("name: smoke", f"name: smoke\nrecipe: {recipe}", 1))
    with pytest.raises(BertbenchError, match=rf"^{recipe}:2: batchsize: unknown key \(did you mean 'batch_size'\?\)$"):
        load_preset(str(p))

    import bertbench.studies.preset as preset_module  # a finetune block borrowed (finetune_from): named in its own file

    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "base.yaml").write_text(text.replace("  seeds: [1]", "  seeds: [one]"))
    (presets / "mine.yaml").write_text(text.replace("name: smoke", "name: mine\nfinetune_from: base", 1))
    monkeypatch.setattr(preset_module, "PRESETS_DIR", presets)
    with pytest.raises(BertbenchError, match=rf"^{presets / 'base.yaml'}:{at['seeds: [one]']}: finetune.seeds\[0\]: "
                                             r"expected an integer, got 'one'$"):
        load_preset("mine")


# --- pre-training seeds -------------------------------------------------------------------------------------
@pytest.mark.parametrize("seeds, message", [
    ([], "expected a non-empty list"), ([1, "2"], "expected"), ([1, True], "expected"), ([1, 1], "a seed repeats"),
    ([-1], "expected a non-empty list of integer seeds"),
])
def test_pretrain_seeds_are_checked(tmp_path, seeds, message):
    with pytest.raises(BertbenchError, match=message):
        _preset(tmp_path, pretrain_seeds=seeds)


def test_random_init_takes_no_pretrain_seeds(tmp_path):
    import yaml

    from bertbench.studies.preset import list_presets, load_preset

    raw = yaml.safe_load(list_presets()["smoke"].read_text())
    raw["variants"][-1]["pretrain_seeds"] = [1, 2]
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(BertbenchError, match="variant 'random': pretrain_seeds given, but random init has no pre-training"):
        load_preset(str(tmp_path / "p.yaml"))


def test_each_pretrain_seed_is_a_pretraining_whose_checkpoint_every_task_fine_tunes(tmp_path):
    import yaml

    from bertbench.studies.preset import list_presets, load_preset

    raw = yaml.safe_load(list_presets()["smoke"].read_text())
    raw["pretrain_seeds"] = [3, 4]
    raw["variants"][1]["pretrain_seeds"] = [7]  # ltr: its own
    raw["finetune"] |= {"figure5_variants": [], "figure5_tasks": []}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(raw))
    stages = _plan(load_preset(str(tmp_path / "p.yaml")), tmp_path / "study", tmp_path / "data")
    pretrainings = {s.name: s.args[0].seed for s in stages if s.name.startswith("pretrain ")}
    assert pretrainings == {"pretrain mlm_nsp seed3": 3, "pretrain mlm_nsp seed4": 4, "pretrain ltr seed7": 7}
    finetunes = {s.name: s.after for s in stages if s.name.startswith("finetune ")}
    assert finetunes["finetune mlm_nsp seed4 rte"] == "pretrain mlm_nsp seed4"
    assert finetunes["finetune random rte"] is None and len(finetunes) == 3 * 4
    dirs = {s.args[1].name.rsplit("-", 1)[0] for s in stages if s.name.startswith("pretrain ")}
    assert dirs == {"mlm_nsp-seed3", "mlm_nsp-seed4", "ltr-seed7"}
    # a preset without pretrain_seeds keys its pre-trainings as before: the config's own seed, no suffix
    plain = _plan(_preset(tmp_path, **{"finetune.figure5_variants": [], "finetune.figure5_tasks": []}),
                  tmp_path / "plain", tmp_path / "data")
    assert {s.name for s in plain if s.name.startswith("pretrain ")} == {"pretrain mlm_nsp", "pretrain ltr"}


def test_records_of_two_pretrain_seeds_are_one_variant_in_the_report(tmp_path):
    import json

    from bertbench.report.model import collect
    from bertbench.results import load_records

    source = Path(__file__).parent / "fixtures" / "records" / "main" / "tiny-mlm-nsp"
    for pretrain_seed, fingerprint in ((1, "sha256:aaaaaaaaaaaaaaaa"), (2, "sha256:bbbbbbbbbbbbbbbb")):
        folder = tmp_path / f"mlm_nsp-seed{pretrain_seed}"
        folder.mkdir()
        for path in source.glob("*.record.json"):
            record = json.loads(path.read_text())
            record["model"]["fingerprint"] = fingerprint  # other weights, one procedure
            pre = record["model"]["pretraining"]  # what follows from the seed: the pairs and masks it drew
            pre["tokens_seen"], pre["data_fingerprint"] = (pre.get("tokens_seen") or 0) + pretrain_seed, f"data{pretrain_seed}"
            pre["run_dir"] = f"pretrain/mlm_nsp-seed{pretrain_seed}"  # each seed its own run
            record["pretrain_seed"] = pretrain_seed
            (folder / path.name).write_text(json.dumps(record))
    records = load_records([tmp_path])
    data = collect(records)
    assert len(data.variants) == 1
    assert {rec.data["pretrain_seed"] for rec in data.variants[0].records} == {1, 2}
    # the same records without the field are two models of one label: two columns, as before
    for path in tmp_path.rglob("*.record.json"):
        record = json.loads(path.read_text())
        del record["pretrain_seed"]
        path.write_text(json.dumps(record))
    assert len(collect(load_records([tmp_path])).variants) == 2


def test_a_data_folder_elsewhere_keeps_the_tokenizer_key(tmp_path):
    """The trained tokenizer's folder is keyed on the corpus relative to the data folder: the same study with its
    data folder at another path finds its tokenizer."""
    from bertbench.studies import keys
    from bertbench.studies.preset import VariantSpec, load_preset, variant_config
    from bertbench.studies.run import ensure_tokenizer

    preset = load_preset("smoke")
    here, there = (variant_config(preset, VariantSpec("base"), Path(d)) for d in ("/data/a", "/elsewhere/b"))
    assert keys.tokenizer_key(here, Path("/data/a")) == keys.tokenizer_key(there, Path("/elsewhere/b"))
    made = tmp_path / f"tokenizer-{keys.tokenizer_key(here, Path('/data/a'))}"
    made.mkdir()
    (made / "vocab.txt").write_text("[PAD]\n")
    trained = []
    found = ensure_tokenizer(there, Path("/elsewhere/b"), tmp_path, lambda name, fn: trained.append(name), lambda line: None)
    assert found == str(made) and trained == []
