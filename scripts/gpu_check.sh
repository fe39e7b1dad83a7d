#!/usr/bin/env bash
# The GPU check, in ≤ 8 minutes on a bare GPU machine: every output goes under one folder, OUT.
#
#   scripts/gpu_check.sh --pack          here, where PyPI is reachable: make .gpucheck/ for a bare machine
#   scripts/gpu_check.sh OUT [--dry-run] there: the check
#
# A bare GPU machine (python3.12 with a CUDA torch, lightning, transformers and pip; no internet, no data):
#   1. here, once, in the checkout's root:
#        echo /.gpucheck/ >> .git/info/exclude
#        scripts/gpu_check.sh --pack
#      .gpucheck/whl/: the wheels the machine lacks (datasets, dill, multiprocess at this venv's versions, for
#      python 3.12 manylinux x86-64; seqeval, which PyPI has as source only, built here as a pure-Python wheel);
#      .gpucheck/data.tar.xz: the data gpu-quick reads (corpus/wikipedia, corpus/gutenberg, vocab/, glue's
#      RTE MRPC STS-B CoLA SST-2), from $BERTBENCH_DATA_DIR or ../shared/data: ~115 MB of text, ~33 MB as xz
#      (28% on a 10 MB sample; not packed in full yet). The script prints the sizes: with the checkout's ~9 MB,
#      what travels must stay under 64 MiB.
#   2. there, in one call (the device tool's run: carry [".gpucheck"], timeout_s 480):
#        scripts/gpu_check.sh "$OUT"
#      which, when .gpucheck/ is there, first runs
#        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpucheck/whl/*.whl
#        export PYTHONPATH=/tmp/site:$PYTHONPATH
#        tar -xJf .gpucheck/data.tar.xz -C /tmp/bertbench-data; export BERTBENCH_DATA_DIR=/tmp/bertbench-data
#      (a machine with the packages and the data needs none of this: set BERTBENCH_DATA_DIR and run it).
#
# Parts, in order, each under its own time limit (`timeout`), each timed; a failed part does not stop the next,
# and the script exits non-zero if any failed (OUT/steps.tsv says which):
#   1. setup      python ≥ 3.11 and torch with CUDA; .gpucheck's wheels and data as above; every import checked.
#   2. cuda-tests `pytest -m cuda` (tests/test_cuda.py: GPU vs CPU forward, a bf16 pre-training, the bench).
#   3. probe      scripts/gpu_probe.py at base size, batch 64: host syncs per training step
#                 (torch.cuda.set_sync_debug_mode) and the attention kernels a step runs, for the dynamic,
#                 the static and the compiled static step (OUT/probe.json).
#   4. bench      `bertbench bench pretrain --accelerator cuda --model-size base --batch-sizes 64,128,256
#                 --compile`: every side at each batch size, eager and compiled, MFU at executed and at
#                 full-model FLOPs, compile time (OUT/bench-pretrain-base-cuda.json, OUT/bench-pretrain.md).
#   5. gpu-quick  `bertbench run --preset gpu-quick` in $GPU_CHECK_WORK (default /tmp/bertbench-gpu-check) with
#                 what time is left (it needs more than is left: its finished stages are what it yields), then
#                 its records, pre-training curves and stage times copied to OUT/gpu-quick/ in the layout of
#                 `make archive` (leaderboards/records/PRESET); checkpoints stay behind.
# --dry-run: the same parts on the CPU, each cut down (tests collected, cuda ones skip; a tiny probe and bench,
# neither compiled; the preset validated only), to check the script itself where there is no GPU.
set -euo pipefail

usage() { echo "usage: scripts/gpu_check.sh OUT [--dry-run] | scripts/gpu_check.sh --pack" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PACK=$ROOT/.gpucheck
TASKS_CARRIED="RTE MRPC STS-B CoLA SST-2"  # gpu-quick's fine-tuning tasks

if [[ $1 == --pack ]]; then
  DATA=${BERTBENCH_DATA_DIR:-$ROOT/../shared/data}
  [[ -d $DATA/corpus ]] || { echo "no data at $DATA: set BERTBENCH_DATA_DIR to the folder holding corpus/" >&2; exit 3; }
  PY=${PYTHON:-python3}
  rm -rf "$PACK"; mkdir -p "$PACK/whl"
  version() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))"; }
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$PACK/whl" "datasets==$(version datasets)" "dill==$(version dill)" "multiprocess==$(version multiprocess)"
  "$PY" -m pip wheel -q --no-deps -w "$PACK/whl" "seqeval==$(version seqeval)"
  globs=(corpus/wikipedia corpus/gutenberg vocab)
  for t in $TASKS_CARRIED; do globs+=("glue/$t"); done
  tar -C "$DATA" -cJf "$PACK/data.tar.xz" "${globs[@]}"
  du -sh "$PACK" "$PACK"/whl/* "$PACK/data.tar.xz"
  echo "carry [\".gpucheck\"] (must stay under 64 MiB with the working tree), then: scripts/gpu_check.sh \"\$OUT\""
  exit 0
fi
OUT_ARG=$1
DRY=0
if [[ $# -ge 2 ]]; then [[ $2 == --dry-run ]] || usage; DRY=1; fi

mkdir -p "$OUT_ARG"
OUT=$(cd "$OUT_ARG" && pwd)
PY=${PYTHON:-python3}
WORK=${GPU_CHECK_WORK:-/tmp/bertbench-gpu-check}
TOTAL=${GPU_CHECK_SECONDS:-465}  # the device call's 480 s, less a margin for the summary
START=$(date +%s)
FAILED=0
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 BERTBENCH_PROGRESS_SECONDS=20
for d in "${BERTBENCH_DATA_DIR:-}" "$ROOT/../shared/data" "$ROOT/shared/data" /tmp/bertbench-data; do
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
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda available:", torch.cuda.is_available(), torch.version.cuda)'
  if (( ! DRY )) && ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "torch sees no CUDA GPU (a CPU build, or no driver): install a CUDA build of torch, or run with --dry-run"; return 1
  fi
  if [[ -d $PACK/whl ]] && (( ! DRY )); then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$PACK"/whl/*.whl
    echo "installed into /tmp/site: $(ls "$PACK/whl" | tr '\n' ' ')"
  fi
  if [[ -f $PACK/data.tar.xz && ! -d /tmp/bertbench-data/corpus ]] && (( ! DRY )); then
    mkdir -p /tmp/bertbench-data && tar -xJf "$PACK/data.tar.xz" -C /tmp/bertbench-data && echo "data unpacked into /tmp/bertbench-data"
  fi
  "$PY" -c 'import lightning, datasets, tokenizers, typer, rich, pandas, seqeval, sklearn, scipy, yaml, matplotlib, safetensors, pytest, transformers' ||
    { echo "a dependency is missing: make .gpucheck with scripts/gpu_check.sh --pack where PyPI is reachable, and carry it"; return 1; }
  echo "every dependency imports"
}

cuda_tests() {
  if (( DRY )); then "$PY" -m pytest -q -p no:cacheprovider "$ROOT/tests/test_cuda.py"
  else "$PY" -m pytest -q -p no:cacheprovider -m cuda "$ROOT/tests/test_cuda.py"; fi
}

probe() {
  # the dry run leaves out the compiled step: inductor's C++ build takes minutes on a small CPU
  if (( DRY )); then "$PY" "$ROOT/scripts/gpu_probe.py" --model-size tiny --batch-size 4 --seq-len 32
  else "$PY" "$ROOT/scripts/gpu_probe.py" --model-size base --batch-size 64 --seq-len 128 --compile; fi > "$OUT/probe.out"
  head -n -1 "$OUT/probe.out"; tail -n 1 "$OUT/probe.out" > "$OUT/probe.json"; rm "$OUT/probe.out"  # (probe.log: the part's)
}

bench() {
  local json="$OUT/bench-pretrain-base-cuda.json"
  if (( DRY )); then
    "$PY" -m bertbench.cli bench pretrain --accelerator cpu --model-size tiny --batch-sizes 4,8 --seq-len 32 --steps 1 --warmup 1 --json
  else
    "$PY" -m bertbench.cli bench pretrain --accelerator cuda --model-size base --batch-sizes 64,128,256 --seq-len 128 --steps 5 --warmup 2 --compile --json
  fi > "$json.tmp"
  mv "$json.tmp" "$json"
  "$PY" -m bertbench.cli bench pretrain --render "$json" | tee "$OUT/bench-pretrain.md"
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

export PY DRY OUT WORK ROOT PACK PYTHONPATH="/tmp/site:$PYTHONPATH"
export -f setup cuda_tests probe bench gpu_quick
log "bertbench GPU check: $ROOT at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'); OUT $OUT; data ${BERTBENCH_DATA_DIR:-none}; $( ((DRY)) && echo 'dry run (CPU)' || echo GPU)"
rm -f "$OUT/steps.tsv"
part setup 45 setup
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
part cuda-tests 75 cuda_tests
part probe 60 probe
part bench 150 bench
part gpu-quick 480 gpu_quick
log "done in $(( $(date +%s) - START )) s; parts (name, exit status, seconds):"
awk -F'\t' '{printf "%-12s %-8s %s\n", $1, $2, $3}' "$OUT/steps.tsv" | tee -a "$OUT/gpu_check.log"  # no column(1) on every machine
exit $FAILED
