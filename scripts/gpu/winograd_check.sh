#!/usr/bin/env bash
# GPU run for the winograd family (issue 13), binaries carried in .carry/bin (scripts/gpu/pack.sh):
#   1. winograd's conformance on CUDA and NVIDIA OpenCL (family_conformance_test, winograd_test);
#   2. the stride1 suite (every 3x3/5x5 stride-1 layer) with winograd's built-in defaults beside cuDNN FP32;
#   3. `tune --suite stride1 --family winograd --direction all` for TUNE_BUDGET (default 3m);
#   4. the suite again with the plan's choice (tuned database = shipped + step 3) beside cuDNN FP32.
#   scripts/gpu/winograd_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: winograd_check.sh OUTDIR}
mkdir -p "$OUT"
BIN=$PWD/.carry/bin
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_SHIPPED_TUNING_DIR=$PWD/tuning
export CONVTUNE_CACHE_DIR=/tmp/convtune-cache CONVTUNE_TUNING_DB=$OUT/winograd-db.json
source scripts/gpu/nvidia_icd.sh
source scripts/gpu/find_cudnn.sh
CUDNN=$(find_cudnn)
export CONVTUNE_CUDNN_LIBRARY=$CUDNN
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
echo "cudnn: $CUDNN" | tee -a "$OUT/gpu.txt"

{
  timeout 150 "$BIN/family_conformance_test" --gtest_filter='*winograd*' 2>&1 | grep -E "conformance:|OK|FAILED|Failure|rel L2" | head -40
  timeout 120 "$BIN/winograd_test" 2>&1 | grep -E "OK|FAILED|Failure|held to" | head -80
} >"$OUT/conformance.txt" 2>&1
grep -cE "^\[       OK" "$OUT/conformance.txt"; grep -E "FAILED|Failure" "$OUT/conformance.txt" | head

bench() {  # NAME FAMILY: the suite beside cuDNN FP32
  timeout "${3:-200}" "$BIN/convtune" bench --suite stride1 --device cuda:0 --direction all --family "$2" --warmup 2 --repeats 10 \
    --against cudnn --math fp32 --out "$OUT/$1.json" >"$OUT/$1.txt" 2>&1
  echo "bench $1: exit $?"
}
bench default winograd 170
timeout 250 "$BIN/convtune" tune --suite stride1 --family winograd --direction all --device cuda:0 \
  --budget "${TUNE_BUDGET:-3m}" --db "$CONVTUNE_TUNING_DB" >"$OUT/tune.txt" 2>&1
echo "tune: exit $?"; grep -vE "^tune \[" "$OUT/tune.txt" | tail -5 | cut -c1-200
bench tuned auto 200
