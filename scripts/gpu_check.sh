#!/usr/bin/env bash
# The GPU check, as two device calls, each its own command and each inside the device tool's 10-minute limit
# (600 s a command; a session has 15 minutes of device time in all, starts included: one call a session, the
# performance call first). Every output goes under one folder, OUT.
#
#   scripts/gpu_check.sh perf OUT [--dry-run]    call 1, the performance call: carries nothing but the checkout
#   scripts/gpu_check.sh quick OUT [--dry-run]   call 2: the CUDA tests and the gpu-quick study (carry .gpucheck)
#   scripts/gpu_check.sh --pack                  here, where PyPI is reachable: make .gpucheck/ for call 2
#
# Call 1, perf (device tool: run, no carry, timeout_s 590): `bertbench bench gpu`, one process, BERT-Base × 128
#   tokens, batch 256: transformers bf16 eager; bertbench eager; bertbench compiled (compiled once); bertbench through
#   the Lightning loop `bertbench pretrain` runs; transformers compiled if time is left; bertbench eager at batch 64
#   (the old figure's batch). Each side is timed over 30 steps between two CUDA events and its line (step time,
#   tokens/s, MFU at executed and at model FLOPs, host syncs in the timed steps, the SDPA kernel it ran) is appended
#   to OUT/gpu-perf.jsonl, fsynced, as soon as it is measured; OUT/gpu-perf.md is its table. torch, lightning and
#   transformers only: no wheels, no data (synthetic batches), nothing to carry.
#   Expected: on a GPU (estimate: ~20 s of imports and set-up; ~15 s for each eager side, model building
#   included; 1-2 min for each cold BERT-Base compile on an H100) about 5 min, capped by --budget-seconds 480
#   (a side starts only if every later side keeps its least time, each side has its own budget) and the part's
#   540 s (imports, the render): under 9.5 min, inside the 10. The CPU dry run (a tiny shape, 3 timed steps a
#   side, torch.compile with its eager backend), measured: 20 s of CPU time (imports, two dynamo traces, Lightning's
#   set-up), 81-91 s of wall time on 2 cores shared with a load of ~9.
# Call 2, quick (device tool: run, carry [".gpucheck"], timeout_s 595, the command line starting with
#   BERTBENCH_COMMIT=SHA as --pack prints it): setup, then the parts below, each under its own `timeout`, their
#   total capped at GPU_CHECK_SECONDS (575):
#     setup      python ≥ 3.11 and torch with CUDA; .gpucheck's wheels; its data unpacked into $WORK/data (also in a
#                dry run); every import checked (≤ 60 s)
#     cuda-tests `pytest -m cuda` (tests/test_cuda.py: GPU vs CPU forward, a bf16 pre-training, the bench), first,
#                with a fixed share of 120 s (GPU_CHECK_CUDA_TESTS_SECONDS; estimate ~80-120 s of work, most of it
#                two subprocesses' imports)
#     gpu-quick  `bertbench run --preset gpu-quick` (sized by estimate to ≤ 8 min on one H100/H200) with the rest,
#                ≤ 480 s; the data looked for when it starts (after setup); its records, pre-training curves and
#                stage times copied to OUT/gpu-quick/ in the layout of `make archive` (leaderboards/records/PRESET),
#                also after the time limit (finished stages count)
#   Expected: ≤ 575 s on a GPU. The CPU dry run (test_cuda's CPU test, the preset validated and its data found),
#   measured before the reorder: 9 s of CPU time, 78 s of wall time on 2 cores shared with a load of ~9.
#   .gpucheck (--pack): the wheels a bare machine lacks (datasets, dill, multiprocess at this venv's versions for
#   python 3.12 manylinux x86-64; seqeval built here as a pure-Python wheel) and data.tar.xz, the data gpu-quick
#   reads (corpus/wikipedia, corpus/gutenberg, vocab/, glue's RTE MRPC STS-B CoLA SST-2) from $BERTBENCH_DATA_DIR or
#   ../shared/data (~33 MB as xz); with the checkout, what travels must stay under 64 MiB. First, once:
#   `echo /.gpucheck/ >> .git/info/exclude`.
# Each part's output is OUT/NAME.log, its row (name, exit status, seconds) OUT/steps.tsv; a failed part does not
# stop the next, and the script exits non-zero if any failed.
set -euo pipefail

usage() { echo "usage: scripts/gpu_check.sh perf|quick OUT [--dry-run] | scripts/gpu_check.sh --pack" >&2; exit 2; }
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
  commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo SHA)
  echo "carry [\".gpucheck\"] (must stay under 64 MiB with the working tree), then, passing the commit in (.git does not travel):"
  echo "  BERTBENCH_COMMIT=$commit scripts/gpu_check.sh quick \"\$OUT\""
  exit 0
fi
[[ $# -ge 2 && ( $1 == perf || $1 == quick ) ]] || usage
CALL=$1
OUT_ARG=$2
DRY=0
if [[ $# -ge 3 ]]; then [[ $3 == --dry-run && $# -eq 3 ]] || usage; DRY=1; fi

mkdir -p "$OUT_ARG"
OUT=$(cd "$OUT_ARG" && pwd)
PY=${PYTHON:-python3}
WORK=${GPU_CHECK_WORK:-/tmp/bertbench-gpu-check}
if [[ $CALL == perf ]]; then TOTAL=${GPU_CHECK_SECONDS:-540}; else TOTAL=${GPU_CHECK_SECONDS:-575}; fi
START=$(date +%s)
FAILED=0
# unbuffered: a part cut at its time limit still leaves every line it printed in its log
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 BERTBENCH_PROGRESS_SECONDS=20 \
  PYTHONUNBUFFERED=1
UNPACKED=$WORK/data  # where setup unpacks .gpucheck's data
# The code version: provenance reads git, and .git does not travel to the device; BERTBENCH_COMMIT (given on the
# device call's command line, as --pack prints it) stands in for it there.
if COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null); then export BERTBENCH_COMMIT=$COMMIT; fi
CUDA_TESTS_SECONDS=${GPU_CHECK_CUDA_TESTS_SECONDS:-120}  # the CUDA tests' fixed share (~80-120 s of work), first

log() { echo "[gpu_check $(date -u +%H:%M:%S) +$(( $(date +%s) - START ))s] $*" | tee -a "$OUT/gpu_check.log"; }

# part NAME LIMIT_SECONDS COMMAND…: run it under `timeout`, output in OUT/NAME.log, a row in OUT/steps.tsv
# GPU_CHECK_PARTS="setup gpu-quick", say, runs only those (the test of `quick`'s dry run leaves out the CUDA tests'
# minute of imports); a part left out is a row saying so, not a failure.
part() {
  local name=$1 limit=$2; shift 2
  if [[ -n ${GPU_CHECK_PARTS:-} && " $GPU_CHECK_PARTS " != *" $name "* ]]; then
    log "$name: left out (GPU_CHECK_PARTS)"; printf '%s\tleft out\t0\n' "$name" >> "$OUT/steps.tsv"; return 0
  fi
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

perf() {
  # its own budget, 60 s inside the part's: imports and the render come on top of the sides
  local rc=0 flags=()
  (( DRY )) && flags=(--dry-run)
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda available:", torch.cuda.is_available(), torch.version.cuda)'
  "$PY" -m bertbench bench gpu --out "$OUT/gpu-perf.jsonl" --budget-seconds $(( PART_LIMIT - 60 )) "${flags[@]}" || rc=$?
  # the table of whatever was measured, also after a failed or overrun side
  "$PY" -m bertbench bench gpu --render "$OUT/gpu-perf.jsonl" > "$OUT/gpu-perf.md" && cat "$OUT/gpu-perf.md"
  return $rc
}

setup() {
  "$PY" -c 'import sys; assert sys.version_info >= (3, 11), f"python {sys.version.split()[0]}: bertbench needs 3.11 or newer"
print("python", sys.version.split()[0], "unbuffered:", sys.stdout.write_through)'
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda available:", torch.cuda.is_available(), torch.version.cuda)'
  if (( ! DRY )) && ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "torch sees no CUDA GPU (a CPU build, or no driver): install a CUDA build of torch, or run with --dry-run"; return 1
  fi
  if [[ -d $PACK/whl ]] && (( ! DRY )); then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$PACK"/whl/*.whl
    echo "installed into /tmp/site: $(ls "$PACK/whl" | tr '\n' ' ')"
  fi
  # the data, also in a dry run: gpu-quick looks for it only after this (find_data)
  if [[ -f $PACK/data.tar.xz && ! -d $UNPACKED/corpus ]]; then
    mkdir -p "$UNPACKED" && tar -xJf "$PACK/data.tar.xz" -C "$UNPACKED" && echo "data unpacked into $UNPACKED"
  fi
  "$PY" -c 'import lightning, datasets, tokenizers, typer, rich, pandas, seqeval, sklearn, scipy, yaml, matplotlib, safetensors, pytest, transformers' ||
    { echo "a dependency is missing: make .gpucheck with scripts/gpu_check.sh --pack where PyPI is reachable, and carry it"; return 1; }
  echo "every dependency imports"
}

cuda_tests() {
  if (( DRY )); then "$PY" -m pytest -q -p no:cacheprovider "$ROOT/tests/test_cuda.py"
  else "$PY" -m pytest -q -p no:cacheprovider -m cuda "$ROOT/tests/test_cuda.py"; fi
}

# The data gpu-quick reads: looked for when it starts, after setup has unpacked .gpucheck's (not when the script
# starts: on a fresh machine only the unpacked copy exists).
find_data() {
  local d
  for d in "${BERTBENCH_DATA_DIR:-}" "$ROOT/../shared/data" "$ROOT/shared/data" "$UNPACKED"; do
    if [[ -n $d && -d $d/corpus ]]; then BERTBENCH_DATA_DIR=$(cd "$d" && pwd); export BERTBENCH_DATA_DIR; return 0; fi
  done
  return 1
}

gpu_quick() {
  find_data || { echo "no data: set BERTBENCH_DATA_DIR to the folder holding corpus/ and the task data, or carry .gpucheck"; return 3; }
  echo "data: $BERTBENCH_DATA_DIR"
  local t
  for t in corpus/wikipedia corpus/gutenberg vocab $(printf 'glue/%s ' $TASKS_CARRIED); do
    [[ -e $BERTBENCH_DATA_DIR/$t ]] || { echo "no $t in $BERTBENCH_DATA_DIR: gpu-quick reads it"; return 3; }
  done
  if (( DRY )); then "$PY" -m bertbench run --preset gpu-quick --data-dir "$BERTBENCH_DATA_DIR" --validate; return; fi
  local run="$WORK/gpu-quick" rc=0
  mkdir -p "$WORK"
  # its own limit, 30 s inside the part's: the part's `timeout` would kill this shell too, and with it the
  # copying below (the first timed run lost every finished stage's records that way)
  timeout --kill-after=20 $(( PART_LIMIT - 30 )) \
    "$PY" -m bertbench run --preset gpu-quick --data-dir "$BERTBENCH_DATA_DIR" --out "$run" || rc=$?
  # what `make archive` keeps (also after a failure or the time limit: the finished stages are still results)
  local keep="$OUT/gpu-quick"
  mkdir -p "$keep"
  ( cd "$run" && find results -name '*.record.json' -exec cp --parents {} "$keep" \; ) 2>/dev/null || true
  ( cd "$run" && find pretrain -maxdepth 2 \( -name metrics.csv -o -name summary.json \) -exec cp --parents {} "$keep" \; ) 2>/dev/null || true
  cp "$run"/stages*.json "$keep"/ 2>/dev/null || true
  echo "$(find "$keep" -name '*.record.json' | wc -l) result records in $keep"
  return $rc
}

export PY DRY OUT WORK ROOT PACK UNPACKED TASKS_CARRIED PYTHONPATH="/tmp/site:$PYTHONPATH"
export -f perf setup cuda_tests gpu_quick find_data
log "bertbench GPU check, $CALL call: $ROOT at commit ${BERTBENCH_COMMIT:-? (not passed in: BERTBENCH_COMMIT=SHA)}; OUT $OUT; $( ((DRY)) && echo 'dry run (CPU)' || echo GPU)"
rm -f "$OUT/steps.tsv"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
if [[ $CALL == perf ]]; then
  part perf "$TOTAL" perf
else
  # the CUDA tests first, with a fixed share: gpu-quick, last, takes the rest and keeps its finished stages
  part setup 60 setup
  part cuda-tests "$CUDA_TESTS_SECONDS" cuda_tests
  part gpu-quick 480 gpu_quick
fi
log "done in $(( $(date +%s) - START )) s; parts (name, exit status, seconds):"
awk -F'\t' '{printf "%-12s %-8s %s\n", $1, $2, $3}' "$OUT/steps.tsv" | tee -a "$OUT/gpu_check.log"  # no column(1) on every machine
exit $FAILED
