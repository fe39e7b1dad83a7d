"""Before/after on one host: `bench pretrain`'s sides at two commits, alternated in fresh processes.

    python scripts/bench_ab.py OLD_REV [--model-size mini] [--pairs 3] [--steps 8] [--precision 32-true|bf16-mixed]
                               [--objective mlm+nsp|clm] [--profile STEPS] [--out FILE.json] [--embed DOC]
    python scripts/bench_ab.py --render FILE.json [--embed DOC]      # the table of a saved result


Each pair runs the old checkout, then this one (the next pair the other way round, so neither always runs on a
warmer or a more loaded machine), each in its own Python process that imports that checkout's `bertbench` first
(PYTHONPATH beats the editable install). MLM+NSP runs the bench's own `synthetic_batches`, `build_sides` and
`run_rounds`: bertbench's default CPU step against transformers' on the same batches and the same first weights,
at one precision. The causal LM (`--objective clm`) times our step alone, as each checkout's training step calls it
(the fused head where the forward has one: `logits=False`), since an older bench has no causal sides.

The precision defaults to fp32: on a host without native bf16 (AVX2 only: no AVX512-BF16, no AMX) a bf16 matmul
is emulated at ~1% of fp32's rate, so one bf16 round of BERT-Mini takes minutes, and precision `auto` (the default
path) there is fp32. Where bf16 is native, `--precision bf16-mixed` compares the default path.

The result is a JSON file: each run's median step time and tokens/s per side, and per commit the median over runs
of bertbench's step time, its ratio to transformers' in the same run (MLM+NSP), and new/old of both. `--embed`
writes its table into DOC between `<!-- bertbench bench: begin NAME -->` and its end marker: NAME `pretrain-ab`,
with `-bf16` and/or `-clm` appended for the other precision and objective, and `-profile` for a profiled result.

`--profile STEPS` profiles our step after the timed rounds of each run (torch.profiler, self CPU time) and reports
the matrix products' share of it, old and new: the step's floor if every other op went and the products stayed as
they are (how far leaner code around the products can take the step on this host). The environment variables that
emulate an older CPU (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS) are recorded when set.
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
import inspect, json, sys
from bertbench.benchmarks import common
from bertbench.benchmarks.pretrain import build_sides, synthetic_batches, train_step
from bertbench.config import ModelConfig, OptimConfig
import bertbench, torch

size, steps, warmup, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
precision, objective, profile_steps = sys.argv[5], sys.argv[6], int(sys.argv[7])
label = {"32-true": "fp32", "bf16-mixed": "bf16"}[precision]
common.set_threads(threads)
cfg = ModelConfig.from_size(size, vocab_size=30522, causal=objective == "clm")
if objective == "mlm+nsp":
    batches = synthetic_batches(cfg, warmup + steps, 32, 128)
    sides = [s for s in build_sides(cfg, batches, precision) if s.precision == precision]
else:  # the causal LM: our step as this checkout's training step calls the model
    from bertbench.model.bert import BertForPreTraining
    from bertbench.training.optim import make_adamw
    gen = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(warmup + steps):
        ids = torch.randint(5, cfg.vocab_size, (32, 128), generator=gen)
        batches.append({"input_ids": ids, "labels": torch.cat([ids[:, 1:], torch.full((32, 1), -100)], 1)})
    torch.manual_seed(0)
    model = BertForPreTraining(cfg, nsp=False).train()
    fused = {"logits": False} if "logits" in inspect.signature(model.forward).parameters else {}
    step = train_step(model, make_adamw(model, OptimConfig(), "cpu"),
                      lambda m, b: m(b["input_ids"], lm_labels=b["labels"], **fused).loss, batches, bf16=label == "bf16")
    sides = [common.Side(f"bertbench_{label}", "bertbench", precision, step, [32 * 128] * len(batches))]
common.run_rounds(sides, warmup, steps)
out = {"bertbench_file": bertbench.__file__, "threads": torch.get_num_threads(), "sides": {
    s.name: {"step_ms": round(1000 * common.median(s.seconds), 2), "tokens_per_s": round(common.median(s.rates), 1),
             "loss_last": round(s.losses[-1], 4)} for s in sides}}
if profile_steps:  # after the timed rounds: where our step's self CPU time goes, matrix products against the rest
    from torch.profiler import ProfilerActivity, profile
    ours = next(s for s in sides if s.impl == "bertbench")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(profile_steps):
            ours.step(i)
    self_ms = {e.key: e.self_cpu_time_total / 1000 / profile_steps for e in prof.key_averages()}
    total, matrix = sum(self_ms.values()), sum(self_ms.get(op, 0.0) for op in MATRIX_OPS)
    others = sorted(((k, v) for k, v in self_ms.items() if k not in MATRIX_OPS), key=lambda kv: -kv[1])[:8]
    out["profile"] = {"steps": profile_steps, "self_ms_per_step": round(total, 1), "matrix_share": round(matrix / total, 4),
                      "top_other_ms_per_step": {k: round(v, 1) for k, v in others}}
print(json.dumps(out))
"""
# What the profile counts as matrix products (self CPU time): every other op is work a leaner step could shed.
MATRIX_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
_SIDE_RUN = f"MATRIX_OPS = {MATRIX_OPS!r}\n" + _SIDE_RUN
PRECISIONS = {"32-true": "fp32", "bf16-mixed": "bf16"}
# what emulates an older CPU (an AVX2-only host on an AVX-512 one): recorded, and shown in the command line
ISA_ENV = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
OBJECTIVES = ("mlm+nsp", "clm")


def run_side(checkout: Path, size: str, steps: int, warmup: int, threads: int, precision: str = "32-true",
             objective: str = "mlm+nsp", profile: int = 0) -> dict:
    env = dict(os.environ, PYTHONPATH=str(checkout), BERTBENCH_PROGRESS="0")
    argv = [size, str(steps), str(warmup), str(threads), precision, objective, str(profile)]
    r = subprocess.run([sys.executable, "-c", _SIDE_RUN, *argv], capture_output=True, text=True, env=env, cwd=checkout)
    if r.returncode != 0:
        sys.exit(f"error: the bench at {checkout} failed:\n{r.stderr[-3000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if not out.pop("bertbench_file").startswith(str(checkout)):
        sys.exit(f"error: {checkout} did not import its own bertbench (check PYTHONPATH)")
    return out


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def summarise(runs: list[dict], label: str = "fp32") -> dict:
    """Medians over runs: our step's ms and (MLM+NSP) transformers' step over ours in the same run."""
    ours = [r["sides"][f"bertbench_{label}"]["step_ms"] for r in runs]
    out = {f"bertbench_{label}_step_ms_median": round(statistics.median(ours), 2)}
    if all(f"transformers_{label}" in r["sides"] for r in runs):
        ratio = [r["sides"][f"transformers_{label}"]["step_ms"] / r["sides"][f"bertbench_{label}"]["step_ms"] for r in runs]
        out["speedup_vs_transformers_median"] = round(statistics.median(ratio), 3)
    if all("profile" in r for r in runs):
        out["matrix_share_median"] = round(statistics.median(r["profile"]["matrix_share"] for r in runs), 4)
    return {**out, "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old_rev", nargs="?")
    ap.add_argument("--model-size", default="mini")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--precision", choices=list(PRECISIONS), default="32-true")
    ap.add_argument("--objective", choices=OBJECTIVES, default="mlm+nsp")
    ap.add_argument("--profile", type=int, default=0, metavar="STEPS",
                    help="after timing, profile our step over STEPS steps in each run: the matrix products' share")
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
    runs = run_pairs(a, old_rev)
    label = PRECISIONS[a.precision]
    old_s, new_s = summarise(runs["old"], label), summarise(runs["new"], label)
    step = f"bertbench_{label}_step_ms_median"
    result = {
        "benchmark": f"pretrain {label} sides, before/after (scripts/bench_ab.py)",
        "config": {"model_size": a.model_size, "batch_size": 32, "seq_len": 128, "vocab_size": 30522,
                   "steps": a.steps, "warmup": a.warmup, "threads": a.threads, "pairs": a.pairs,
                   **({"precision": a.precision} if a.precision != "32-true" else {}),
                   **({"objective": a.objective} if a.objective != "mlm+nsp" else {}),
                   **({"profile": a.profile} if a.profile else {}),
                   **({"isa_env": isa} if (isa := {k: os.environ[k] for k in ISA_ENV if k in os.environ}) else {})},
        "machine": run_machine(),
        "old": {"rev": old_rev, **old_s},
        "new": {"rev": new_rev, **new_s},
        # < 1: the new default step is faster; the ratio to transformers cancels a slower or faster machine moment
        "new_over_old_step_ms": round(new_s[step] / old_s[step], 3),
    }
    if "speedup_vs_transformers_median" in new_s:
        result["new_over_old_speedup_vs_transformers"] = round(
            new_s["speedup_vs_transformers_median"] / old_s["speedup_vs_transformers_median"], 3)
    if a.out:
        a.out.write_text(json.dumps(result, indent=1) + "\n")
    show(result, a.out, a.embed)


def run_pairs(a: argparse.Namespace, old_rev: str) -> dict[str, list[dict]]:
    """`a.pairs` pairs of side processes, old and this checkout, the order alternating; the old one a temporary worktree."""
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / f"bertbench-{old_rev}"
        git("worktree", "add", "--detach", str(old), old_rev)
        try:
            for i in range(a.pairs):
                order = [("old", old), ("new", ROOT)] if i % 2 == 0 else [("new", ROOT), ("old", old)]
                for label, checkout in order:
                    runs[label].append(run_side(checkout, a.model_size, a.steps, a.warmup, a.threads, a.precision,
                                                a.objective, a.profile))
                    print(f"pair {i + 1}/{a.pairs} {label}: {runs[label][-1]['sides']}", file=sys.stderr)
        finally:
            git("worktree", "remove", "--force", str(old))
    return runs


def block_name(config: dict) -> str:
    """pretrain-ab, with -bf16 and/or -clm for the other precision and objective, -profile for a profiled one."""
    precision, objective = config.get("precision", "32-true"), config.get("objective", "mlm+nsp")
    return ("pretrain-ab" + ("" if precision == "32-true" else "-bf16") + ("" if objective == "mlm+nsp" else "-clm")
            + ("-profile" if config.get("profile") else ""))


def markdown(result: dict, source: Path | None) -> str:
    c, m = result["config"], result["machine"]
    label = PRECISIONS[c.get("precision", "32-true")]
    clm = c.get("objective") == "clm"
    flags = "".join(f" --{k} {c[k]}" for k in ("precision", "objective", "profile") if k in c)
    what = (f"our causal LM's {label} step (no NSP)" if clm else f"bench pretrain's {label} sides")
    env = "".join(f"{k}={v} " for k, v in c.get("isa_env", {}).items())
    lines = [f"_Generated by `{env}python scripts/bench_ab.py {result['old']['rev']} --model-size {c['model_size']} "
             f"--pairs {c['pairs']} --steps {c['steps']}{flags}` on {m['hardware']}, torch {m['torch']}, {c['threads']} threads"
             + (f" (`{source.as_posix()}`)" if source else "") + "; do not edit between the markers._", "",
             f"{what}, BERT-{c['model_size'].capitalize()}, batch {c['batch_size']} × "
             f"{c['seq_len']} tokens; each commit in {c['pairs']} fresh processes, alternated; medians over them.", ""]
    lines += ([f"| commit | bertbench {label} step ms (runs: min–max) |", "|---|---|"] if clm else
              [f"| commit | bertbench {label} step ms (runs: min–max) | transformers {label} / bertbench {label} |", "|---|---|---|"])
    for side in ("old", "new"):
        r = result[side]
        ms = [run["sides"][f"bertbench_{label}"]["step_ms"] for run in r["runs"]]
        row = f"| {r['rev']} ({side}) | {r[f'bertbench_{label}_step_ms_median']} ({min(ms)}–{max(ms)}) |"
        lines.append(row if clm else row + f" {r['speedup_vs_transformers_median']}× |")
    tail = f"New / old: step time {result['new_over_old_step_ms']}× (below 1: faster)"
    if "new_over_old_speedup_vs_transformers" in result:
        tail += f", speed-up over transformers {result['new_over_old_speedup_vs_transformers']}× (above 1: larger)"
    lines += ["", tail + "."]
    if "matrix_share_median" in result["old"]:
        old, new = result["old"]["matrix_share_median"], result["new"]["matrix_share_median"]
        step = f"bertbench_{label}_step_ms_median"
        floor = result["old"][step] / (result["new"][step] * new)  # the old step over the new one's products alone
        lines += ["", f"Profiled after the timed rounds (torch.profiler, self CPU time, {c['profile']} steps a run; "
                  f"medians over runs): matrix products ({', '.join(op.removeprefix('aten::') for op in MATRIX_OPS)}) "
                  f"are {100 * old:.1f}% of the old step and {100 * new:.1f}% of the new. With every other op gone and "
                  f"the products as they are, the new step would be at most {floor:.2f}× faster than the old (each "
                  f"at most {1 / old:.2f}× and {1 / new:.2f}× faster than itself)."]
    return "\n".join(lines)


def show(result: dict, source: Path | None, embed: Path | None) -> None:
    text = markdown(result, source)
    print(text)
    if embed:
        from bertbench.runtime.files import atomic_write_text, replace_marked_block

        name = block_name(result["config"])
        doc = replace_marked_block(embed.read_text(encoding="utf-8"), f"<!-- bertbench bench: begin {name} -->",
                                   f"<!-- bertbench bench: end {name} -->", text, str(embed))
        atomic_write_text(embed, doc)


def run_machine() -> dict:
    from bertbench.benchmarks import common

    return common.machine()


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # this checkout's bertbench for the result's machine line and --embed
    main()
