"""`bench data --scale 1,2,4`: does a process's memory grow with the corpus? For each k, the corpus repeated k
times (symbolic links) is built, its first batch drawn, a training started and `bertbench data build` of the paper
recipe's data run, each in a fresh process measured from outside: docs/scale.md and docs/scale-data.md. The data
build's MB/s per core: tokenising, MB over the seconds times the processes; the index, MB of text the indices
cover over the seconds their processes ran.

An extrapolation to the paper's corpus (16 GB of text) on a 32-core node is
fitted to the measured points: a line in corpus size per quantity. The tokenisation rate per core is the
measured rate over the cores used (a shared machine makes it a lower bound); instance building is one
process, so its rate does not grow with cores. The data build's lines give the same reading for `bertbench
data build`: its tokenising over the node's cores, its indices one process each, the phases side by side, and
the paper recipe's static masking (dupe_factor copies) as that many times the one-copy index.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from bertbench.errors import BertbenchError

PAPER_CORPUS_MB = 16_000  # BooksCorpus + English Wikipedia, 3.3 B words: about 16 GB of text
NODE_CORES = 32
MODEL_SIZE = "tiny"
# what the data build measures: the paper recipe's phases, one copy of the data (see the module's notes)
BUILD_RECIPE, BUILD_SETS = "bert-base-paper", ["data.masking=dynamic"]
PAPER_DUPE_FACTOR = 10  # the paper recipe's static copies (recipes/bert-base-paper.yaml), for the static reading


def repeated_corpus(corpus: Path, k: int, folder: Path) -> Path:
    """`folder` holding k sub-folders of links to every file of `corpus` (hidden and other files included:
    the reader ignores what it ignores in the original too)."""
    files = [p for p in sorted(corpus.rglob("*")) if p.is_file()]
    for i in range(k):
        for p in files:
            link = folder / f"copy{i}" / p.relative_to(corpus)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(p.resolve())
    return folder


def _measured(cmd: list[str], env: dict[str, str], cwd: Path, whole_json: bool = False) -> dict[str, Any]:
    """Run `cmd`; its wall time, peak RSS (MB) and the last stdout line parsed as JSON when it is JSON (with
    `whole_json`, all of stdout is one JSON document)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out_fh, tempfile.TemporaryFile("w+") as err_fh:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out_fh, stderr=err_fh, text=True)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage (RUSAGE_CHILDREN would mix them)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_fh.seek(0)
        err_fh.seek(0)
        out, err = out_fh.read(), err_fh.read()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (err or out or "").strip().splitlines()[-3:]
        raise BertbenchError(f"bench data --scale: {' '.join(cmd[:4])} … failed: {' | '.join(tail)}")
    lines = [ln for ln in out.strip().splitlines() if ln.startswith("{")]
    result = json.loads(out) if whole_json else json.loads(lines[-1]) if lines else {}
    return {"wall_seconds": round(wall, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), **result}


def _du_mb(folder: Path) -> float:
    return round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6, 1)


def _env(cache: Path) -> dict[str, str]:
    """A measured process's environment: its own cache folder, no progress lines, no hub."""
    return {**os.environ, "BERTBENCH_CACHE_DIR": str(cache), "BERTBENCH_PROGRESS": "0",
            "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def _probe(args: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    return _measured([sys.executable, "-m", "bertbench.benchmarks.data_scale", *args], env, cwd)


def measure(k: int, corpus: Path, tokenizer: Path, seq_len: int, tmp: Path, progress: Optional[Callable[[str], None]]) -> dict[str, Any]:
    from bertbench.benchmarks.data import corpus_bytes

    source = repeated_corpus(corpus, k, tmp / f"corpus-x{k}")
    cache = tmp / f"cache-x{k}"
    env = _env(cache)
    common = ["--corpus", str(source), "--tokenizer", str(tokenizer), "--seq-len", str(seq_len)]
    build = _probe(["build", *common], env, tmp)
    if progress:
        progress(f"x{k}: build {build['wall_seconds']:.0f} s, peak {build['peak_rss_mb']:.0f} MB")
    first = _probe(["first-batch", *common], env, tmp)
    train = _measured([sys.executable, "-m", "bertbench.cli", "pretrain", "--model-size", MODEL_SIZE, "--tokenizer", str(tokenizer),
                       "--corpus", str(source), "--max-seq-len", str(seq_len), "--max-steps", "1", "--batch-size", "32",
                       "--eval-every", "0", "--out", str(tmp / f"run-x{k}")], env, tmp)
    if progress:
        progress(f"x{k}: first batch {first['first_batch_seconds']:.2f} s (peak {first['peak_rss_mb']:.0f} MB), "
                 f"training start {train['wall_seconds']:.0f} s (peak {train['peak_rss_mb']:.0f} MB)")
    built = measure_data_build(source, tokenizer, tmp / f"cache-build-x{k}", tmp)
    if progress:
        progress(f"x{k}: data build {built['wall_seconds']:.0f} s: tokenising {built['tokenise_mb_per_core_s']:.2f} MB/s "
                 f"per core, the index {built['index_mb_per_core_s']:.2f} MB/s per core")
    return {
        "scale": k,
        "corpus_mb": round(corpus_bytes(source) / 1e6, 1),
        "build": build,
        "cache_mb": _du_mb(cache),
        "first_batch": first,
        "train_start": {"wall_seconds": train["wall_seconds"], "peak_rss_mb": train["peak_rss_mb"]},
        "data_build": built,
    }


def measure_data_build(source: Path, tokenizer: Path, cache: Path, cwd: Path) -> dict[str, Any]:
    """`bertbench data build` of the paper recipe's data (BUILD_RECIPE, BUILD_SETS) from `source` into the empty
    cache `cache`, in a fresh process: its wall time, peak RSS, and what it reports, with the rates per core."""
    cmd = [sys.executable, "-m", "bertbench.cli", "data", "build", "--recipe", BUILD_RECIPE, "--corpus", str(source),
           "--tokenizer", str(tokenizer), "--json", *(a for kv in BUILD_SETS for a in ("--set", kv))]
    run = _measured(cmd, _env(cache), cwd, whole_json=True)
    tok, index = run.get("tokenise"), run.get("index")
    if not tok or not index:
        raise BertbenchError(f"bench data --scale: data build into {cache} found its cache already built")
    tokenise_core_s = tok["seconds"] * tok["processes"]
    return {
        "wall_seconds": run["wall_seconds"], "peak_rss_mb": run["peak_rss_mb"],
        "tokenise_mb": round(tok["mb"], 4), "tokenise_seconds": round(tok["seconds"], 2),
        "tokenise_processes": tok["processes"], "tokenise_core_seconds": round(tokenise_core_s, 3),
        "tokenise_mb_per_core_s": round(tok["mb"] / max(tokenise_core_s, 1e-9), 4),
        "indices": index["count"], "phases": index["count"] // 2, "index_mb": round(index["mb"], 4),
        "index_seconds": round(index["seconds"], 2), "index_processes": index["processes"],
        "index_core_seconds": round(index["cpu_seconds"], 3),
        "index_mb_per_core_s": round(index["mb"] / max(index["cpu_seconds"], 1e-9), 4),
    }


def _line_at(xs: list[float], x: float, ys: list[float]) -> float:
    """The least-squares line y = a + b·x through the points (b = 0 from one point), read at `x`. A falling line is
    noise, not a process that needs less memory for more text: it is taken as flat (b = 0, a = the mean)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((xi - mx) ** 2 for xi in xs)
    b = sum((xi - mx) * (y - my) for xi, y in zip(xs, ys)) / var if var else 0.0
    b = max(b, 0.0)
    return my - b * mx + b * x


def extrapolate(points: list[dict[str, Any]], cores_used: int, corpus_mb: float = PAPER_CORPUS_MB,
                node_cores: int = NODE_CORES) -> dict[str, Any]:
    """Each quantity's fitted line, read at `corpus_mb` of text on `node_cores` cores."""
    at = functools.partial(_line_at, [p["corpus_mb"] for p in points], corpus_mb)
    tokenise_h = at([p["build"]["corpus_seconds"] for p in points]) * cores_used / node_cores / 3600
    instances_h = at([p["build"]["instance_seconds"] for p in points]) / 3600
    return {
        "corpus_mb": round(corpus_mb, 1),
        "node_cores": node_cores,
        "cores_measured": cores_used,
        "build_hours": round(tokenise_h + instances_h, 2),
        "tokenise_hours": round(tokenise_h, 2),
        "instance_index_hours": round(instances_h, 2),
        "cache_gb": round(at([p["cache_mb"] for p in points]) / 1000, 1),
        "build_peak_rss_mb": round(at([p["build"]["peak_rss_mb"] for p in points])),
        "train_start_peak_rss_mb": round(at([p["train_start"]["peak_rss_mb"] for p in points])),
        "first_batch_peak_rss_mb": round(at([p["first_batch"]["peak_rss_mb"] for p in points])),
    }


def run(scales: list[int], corpus: Path, tokenizer: Path, seq_len: int = 128,
        progress: Optional[Callable[[str], None]] = None) -> dict[str, Any]:
    from bertbench.benchmarks import common
    from bertbench.data.corpus import default_num_proc

    if not scales or min(scales) < 1:
        raise BertbenchError(f"--scale {','.join(map(str, scales))}: expected whole numbers ≥ 1, e.g. 1,2,4")
    if not corpus.is_dir():
        raise BertbenchError(f"{corpus}: expected the corpus folder")
    points = []
    with tempfile.TemporaryDirectory(prefix="bertbench-scale-") as tmp:
        for k in scales:
            points.append(measure(k, corpus, tokenizer, seq_len, Path(tmp), progress))
    base = points[0]
    for p in points:  # growth against the smallest corpus measured
        p["growth"] = {f"{stage}_peak_rss": round(p[stage]["peak_rss_mb"] / base[stage]["peak_rss_mb"] - 1, 3)
                       for stage in ("build", "train_start", "first_batch")}
    return derive({
        "benchmark": "data-scale",
        "machine": common.machine(),
        "config": {"corpus": str(corpus), "scales": scales, "max_seq_len": seq_len, "objective": "mlm+nsp",
                   "model_size": MODEL_SIZE, "tokenizer": str(tokenizer), "num_proc": default_num_proc()},
        "points": points,
    })


def extrapolate_data_build(points: list[dict[str, Any]], corpus_mb: float = PAPER_CORPUS_MB,
                           node_cores: int = NODE_CORES, dupe_factor: int = PAPER_DUPE_FACTOR) -> dict[str, Any]:
    """`bertbench data build` read at `corpus_mb` on `node_cores` cores: lines through the points' core-seconds
    (tokenising; the indices) against the corpus size. Tokenising spreads over the node's cores; each index is one
    process, and a phase's indices build beside the other phase's, so the index's wall time is its core-seconds
    over the phases (while the node has a core per index); static masking builds `dupe_factor` copies."""
    builds = [p["data_build"] for p in points]
    at = functools.partial(_line_at, [p["corpus_mb"] for p in points], corpus_mb)
    phases = builds[-1]["phases"]
    tokenise_h = at([b["tokenise_core_seconds"] for b in builds]) / node_cores / 3600
    index_h = at([b["index_core_seconds"] for b in builds]) / max(1, min(phases, node_cores)) / 3600
    largest = builds[-1]
    return {
        "corpus_mb": round(corpus_mb, 1), "node_cores": node_cores, "phases": phases, "dupe_factor": dupe_factor,
        "tokenise_mb_per_core_s": largest["tokenise_mb_per_core_s"], "index_mb_per_core_s": largest["index_mb_per_core_s"],
        "tokenise_hours": round(tokenise_h, 2), "index_hours": round(index_h, 2),
        "build_hours": round(tokenise_h + index_h, 2),
        "static_index_hours": round(index_h * dupe_factor, 2), "static_build_hours": round(tokenise_h + index_h * dupe_factor, 2),
    }


def derive(result: dict[str, Any]) -> dict[str, Any]:
    """The fitted readings, from the measured points (so `--render` of a saved result applies today's fit)."""
    points, cores = result["points"], result["config"]["num_proc"]
    with_build = [p for p in points if "data_build" in p]  # results saved before the data build have none
    return {
        **result,
        **({"data_build_extrapolation": extrapolate_data_build(with_build)} if with_build else {}),
        "extrapolation": extrapolate(points, cores),
        # the question (16x the shared corpus) read off the same lines, on this machine's cores
        "at_16x": extrapolate(points, cores, corpus_mb=16 * points[0]["corpus_mb"] / points[0]["scale"], node_cores=cores),
    }


def markdown(result: dict[str, Any], command: str) -> str:
    m, ex = result["machine"], result["extrapolation"]
    lines = [f"_Generated by `{command}` on {m['hardware']}, {result['config']['num_proc']} tokenising processes, "
             f"{m['code']}; do not edit between the markers._", "",
             "| corpus | build | cache | build peak RSS | first batch | its peak RSS | training start peak RSS |",
             "|---|---|---|---|---|---|---|"]
    for p in result["points"]:
        g = p["growth"]
        lines.append(
            f"| {p['scale']}× ({p['corpus_mb']:,.0f} MB) | {p['build']['wall_seconds']:.0f} s | {p['cache_mb']:,.0f} MB | "
            f"{p['build']['peak_rss_mb']:,.0f} MB ({100 * g['build_peak_rss']:+.0f}%) | {p['first_batch']['first_batch_seconds']:.2f} s | "
            f"{p['first_batch']['peak_rss_mb']:,.0f} MB ({100 * g['first_batch_peak_rss']:+.0f}%) | "
            f"{p['train_start']['peak_rss_mb']:,.0f} MB ({100 * g['train_start_peak_rss']:+.0f}%) |")
    measured_16x = any(p["scale"] == 16 * result["points"][0]["scale"] for p in result["points"])
    if "at_16x" in result and not measured_16x:  # read off the lines only where the table has no such row
        x16, base = result["at_16x"], result["points"][0]
        lines += ["", f"Read off lines through these points at 16× ({x16['corpus_mb']:,.0f} MB; not measured): peak RSS "
                  f"{x16['build_peak_rss_mb']:,} MB building ({100 * (x16['build_peak_rss_mb'] / base['build']['peak_rss_mb'] - 1):+.0f}%), "
                  f"{x16['first_batch_peak_rss_mb']:,} MB at the first batch ({100 * (x16['first_batch_peak_rss_mb'] / base['first_batch']['peak_rss_mb'] - 1):+.0f}%), "
                  f"{x16['train_start_peak_rss_mb']:,} MB at training start ({100 * (x16['train_start_peak_rss_mb'] / base['train_start']['peak_rss_mb'] - 1):+.0f}%); "
                  f"a falling line is read as flat (noise)."]
    lines += ["", f"Extrapolated (a line through these points) to the paper's corpus, {ex['corpus_mb'] / 1000:.0f} GB of text, "
              f"on a {ex['node_cores']}-core node: build {ex['build_hours']:.1f} h (tokenising {ex['tokenise_hours']:.1f} h "
              f"over {ex['node_cores']} processes, at this machine's rate per core; the instance index {ex['instance_index_hours']:.1f} h "
              f"in one process), cache {ex['cache_gb']:.0f} GB, peak RSS {ex['build_peak_rss_mb']:,} MB building, "
              f"{ex['train_start_peak_rss_mb']:,} MB at training start per process."]
    if "data_build_extrapolation" in result:
        lines += ["", *data_build_markdown(result)]
    return "\n".join(lines)


def data_build_markdown(result: dict[str, Any]) -> list[str]:
    """The data build's rows (`bertbench data build`, the paper recipe's two phases, one copy) and its reading
    at the paper's corpus."""
    x = result["data_build_extrapolation"]
    lines = [f"`bertbench data build --recipe {BUILD_RECIPE} {' '.join('--set ' + kv for kv in BUILD_SETS)}` "
             f"({x['phases']} phases: train and held-out indices of each, built side by side):", "",
             "| corpus | data build | tokenising | per core | instance indices | per core | peak RSS |",
             "|---|---|---|---|---|---|---|"]
    for p in result["points"]:
        b = p.get("data_build")
        if b:
            lines.append(
                f"| {p['scale']}× ({p['corpus_mb']:,.0f} MB) | {b['wall_seconds']:.0f} s | {b['tokenise_seconds']:.0f} s on "
                f"{b['tokenise_processes']} | {b['tokenise_mb_per_core_s']:.2f} MB/s | {b['indices']} in {b['index_seconds']:.0f} s "
                f"on {b['index_processes']} | {b['index_mb_per_core_s']:.2f} MB/s | {b['peak_rss_mb']:,.0f} MB |")
    lines += ["", f"Extrapolated to {x['corpus_mb'] / 1000:.0f} GB of text on {x['node_cores']} cores: data build "
              f"{x['build_hours']:.1f} h (tokenising {x['tokenise_hours']:.1f} h over {x['node_cores']} processes; the "
              f"indices {x['index_hours']:.1f} h, one process each, the {x['phases']} phases side by side). With the "
              f"paper's static masking ({x['dupe_factor']} copies) the indices take {x['static_index_hours']:.1f} h, "
              f"the build {x['static_build_hours']:.1f} h."]
    return lines


# ----------------------------------------------------------------------------------------------
# The probes, each run in a fresh process: `python -m bertbench.benchmarks.data_scale build|first-batch …`


def _probe_main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="data_scale")
    parser.add_argument("what", choices=("build", "first-batch"))
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--seq-len", type=int, default=128)
    args = parser.parse_args(argv)

    from bertbench.config import DataConfig, PretrainConfig
    from bertbench.data.instances import build_pretraining_data
    from bertbench.model.tokenizer import WordPieceTokenizer

    pcfg = PretrainConfig()  # the seed and objective `bertbench pretrain` uses: the train-start run finds this index
    tok = WordPieceTokenizer.load(Path(args.tokenizer))
    cfg = DataConfig(corpus=[args.corpus], max_seq_len=args.seq_len)
    t0 = time.perf_counter()
    data = build_pretraining_data(cfg, tok, objective=pcfg.objective, seed=pcfg.seed)
    out = {"corpus_seconds": data.stats["corpus_seconds"], "instance_seconds": data.stats["instance_seconds"],
           "train_instances": data.stats["train_instances"], "tokens": data.stats["tokens"]}
    if args.what == "first-batch":
        from bertbench.data.masking import make_collator
        from bertbench.training.batches import StepBatchDataset

        batches = StepBatchDataset(data.train, make_collator(cfg, tok, pcfg.objective, seed=pcfg.seed), 32, pcfg.seed)
        batch = batches[0]
        out["first_batch_seconds"] = round(time.perf_counter() - t0, 3)
        out["batch_shape"] = list(batch["input_ids"].shape)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    _probe_main(sys.argv[1:])
