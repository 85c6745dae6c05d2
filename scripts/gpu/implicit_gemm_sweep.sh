#!/usr/bin/env bash
# Runs on the lent GPU machine: implicit_gemm on AlexNet 2-5 (N=128) and ucla5x5 through CUDA and NVIDIA's
# OpenCL. Mode "sweep" (the first run): a few dozen large-tile forward configurations per layer. Mode
# "candidates" (default): the family's default against scripts/gpu/implicit_gemm_candidates.txt in all three
# directions. Then the conformance cases on each GPU device. Every configuration is checked against the float64
# reference at sampled elements before it is timed. Binaries come built elsewhere, in $BIN (default .carry-ig:
# implicit_gemm_sweep and convtune); logs and one CSV go to $OUT. Each stage has a time limit so the whole run
# fits the lease.
#   scripts/gpu/implicit_gemm_sweep.sh [sweep|candidates]
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:-candidates}
BIN=${BIN:-.carry-ig}
OUT=${OUT:-/tmp/implicit-gemm-out}
mkdir -p "$OUT"
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_CACHE_DIR=${CONVTUNE_CACHE_DIR:-/tmp/convtune-cache}
source scripts/gpu/nvidia_icd.sh  # after the cd to the repository root
FWD_S=${FWD_S:-60}        # per device: forward measurements
BWD_S=${BWD_S:-50}        # per device: backward-data and backward-filter
CONFORM_S=${CONFORM_S:-75}  # per device: conformance cases
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
OCL=$($BIN/convtune devices 2>/dev/null | grep -oE "opencl:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
echo "NVIDIA OpenCL device: ${OCL:-none}"
DEVICES="cuda:0 ${OCL}"
if [ "$MODE" = sweep ]; then
  FWD_ARGS="--sweep"
  BWD_ARGS=""
else
  FWD_ARGS="--config-file scripts/gpu/implicit_gemm_candidates.txt"
  BWD_ARGS="--config-file scripts/gpu/implicit_gemm_candidates.txt"
fi
for dev in $DEVICES; do
  timeout $((FWD_S + 20)) $BIN/implicit_gemm_sweep --device "$dev" $FWD_ARGS --budget "$FWD_S" --csv "$OUT/all.csv" \
    >"$OUT/fwd-${dev/:/}.log" 2>&1
  echo "forward on $dev: exit $?"
done
for dev in $DEVICES; do
  timeout $((BWD_S + 15)) $BIN/implicit_gemm_sweep --device "$dev" --direction bwd-data --direction bwd-filter \
    $BWD_ARGS --budget "$BWD_S" --csv "$OUT/all.csv" >"$OUT/bwd-${dev/:/}.log" 2>&1
  echo "backward on $dev: exit $?"
done
for dev in $DEVICES; do
  timeout "$CONFORM_S" $BIN/implicit_gemm_sweep --device "$dev" --layer none --conformance \
    >"$OUT/conformance-${dev/:/}.log" 2>&1
  echo "conformance on $dev: exit $?"
done
for f in "$OUT"/fwd-*.log "$OUT"/bwd-*.log; do echo "== $f"; sed -n '/== best per layer/,$p' "$f"; done
grep -h "compile failed\|WRONG\|error:" "$OUT"/*.log | cut -c1-300 | sort | uniq -c | sort -rn | head -20
grep -h "^conformance on\|CONFORMANCE" "$OUT"/conformance-*.log | head -20
