#!/usr/bin/env bash
# Issue 14's split-mode bar (3xtf32 faster than convtune's own FP32 on every AlexNet row) on a GPU whose shipped file
# predates the 3xtf32 tensor-core entries (the H200's, tuned 2026-11-22/23), one call (binaries carried:
# scripts/gpu/pack.sh; carry [".carry"]; .carry/db-start.json, if present, starts OUTDIR/db.json). The families that
# computed the H100's faster rows are benched on those rows with their defaults in 3xtf32 and the rows imported as
# entries (`db import-bench`, checked against float64 first): implicit_gemm_wgmma and implicit_gemm_tc on alex1,
# col2im_wgmma on alex1 backward-data (BENCHES: "family:layer[,layer]:direction" items); winograd_tc is tuned on alex3
# and alex5 backward-filter (TUNES: "family:layer[,layer]:direction:budget" items). Then AlexNet in 3xtf32 (the plan's choice, against cuDNN FP32) and in fp32, and the split mode's time
# over FP32's per row (split_tf32_summary.py). Files in OUTDIR: log.txt, db.json, 3xtf32.json, 3xtf32.md,
# fp32_alexnet.json, summary.txt.
#   [BENCHES="..."] [TUNES="..."] scripts/gpu/split_parity_h200.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: split_parity_h200.sh OUTDIR}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=$OUT/db.json
[ -f .carry/db-start.json ] && cp .carry/db-start.json "$OUT/db.json"
LOG=$OUT/log.txt
stamp() { echo "--- $* ($(date +%T))"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "cudnn: $CONVTUNE_CUDNN_LIBRARY; commit $(git rev-parse --short HEAD 2>/dev/null)"
  layer_args() { local l; for l in ${1//,/ }; do printf -- '--layer %s ' "$l"; done; }
  for run in ${BENCHES:-implicit_gemm_wgmma:alex1:all implicit_gemm_tc:alex1:all col2im_wgmma:alex1:bwd-data}; do
    IFS=: read -r family layers dir <<<"$run"
    stamp "bench 3xtf32 $family $layers $dir, imported"
    # shellcheck disable=SC2046
    timeout 120 "$BIN/convtune" bench --suite alexnet $(layer_args "$layers") --direction "$dir" --device cuda:0 \
      --math 3xtf32 --family "$family" --warmup 3 --repeats 20 --out "/tmp/$family.json" >"/tmp/$family.txt" 2>&1
    echo "exit $?"; grep -E "^alex" "/tmp/$family.txt" | cut -c1-200
    "$BIN/convtune" db --db "$OUT/db.json" import-bench "/tmp/$family.json" 2>&1 | tail -1
  done
  for run in ${TUNES:-winograd_tc:alex3,alex5:bwd-filter:60s}; do
    IFS=: read -r family layers dir budget <<<"$run"
    stamp "tune 3xtf32 $family $layers $dir $budget"
    # shellcheck disable=SC2046
    timeout 200 "$BIN/convtune" tune --suite alexnet $(layer_args "$layers") --math 3xtf32 --direction "$dir" \
      --device cuda:0 --family "$family" --budget "$budget" >/tmp/tune.txt 2>&1
    echo "exit $?"; grep -vE "^tune \[" /tmp/tune.txt | tail -8 | cut -c1-230
  done
  stamp "bench 3xtf32 AlexNet (the plan's choice)"
  timeout 150 "$BIN/convtune" bench --suite alexnet --direction all --device cuda:0 --math 3xtf32 --against cudnn \
    --warmup 2 --repeats 10 --out "$OUT/3xtf32.json" --markdown "$OUT/3xtf32.md" >/tmp/plan_3xtf32.txt 2>&1
  echo "exit $?"; grep -vE "^\[" /tmp/plan_3xtf32.txt | cut -c1-250 | tail -22
  stamp "bench fp32 AlexNet"
  timeout 120 "$BIN/convtune" bench --suite alexnet --direction all --device cuda:0 --math fp32 --warmup 2 \
    --repeats 10 --out "$OUT/fp32_alexnet.json" >/tmp/plan_fp32.txt 2>&1
  echo "exit $?"; grep -vE "^\[" /tmp/plan_fp32.txt | cut -c1-250 | tail -20
  stamp summary
  python3 scripts/gpu/split_tf32_summary.py "$OUT" | tee "$OUT/summary.txt"
  stamp done
} >"$LOG" 2>&1
grep -E "^---|exit|imported|stored|3xtf32 vs|not faster|geomean" "$LOG" | cut -c1-240
