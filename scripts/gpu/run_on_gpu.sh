#!/usr/bin/env bash
# Runs on the lent GPU machine with binaries built here and carried in .carry/bin (scripts/gpu/pack.sh):
# devices, the GPU tests of both backends, peak on CUDA and NVIDIA OpenCL, PyTorch's reference figures.
# Everything goes to $OUT/log.txt (plus peak JSON files); the last lines are a summary.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.carry/bin}
OUT=${OUT:-/tmp/convtune-out}
mkdir -p "$OUT"
LOG=$OUT/log.txt
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_CACHE_DIR=/tmp/convtune-cache
# NVIDIA's OpenCL driver is installed but may not be registered with the ICD loader.
if [ -z "$(ls /etc/OpenCL/vendors 2>/dev/null)" ] && [ -z "${OCL_ICD_VENDORS:-}" ]; then
  mkdir -p /tmp/icd && echo libnvidia-opencl.so.1 >/tmp/icd/nvidia.icd && export OCL_ICD_VENDORS=/tmp/icd
fi
step() { echo; echo "=== $*"; echo "\$ $*"; "$@"; echo "(exit $?)"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
  step $BIN/convtune devices
  OCL=$($BIN/convtune devices 2>/dev/null | grep -oE "opencl:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
  echo "NVIDIA OpenCL device: ${OCL:-none}"
  step $BIN/cuda_backend_test --gtest_brief=1
  [ -n "$OCL" ] && CONVTUNE_OPENCL_TEST_DEVICE=${OCL#opencl:} step $BIN/opencl_backend_test --gtest_brief=1
  step $BIN/convtune peak --device cuda --out "$OUT/peak-cuda.json"
  step $BIN/convtune peak --device cuda --skip-fill   # a second process: the program cache compiles nothing
  [ -n "$OCL" ] && step $BIN/convtune peak --device "$OCL" --out "$OUT/peak-opencl.json"
  step python3 scripts/gpu/torch_reference.py
} >"$LOG" 2>&1
echo "=== summary"
grep -E "^(=== |\(exit|torch:|  copy|  fill|  FP32|  launch|programs:|\[  (PASSED|FAILED|SKIPPED))|NVIDIA OpenCL device" "$LOG"
