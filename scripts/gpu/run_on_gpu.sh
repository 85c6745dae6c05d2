#!/usr/bin/env bash
# Runs on the lent GPU machine with binaries built on the CPU machine and carried in .carry/bin
# (scripts/gpu/pack.sh). Stages (STAGES, default all): devices, tests (GPU tests of both backends), peak,
# conformance (every kernel family through CUDA and NVIDIA OpenCL), bench (alexnet + seeds, every family and
# direction, both backends; BENCH_DEVICES="cuda:0" or "opencl" limits it), sweep (implicit GEMM forward sweep). Logs go to $OUT; the end of
# stdout is a summary.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.carry/bin}
OUT=${OUT:-/tmp/convtune-out}
STAGES=${STAGES:-devices tests peak conformance bench sweep}
mkdir -p "$OUT"
LOG=$OUT/log.txt
: >"$LOG"
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_CACHE_DIR=/tmp/convtune-cache
source scripts/gpu/nvidia_icd.sh  # after the cd to the repository root
has() { [[ " $STAGES " == *" $1 "* ]]; }
step() { echo; echo "=== $*"; echo "\$ $*"; "$@"; echo "(exit $?)"; }
OCL=$($BIN/convtune devices 2>/dev/null | grep -oE "opencl:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
  echo "NVIDIA OpenCL device: ${OCL:-none}"
  if has devices; then step $BIN/convtune devices; fi
  if has tests; then
    step $BIN/cuda_backend_test --gtest_brief=1
    [ -n "$OCL" ] && CONVTUNE_OPENCL_TEST_DEVICE=${OCL#opencl:} step $BIN/opencl_backend_test --gtest_brief=1
  fi
  if has peak; then
    step $BIN/convtune peak --device cuda --out "$OUT/peak-cuda.json"
    step $BIN/convtune peak --device cuda --skip-fill   # a second process: the program cache compiles nothing
    [ -n "$OCL" ] && step $BIN/convtune peak --device "$OCL" --out "$OUT/peak-opencl.json"
    step python3 scripts/gpu/torch_reference.py
  fi
} >>"$LOG" 2>&1

if has conformance; then
  # One process per family and device, in parallel: compiling dominates and the host has 16 cores.
  pids=()
  for dev in cuda:0 $OCL; do
    for fam in implicit_gemm direct_tiled im2col_gemm; do
      CONVTUNE_CONFORMANCE_DEVICES=$dev $BIN/family_conformance_test --gtest_filter="*${fam}*" --gtest_brief=1 \
        >"$OUT/conf-${dev%%:*}-$fam.log" 2>&1 &
      pids+=($!)
    done
  done
  for p in "${pids[@]}"; do wait "$p"; done
  { echo; echo "=== conformance (CUDA and NVIDIA OpenCL)"; grep -hE "^conformance:|FAILED|PASSED|Failure" "$OUT"/conf-*.log; } >>"$LOG"
  cat "$OUT"/conf-*.log >"$OUT/conformance.txt"; rm -f "$OUT"/conf-*.log
fi
if has bench; then
  {
    for dev in ${BENCH_DEVICES:-cuda:0 $OCL}; do
      [ "$dev" = opencl ] && dev=$OCL
      for suite in alexnet seeds; do
        step $BIN/convtune bench --suite $suite --backend "$dev" --family all --direction all --repeats 10 \
          --out "$OUT/bench-${dev%%:*}-$suite.json"
      done
    done
  } >>"$LOG" 2>&1
fi
if has sweep && [ -x "$BIN/implicit_gemm_sweep" ]; then
  { echo; echo "=== implicit GEMM forward sweep"; $BIN/implicit_gemm_sweep cuda:0 ${OCL}; echo "(exit $?)"; } >>"$LOG" 2>&1
fi
echo "=== summary"
grep -E "^(=== |\(exit|torch:|  copy|  fill|  FP32|programs:|conformance:|\[  (PASSED|FAILED))|FAILED|Failure|NVIDIA OpenCL device" "$LOG" | head -150
