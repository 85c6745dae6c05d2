#!/usr/bin/env bash
# Issue 14's tf32 table with the fft family in it: a tf32 problem may run FP32 families (FP32 serves every mode), but
# only tf32-keyed entries serve tf32 rows, and those predate fft. So: a short `tune --math tf32 --family fft` of the
# 5x5 layers (FFT_LAYERS) into OUTDIR/db.json, then AlexNet + the seeds + scripts/gpu/unseen_shapes.txt, every
# direction, `--math tf32` beside cuDNN tf32 with it (the plan's choice). With OPENCL=1 also the stride1 suite through
# NVIDIA's OpenCL (opencl:1), the shipped CUDA entries served through the lookup's same-chip tier. Binaries in
# .carry/bin (scripts/gpu/pack.sh).
#   scripts/gpu/tf32_fft_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: tf32_fft_check.sh OUTDIR}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=$OUT/db.json
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
cat bench/suites/alexnet.txt bench/suites/seeds.txt scripts/gpu/unseen_shapes.txt >"$OUT/all.txt"
layer_args=()
for l in ${FFT_LAYERS:-alex2 u2 u8 fmnist2 ucla5x5}; do layer_args+=(--layer "$l"); done
timeout 200 "$BIN/convtune" tune --suite "$OUT/all.txt" "${layer_args[@]}" --math tf32 --family fft --direction all \
  --device cuda:0 --budget "${TUNE_BUDGET:-150s}" >"$OUT/tune.txt" 2>&1
echo "tune: exit $? ($(date +%T))"
grep -vE "^tune \[" "$OUT/tune.txt" | tail -18 | cut -c1-160
timeout 330 "$BIN/convtune" bench --suite "$OUT/all.txt" --direction all --family auto --device cuda:0 --math tf32 \
  --against cudnn --warmup 2 --repeats 10 --out "$OUT/tf32.json" >"$OUT/tf32.txt" 2>&1
echo "bench tf32: exit $? ($(date +%T))"
if [ "${OPENCL:-1}" = 1 ]; then
  CONVTUNE_TUNING_DB=/tmp/empty-db.json timeout 200 "$BIN/convtune" bench --suite stride1 --direction all \
    --family auto --device opencl:1 --warmup 2 --repeats 10 --out "$OUT/stride1-opencl.json" \
    >"$OUT/stride1-opencl.txt" 2>&1
  echo "bench opencl: exit $? ($(date +%T))"
fi
