#!/usr/bin/env bash
# Retunes the winograd family on the stride1 suite (every 3x3/5x5 stride-1 layer of the suites, all directions) into
# OUTDIR/wino-db.json, then benches the suite with the plan's own choice (shipped entries plus these) beside cuDNN
# FP32 into OUTDIR/stride1.json and prints convtune/cuDNN per row and in the geometric mean. Needed whenever
# winograd's kernel source changes (the shipped entries then go stale). Binaries in .carry/bin (scripts/gpu/pack.sh).
#   [TUNE_BUDGET=5m] scripts/gpu/winograd_retune.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: winograd_retune.sh OUTDIR}
mkdir -p "$OUT"
BIN=$PWD/.carry/bin
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_SHIPPED_TUNING_DIR=$PWD/tuning
export CONVTUNE_CACHE_DIR=/tmp/convtune-cache CONVTUNE_TUNING_DB=$OUT/wino-db.json
source scripts/gpu/nvidia_icd.sh
source scripts/gpu/find_cudnn.sh
export CONVTUNE_CUDNN_LIBRARY=$(find_cudnn)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.txt"
timeout 420 "$BIN/convtune" tune --suite stride1 --direction all --family winograd --device cuda:0 \
  --budget "${TUNE_BUDGET:-5m}" --no-peak >"$OUT/tune.log" 2>&1
echo "tune winograd: exit $?" | tee -a "$OUT/summary.txt"
timeout 240 "$BIN/convtune" bench --suite stride1 --direction all --device cuda:0 --warmup 2 --repeats 10 \
  --against cudnn --math fp32 --out "$OUT/stride1.json" >"$OUT/bench.log" 2>&1
echo "bench stride1 (plan's choice) beside cuDNN FP32: exit $?" | tee -a "$OUT/summary.txt"
python3 scripts/gpu/variant_table.py cudnn "tuned=$OUT/stride1.json" | tee -a "$OUT/summary.txt"
