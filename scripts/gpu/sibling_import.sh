#!/usr/bin/env bash
# One GPU call that brings this GPU's shipped tuning file up to date with a sibling's (another chip of the same
# architecture, whose entries are newer) by measuring the sibling's choices here, then runs issue 14's tables with
# the result (binaries carried: scripts/gpu/pack.sh; carry [".carry/bin"]).
#  1. For each math in MATHS (default tf32): AlexNet + seeds + scripts/gpu/unseen_shapes.txt, every direction, with
#     the sibling's file alone as the shipped database, so each row runs the configuration tuned on the sibling;
#     the bench checks every row against float64 first.
#  2. `db import-bench` of those rows into a copy of this GPU's file (OUTDIR/INTO): per family and problem, a row
#     is added, or replaces an entry it beats; the lookup then takes the fastest family measured here.
#  3. scripts/gpu/plan_tables.sh (TABLES, default "bf16 tf32 3xtf32") with the copy beside the sibling's file.
# Why: the lookup takes this device's exact-shape entry before the sibling's, so this GPU's older entries hide the
# sibling's newer families (docs/PERFORMANCE.md, twenty-first session). OUTDIR gets three files (the device tool
# returns at most 8): log.txt, the merged INTO, and results.tar.gz with the benches and the tables' folder.
#   FROM=nvidia-h100-cuda.json INTO=nvidia-h200-cuda.json [MATHS=tf32] [TABLES="bf16 tf32 3xtf32"] \
#     scripts/gpu/sibling_import.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: sibling_import.sh OUTDIR}
FROM=${FROM:?the sibling's file in tuning/, e.g. nvidia-h100-cuda.json}
INTO=${INTO:?this GPU's file in tuning/, e.g. nvidia-h200-cuda.json}
WORK=/tmp/sibling-work
rm -rf "$WORK" && mkdir -p "$OUT" "$WORK"
ALONE=/tmp/sibling-alone MERGED=/tmp/sibling-merged
rm -rf "$ALONE" "$MERGED" && mkdir -p "$ALONE" "$MERGED"
cp "tuning/$FROM" "$ALONE/" && cp "tuning/$FROM" "tuning/$INTO" "$MERGED/"
LOG=$OUT/log.txt
stamp() { echo "--- $* ($(date +%T))"; }
{
  (
    export CONVTUNE_SHIPPED_TUNING_DIR=$ALONE
    source scripts/gpu/gpu_env.sh
    export CONVTUNE_TUNING_DB=/tmp/sibling-empty.json
    rm -f "$CONVTUNE_TUNING_DB"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
    echo "commit $(git rev-parse --short HEAD 2>/dev/null); from $FROM into $INTO"
    ALL=/tmp/sibling-layers.txt
    cat bench/suites/alexnet.txt bench/suites/seeds.txt scripts/gpu/unseen_shapes.txt >"$ALL"
    for math in ${MATHS:-tf32}; do
      stamp "bench $math on $FROM alone"
      timeout "${BENCH_SECONDS:-200}" "$BIN/convtune" bench --suite "$ALL" --direction all --device cuda:0 \
        --math "$math" --warmup 2 --repeats 10 --out "$WORK/${math}_sibling.json" >"$WORK/${math}_sibling.txt" 2>&1
      echo "exit $?"
      # The import writes the copy in place; no shipped folder, so "kept" compares with the copy's entries only.
      CONVTUNE_SHIPPED_TUNING_DIR=/tmp/sibling-empty-dir
      mkdir -p "$CONVTUNE_SHIPPED_TUNING_DIR"
      "$BIN/convtune" db --db "$MERGED/$INTO" import-bench "$WORK/${math}_sibling.json" 2>&1 | tail -1
      CONVTUNE_SHIPPED_TUNING_DIR=$ALONE
    done
  )
  cp "$MERGED/$INTO" "$OUT/$INTO"
  stamp "plan_tables.sh with the merged $INTO"
  CONVTUNE_SHIPPED_TUNING_DIR=$MERGED MATHS=${TABLES:-bf16 tf32 3xtf32} bash scripts/gpu/plan_tables.sh "$WORK/tables"
  stamp done
} >"$LOG" 2>&1
tar -C "$WORK" -czf "$OUT/results.tar.gz" .
grep -E "^---|exit|imported|geomean|not faster" "$LOG" | cut -c1-240
