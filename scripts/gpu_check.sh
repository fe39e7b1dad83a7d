#!/usr/bin/env bash
# The GPU check, in ≤ 10 minutes on a fresh GPU machine: every output goes under one folder, OUT.
#
#   scripts/gpu_check.sh OUT [--dry-run]
#
# Parts, in order, each under its own time limit (`timeout`), each timed; a failed part does not stop
# the next, and the script exits non-zero if any failed (OUT/steps.tsv says which):
#   1. setup      python ≥ 3.11 and torch with CUDA; the project installed with `pip install -e '.[dev]'`,
#                 constrained to the torch already there (a CUDA torch is never replaced). Skipped when
#                 everything already imports. Needs PyPI only for what is missing; offline, it tries
#                 `--no-index --no-build-isolation` (packages present: nothing to download).
#   2. cuda-tests `pytest -m cuda` (tests/test_cuda.py: GPU vs CPU forward, a bf16 pre-training, the bench).
#   3. bench      `bertbench bench pretrain --accelerator cuda` at base size: tokens/s and MFU against the
#                 GPU's datasheet bf16 peak (H200/H100 989 TFLOP/s dense; table in
#                 bertbench/benchmarks/common.py); JSON in OUT/bench-pretrain-base-cuda.json.
#   4. gpu-quick  `bertbench run --preset gpu-quick` in $GPU_CHECK_WORK (default /tmp/bertbench-gpu-check),
#                 then its records, pre-training curves and stage times copied to OUT/gpu-quick/ in the layout
#                 of `make archive` (leaderboards/records/PRESET); checkpoints stay behind.
# The corpus and task data: $BERTBENCH_DATA_DIR, else ../shared/data beside the checkout, else ./shared/data;
# without them part 4 fails at once with a message and the others still run.
# --dry-run: the same parts on the CPU, each cut down (tests collected, cuda ones skip; a tiny bench; the
# preset validated only), to check the script itself where there is no GPU.
set -euo pipefail

usage() { echo "usage: scripts/gpu_check.sh OUT [--dry-run]" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
OUT_ARG=$1
DRY=0
if [[ $# -ge 2 ]]; then [[ $2 == --dry-run ]] || usage; DRY=1; fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT_ARG"
OUT=$(cd "$OUT_ARG" && pwd)
PY=${PYTHON:-python3}
WORK=${GPU_CHECK_WORK:-/tmp/bertbench-gpu-check}
TOTAL=${GPU_CHECK_SECONDS:-600}
START=$(date +%s)
FAILED=0
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 BERTBENCH_PROGRESS_SECONDS=20
for d in "${BERTBENCH_DATA_DIR:-}" "$ROOT/../shared/data" "$ROOT/shared/data"; do
  if [[ -n $d && -d $d/corpus ]]; then export BERTBENCH_DATA_DIR=$(cd "$d" && pwd); break; fi
done

log() { echo "[gpu_check $(date -u +%H:%M:%S) +$(( $(date +%s) - START ))s] $*" | tee -a "$OUT/gpu_check.log"; }

# part NAME LIMIT_SECONDS COMMAND…: run it under `timeout`, output in OUT/NAME.log, a row in OUT/steps.tsv
part() {
  local name=$1 limit=$2; shift 2
  local left=$(( TOTAL - ($(date +%s) - START) ))
  (( limit > left )) && limit=$left
  if (( limit < 10 )); then
    log "$name: skipped, the ${TOTAL} s budget is spent"; printf '%s\tskipped\t0\n' "$name" >> "$OUT/steps.tsv"; FAILED=1; return 0
  fi
  local t0 rc=0
  t0=$(date +%s)
  log "$name: started (limit ${limit} s)"
  # a function runs in a fresh bash under `timeout` (which runs programs, not functions): exported below
  PART_LIMIT=$limit timeout --kill-after=15 "$limit" bash -c "set -euo pipefail; $*" > "$OUT/$name.log" 2>&1 || rc=$?
  local took=$(( $(date +%s) - t0 ))
  printf '%s\t%s\t%s\n' "$name" "$rc" "$took" >> "$OUT/steps.tsv"
  if (( rc == 0 )); then log "$name: ok in ${took} s"; else
    FAILED=1; log "$name: FAILED (exit $rc$( (( rc == 124 || rc == 137 )) && echo ', time limit')) in ${took} s; last lines:"
    tail -n 5 "$OUT/$name.log" | sed 's/^/    /' | tee -a "$OUT/gpu_check.log"
  fi
}

setup() {
  "$PY" -c 'import sys; assert sys.version_info >= (3, 11), f"python {sys.version.split()[0]}: bertbench needs 3.11 or newer"'
  if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "torch is not installed: installing it from PyPI (its Linux wheels are CUDA builds)"
    "$PY" -m pip install -q torch
  fi
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda available:", torch.cuda.is_available(), torch.version.cuda)'
  if (( ! DRY )) && ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "torch sees no CUDA GPU (a CPU build, or no driver): install a CUDA build of torch, or run with --dry-run"; return 1
  fi
  if "$PY" -c 'import lightning, datasets, tokenizers, typer, rich, pandas, seqeval, sklearn, scipy, yaml, matplotlib, safetensors, pytest, transformers' 2>/dev/null; then
    echo "every dependency imports: nothing to install (bertbench runs from $ROOT through PYTHONPATH)"; return 0
  fi
  local constraint="$WORK/torch-constraint.txt"
  mkdir -p "$WORK"
  "$PY" -c 'import torch; print(f"torch=={torch.__version__}")' > "$constraint"  # keep the torch that is there
  "$PY" -m pip install -q -c "$constraint" -e "$ROOT[dev]" ||
    "$PY" -m pip install -q --no-index --no-build-isolation -c "$constraint" -e "$ROOT[dev]"
}

cuda_tests() {
  if (( DRY )); then "$PY" -m pytest -q -p no:cacheprovider "$ROOT/tests/test_cuda.py"
  else "$PY" -m pytest -q -p no:cacheprovider -m cuda "$ROOT/tests/test_cuda.py"; fi
}

bench() {
  if (( DRY )); then
    "$PY" -m bertbench.cli bench pretrain --accelerator cpu --model-size tiny --batch-size 4 --seq-len 32 --steps 1 --warmup 1 --json
  else
    "$PY" -m bertbench.cli bench pretrain --accelerator cuda --model-size base --batch-size 64 --seq-len 128 --steps 10 --warmup 3 --json
  fi > "$OUT/bench-pretrain-base-cuda.json.tmp"
  mv "$OUT/bench-pretrain-base-cuda.json.tmp" "$OUT/bench-pretrain-base-cuda.json"
  "$PY" - "$OUT/bench-pretrain-base-cuda.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for name, s in r["sides"].items():
    print(f"{name:<24} {s['tokens_per_s']:>12,.0f} tokens/s  MFU {100 * s['mfu_bf16_peak']:.1f}% of the bf16 peak")
EOF
}

gpu_quick() {
  [[ -n ${BERTBENCH_DATA_DIR:-} ]] || { echo "no data: set BERTBENCH_DATA_DIR to the folder holding corpus/ and the task data"; return 3; }
  if (( DRY )); then "$PY" -m bertbench.cli run --preset gpu-quick --data-dir "$BERTBENCH_DATA_DIR" --validate; return; fi
  local run="$WORK/gpu-quick" rc=0
  mkdir -p "$WORK"
  # its own limit, 30 s inside the part's: the part's `timeout` would kill this shell too, and with it the
  # copying below (the first timed run lost every finished stage's records that way)
  timeout --kill-after=20 $(( PART_LIMIT - 30 )) \
    "$PY" -m bertbench.cli run --preset gpu-quick --data-dir "$BERTBENCH_DATA_DIR" --out "$run" || rc=$?
  # what `make archive` keeps (also after a failure or the time limit: the finished stages are still results)
  local keep="$OUT/gpu-quick"
  mkdir -p "$keep"
  ( cd "$run" && find results -name '*.record.json' -exec cp --parents {} "$keep" \; ) 2>/dev/null || true
  ( cd "$run" && find pretrain -maxdepth 2 \( -name metrics.csv -o -name summary.json \) -exec cp --parents {} "$keep" \; ) 2>/dev/null || true
  cp "$run"/stages*.json "$keep"/ 2>/dev/null || true
  echo "$(find "$keep" -name '*.record.json' | wc -l) result records in $keep"
  return $rc
}

export PY DRY OUT WORK ROOT
export -f setup cuda_tests bench gpu_quick
log "bertbench GPU check: $ROOT at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'); OUT $OUT; data ${BERTBENCH_DATA_DIR:-none}; $( ((DRY)) && echo 'dry run (CPU)' || echo GPU)"
rm -f "$OUT/steps.tsv"
part setup 150 setup
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
part cuda-tests 100 cuda_tests
part bench 100 bench
part gpu-quick 480 gpu_quick
log "done in $(( $(date +%s) - START )) s; parts (name, exit status, seconds):"
awk -F'\t' '{printf "%-12s %-8s %s\n", $1, $2, $3}' "$OUT/steps.tsv" | tee -a "$OUT/gpu_check.log"  # no column(1) on every machine
exit $FAILED
