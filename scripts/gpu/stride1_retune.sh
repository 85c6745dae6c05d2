#!/usr/bin/env bash
# A longer tune of the stride1 suite's slowest 3x3 rows against cuDNN (issue 13), on top of the shipped tuning, into
# OUTDIR/db.json (merge it into tuning/nvidia-h200-cuda.json with `convtune db merge`, which keeps the faster entry per
# key): backward-filter of BWF_LAYERS with every family (fft won some 3x3 backward-filter rows), then forward and
# backward-data of FWD_LAYERS with winograd. Budgets BWF_BUDGET and FWD_BUDGET (each direction). Binaries in
# .carry/bin (scripts/gpu/pack.sh).
#   scripts/gpu/stride1_retune.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: stride1_retune.sh OUTDIR}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=$OUT/db.json
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
layers() { for l in $1; do printf -- '--layer %s ' "$l"; done; }
tune() {  # LABEL SECONDS ARGS...
  local label=$1 seconds=$2
  shift 2
  timeout "$seconds" "$BIN/convtune" tune --suite stride1 --device cuda:0 "$@" >"$OUT/$label.txt" 2>&1
  echo "tune $label: exit $? ($(date +%T))"
  grep -vE "^tune \[" "$OUT/$label.txt" | tail -4 | cut -c1-200
}
# shellcheck disable=SC2046
tune bwd-filter 300 $(layers "${BWF_LAYERS:-alex4 u4 u5 u6 u9 vgg3_2 vgg4_2 vgg5_2 res5}") --direction bwd-filter \
  --family all --budget "${BWF_BUDGET:-4m}"
for d in fwd bwd-data; do
  # shellcheck disable=SC2046
  tune "$d" 130 $(layers "${FWD_LAYERS:-u6 vgg3_2 vgg4_2 vgg5_2 alex5}") --direction "$d" --family winograd \
    --budget "${FWD_BUDGET:-100s}"
done
