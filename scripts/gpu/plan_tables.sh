#!/usr/bin/env bash
# Issue 14's tables in one GPU call (binaries carried: scripts/gpu/pack.sh; carry [".carry/bin"]): the plans' own
# choice (the shipped tuning/ files, an empty user database) on AlexNet + the seeds + scripts/gpu/unseen_shapes.txt,
# every direction, against cuDNN in the same math (FP32 beside 3xtf32: cuDNN has no split mode), one bench per mode
# in MATHS (default "bf16 tf32 3xtf32"), then AlexNet in fp32 (convtune's own FP32 families, which 3xtf32 must beat)
# and scripts/gpu/split_tf32_summary.py. Every row is checked against float64 by the bench.
# Files in OUTDIR: <math>_plan.json/.md, fp32_alexnet.json, summary.txt, log.txt.
#   [MATHS="bf16 tf32"] scripts/gpu/plan_tables.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: plan_tables.sh OUTDIR}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=$OUT/db.json
ALL=/tmp/all-layers.txt
cat bench/suites/alexnet.txt bench/suites/seeds.txt scripts/gpu/unseen_shapes.txt >"$ALL"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "cudnn: $CONVTUNE_CUDNN_LIBRARY"
  for math in ${MATHS:-bf16 tf32 3xtf32}; do
    echo "--- bench $math ($(date +%T))"
    timeout "${BENCH_SECONDS:-200}" "$BIN/convtune" bench --suite "$ALL" --direction all --device cuda:0 --math "$math" \
      --against cudnn --warmup 2 --repeats 10 --out "$OUT/${math}_plan.json" --markdown "$OUT/${math}_plan.md" \
      >"/tmp/plan-$math.txt" 2>&1
    echo "exit $?"; grep -vE "^\[" "/tmp/plan-$math.txt" | cut -c1-300 | tail -6
  done
  if [[ " ${MATHS:-3xtf32} " == *" 3xtf32 "* ]]; then
    echo "--- bench fp32 AlexNet ($(date +%T))"
    timeout 120 "$BIN/convtune" bench --suite alexnet --direction all --device cuda:0 --math fp32 --warmup 2 \
      --repeats 10 --out "$OUT/fp32_alexnet.json" >/tmp/plan-fp32.txt 2>&1
    echo "exit $?"
    # split_tf32_summary.py reads 3xtf32.json and tf32.json.
    cp "$OUT/3xtf32_plan.json" "$OUT/3xtf32.json" 2>/dev/null
    [ -f "$OUT/tf32_plan.json" ] && cp "$OUT/tf32_plan.json" "$OUT/tf32.json"
    python3 scripts/gpu/split_tf32_summary.py "$OUT" | tee "$OUT/summary.txt"
    rm -f "$OUT/3xtf32.json" "$OUT/tf32.json"
  fi
  echo "--- done ($(date +%T))"
} >"$OUT/log.txt" 2>&1
grep -E "^---|exit|geomean|not faster" "$OUT/log.txt"
