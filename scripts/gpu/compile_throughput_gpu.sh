#!/usr/bin/env bash
# Compile throughput on the GPU machine (issue 15): tuner candidates per second, cold and warm, through CUDA (NVRTC)
# and through the machine's PoCL, with 1, 8 and 15 compile-ahead jobs; PoCL also with
# CONVTUNE_OPENCL_SHARED_COMPILE_CONTEXT=1 (every compile in the device's one context and a cached binary per
# candidate, as before the change) for the before/after. Binaries in .carry/bin (scripts/gpu/pack.sh).
#   OUT=dir scripts/gpu/compile_throughput_gpu.sh      (about 6 minutes; OUT/summary.txt holds the lines)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/convtune-out}
BIN=${BIN:-.carry/bin}
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} CONVTUNE=$BIN/convtune CANDIDATES=${CANDIDATES:-24}
source scripts/gpu/nvidia_icd.sh
POCL=$($BIN/convtune devices 2>/dev/null | grep -oE "opencl:[0-9]+ +pthread" | head -1 | cut -d' ' -f1)
nproc | sed 's/^/cores: /' | tee -a "$OUT/summary.txt"
timeout 200 scripts/compile_throughput.sh cuda:0 "$OUT/cuda" 1 8 15 | tee -a "$OUT/summary.txt"
if [ -n "$POCL" ]; then
  CANDIDATES=12 timeout 250 scripts/compile_throughput.sh "$POCL" "$OUT/pocl-after" 1 15 | tee -a "$OUT/summary.txt"
  CONVTUNE_OPENCL_SHARED_COMPILE_CONTEXT=1 CANDIDATES=12 timeout 250 \
    scripts/compile_throughput.sh "$POCL" "$OUT/pocl-before" 1 15 | sed 's/^/before: /' | tee -a "$OUT/summary.txt"
else
  echo "no PoCL device listed" | tee -a "$OUT/summary.txt"
fi
