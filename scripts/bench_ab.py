"""Before/after on one host: `bench pretrain`'s fp32 sides at two commits, alternated in fresh processes.

    python scripts/bench_ab.py OLD_REV [--model-size mini] [--pairs 3] [--steps 8] [--out FILE.json] [--embed DOC]
    python scripts/bench_ab.py --render FILE.json [--embed DOC]      # the table of a saved result


Each pair runs the old checkout, then this one (the next pair the other way round, so neither always runs on a
warmer or a more loaded machine), each in its own Python process that imports that checkout's `bertbench` first
(PYTHONPATH beats the editable install) and runs the bench's own `synthetic_batches`, `build_sides` and
`run_rounds`: bertbench's default CPU step against transformers' on the same batches and the same first weights.

Why the fp32 sides only: `bench pretrain` also times both sides under bf16 autocast, and on a host without native
bf16 (AVX2 only: no AVX512-BF16, no AMX) a bf16 matmul is emulated at ~1% of fp32's rate, so one bf16 round of
BERT-Mini takes minutes. There, precision `auto` (the default path) is fp32, which is what this compares.

The result is a JSON file: each run's median step time and tokens/s per side, and per commit the median over runs
of bertbench's step time, its ratio to transformers' in the same run, and new/old of both. `--embed` writes its
table into DOC between `<!-- bertbench bench: begin pretrain-ab -->` and its end marker.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Runs inside the checkout under test: only functions both commits have, with the same signatures.
_SIDE_RUN = r"""
import json, sys
from bertbench.benchmarks import common
from bertbench.benchmarks.pretrain import build_sides, synthetic_batches
from bertbench.config import ModelConfig
import bertbench, torch

size, steps, warmup, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
common.set_threads(threads)
cfg = ModelConfig.from_size(size, vocab_size=30522)
batches = synthetic_batches(cfg, warmup + steps, 32, 128)
sides = [s for s in build_sides(cfg, batches, "32-true") if s.precision == "32-true"]
common.run_rounds(sides, warmup, steps)
print(json.dumps({"bertbench_file": bertbench.__file__, "threads": torch.get_num_threads(), "sides": {
    s.name: {"step_ms": round(1000 * common.median(s.seconds), 2), "tokens_per_s": round(common.median(s.rates), 1),
             "loss_last": round(s.losses[-1], 4)} for s in sides}}))
"""


def run_side(checkout: Path, size: str, steps: int, warmup: int, threads: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(checkout), BERTBENCH_PROGRESS="0")
    r = subprocess.run([sys.executable, "-c", _SIDE_RUN, size, str(steps), str(warmup), str(threads)],
                       capture_output=True, text=True, env=env, cwd=checkout)
    if r.returncode != 0:
        sys.exit(f"error: the bench at {checkout} failed:\n{r.stderr[-3000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if not out.pop("bertbench_file").startswith(str(checkout)):
        sys.exit(f"error: {checkout} did not import its own bertbench (check PYTHONPATH)")
    return out


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def summarise(runs: list[dict]) -> dict:
    ours = [r["sides"]["bertbench_fp32"]["step_ms"] for r in runs]
    ratio = [r["sides"]["transformers_fp32"]["step_ms"] / r["sides"]["bertbench_fp32"]["step_ms"] for r in runs]
    return {"bertbench_fp32_step_ms_median": round(statistics.median(ours), 2),
            "speedup_vs_transformers_median": round(statistics.median(ratio), 3), "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old_rev", nargs="?")
    ap.add_argument("--model-size", default="mini")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--render", type=Path, help="print (and --embed) the table of a saved result instead of running")
    ap.add_argument("--embed", type=Path)
    a = ap.parse_args()
    if a.render:
        return show(json.loads(a.render.read_text()), a.render, a.embed)
    if not a.old_rev:
        ap.error("OLD_REV is required unless --render")
    new_rev = git("rev-parse", "--short", "HEAD") + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    old_rev = git("rev-parse", "--short", a.old_rev)
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / f"bertbench-{old_rev}"
        git("worktree", "add", "--detach", str(old), old_rev)
        try:
            for i in range(a.pairs):
                order = [("old", old), ("new", ROOT)] if i % 2 == 0 else [("new", ROOT), ("old", old)]
                for label, checkout in order:
                    runs[label].append(run_side(checkout, a.model_size, a.steps, a.warmup, a.threads))
                    print(f"pair {i + 1}/{a.pairs} {label}: {runs[label][-1]['sides']}", file=sys.stderr)
        finally:
            git("worktree", "remove", "--force", str(old))
    old_s, new_s = summarise(runs["old"]), summarise(runs["new"])
    result = {
        "benchmark": "pretrain fp32 sides, before/after (scripts/bench_ab.py)",
        "config": {"model_size": a.model_size, "batch_size": 32, "seq_len": 128, "vocab_size": 30522,
                   "steps": a.steps, "warmup": a.warmup, "threads": a.threads, "pairs": a.pairs},
        "machine": run_machine(),
        "old": {"rev": old_rev, **old_s},
        "new": {"rev": new_rev, **new_s},
        # < 1: the new default step is faster; the ratio to transformers cancels a slower or faster machine moment
        "new_over_old_step_ms": round(new_s["bertbench_fp32_step_ms_median"] / old_s["bertbench_fp32_step_ms_median"], 3),
        "new_over_old_speedup_vs_transformers": round(
            new_s["speedup_vs_transformers_median"] / old_s["speedup_vs_transformers_median"], 3),
    }
    if a.out:
        a.out.write_text(json.dumps(result, indent=1) + "\n")
    show(result, a.out, a.embed)


def markdown(result: dict, source: Path | None) -> str:
    c, m = result["config"], result["machine"]
    lines = [f"_Generated by `python scripts/bench_ab.py {result['old']['rev']} --model-size {c['model_size']} "
             f"--pairs {c['pairs']} --steps {c['steps']}` on {m['hardware']}, torch {m['torch']}, {c['threads']} threads"
             + (f" (`{source.as_posix()}`)" if source else "") + "; do not edit between the markers._", "",
             f"bench pretrain's fp32 sides, BERT-{c['model_size'].capitalize()}, batch {c['batch_size']} × "
             f"{c['seq_len']} tokens; each commit in {c['pairs']} fresh processes, alternated; medians over them.", "",
             "| commit | bertbench fp32 step ms (runs: min–max) | transformers fp32 / bertbench fp32 |", "|---|---|---|"]
    for side in ("old", "new"):
        r = result[side]
        ms = [run["sides"]["bertbench_fp32"]["step_ms"] for run in r["runs"]]
        lines.append(f"| {r['rev']} ({side}) | {r['bertbench_fp32_step_ms_median']} ({min(ms)}–{max(ms)}) | "
                     f"{r['speedup_vs_transformers_median']}× |")
    lines += ["", f"New / old: step time {result['new_over_old_step_ms']}× (below 1: faster), speed-up over "
              f"transformers {result['new_over_old_speedup_vs_transformers']}× (above 1: larger)."]
    return "\n".join(lines)


def show(result: dict, source: Path | None, embed: Path | None) -> None:
    text = markdown(result, source)
    print(text)
    if embed:
        from bertbench.runtime.files import atomic_write_text, replace_marked_block

        doc = replace_marked_block(embed.read_text(encoding="utf-8"), "<!-- bertbench bench: begin pretrain-ab -->",
                                   "<!-- bertbench bench: end pretrain-ab -->", text, str(embed))
        atomic_write_text(embed, doc)


def run_machine() -> dict:
    from bertbench.benchmarks import common

    return common.machine()


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # this checkout's bertbench for the result's machine line and --embed
    main()
