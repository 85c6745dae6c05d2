#!/usr/bin/env bash
# Issue 13's bar in one call: optional tunes of the stride1 suite in FP32 (TUNES: ';'-separated argument lists, each
# appended to `convtune tune --suite stride1 --device cuda:0 --math fp32`, with TUNE_TIMEOUT seconds each, default
# 330), into OUTDIR/db.json on top of the shipped tuning; then `bench --against cudnn --math fp32` over BENCH_LAYERS
# (default: the issue's layers, AlexNet's alex2-alex5, the seeds and scripts/gpu/unseen_shapes.txt's u2-u9) in every
# direction with that database; then scripts/gpu/stride1_summary.py (geomean of convtune/cuDNN, rows above 1.5x,
# every row's error against float64); with TF32=1 also issue 14's tf32 table (AlexNet, the seeds and the unseen
# layers against cuDNN tf32, scripts/gpu/split_tf32_summary.py). Binaries in .carry/bin (scripts/gpu/pack.sh; carry [".carry"]).
#   TUNES="--layer alex2 --direction all --family fft --budget 4m" scripts/gpu/stride1_issue_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: stride1_issue_check.sh OUTDIR}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=$OUT/db.json
stamp() { echo "--- $* ($(date +%T))"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "cudnn: $CONVTUNE_CUDNN_LIBRARY; commit $(git rev-parse --short HEAD 2>/dev/null)"
  step=0
  IFS=';' read -ra tunes <<<"${TUNES:-}"
  for args in "${tunes[@]}"; do
    [ -z "${args// /}" ] && continue
    step=$((step + 1))
    stamp "tune $step: $args"
    # shellcheck disable=SC2086
    timeout "${TUNE_TIMEOUT:-330}" "$BIN/convtune" tune --suite stride1 --device cuda:0 --math fp32 $args \
      >"$OUT/tune$step.txt" 2>&1
    echo "tune $step: exit $?"
    grep -vE "^tune \[" "$OUT/tune$step.txt" | tail -30 | cut -c1-260
  done
  layers=()
  for l in ${BENCH_LAYERS:-alex2 alex3 alex4 alex5 ucla5x5 fmnist1 fmnist2 u2 u3 u4 u5 u6 u8 u9}; do
    layers+=(--layer "$l")
  done
  stamp "bench fp32"
  timeout "${BENCH_TIMEOUT:-300}" "$BIN/convtune" bench --suite stride1 "${layers[@]}" --direction all --device cuda:0 \
    --math fp32 --against cudnn --warmup 2 --repeats 10 --out "$OUT/fp32.json" --markdown "$OUT/fp32.md" \
    >"$OUT/bench.txt" 2>&1
  echo "bench: exit $?"
  if [ "${TF32:-0}" = 1 ]; then
    # Issue 14's tf32 table in the same call: AlexNet, the seeds and the unseen layers against cuDNN tf32.
    stamp "bench tf32"
    cat bench/suites/alexnet.txt bench/suites/seeds.txt scripts/gpu/unseen_shapes.txt >/tmp/all-layers.txt
    timeout 300 "$BIN/convtune" bench --suite /tmp/all-layers.txt --direction all --device cuda:0 --math tf32 \
      --against cudnn --warmup 2 --repeats 10 --out "$OUT/tf32.json" --markdown "$OUT/tf32.md" >"$OUT/bench-tf32.txt" 2>&1
    echo "bench tf32: exit $?"
  fi
  stamp summary
  {
    python3 scripts/gpu/stride1_summary.py "$OUT/fp32.json"
    [ -f "$OUT/tf32.json" ] && python3 scripts/gpu/split_tf32_summary.py "$OUT"
  } | tee "$OUT/summary.txt"
  stamp done
} 2>&1 | tee "$OUT/log.txt"
