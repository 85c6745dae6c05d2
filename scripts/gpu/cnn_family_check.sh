#!/usr/bin/env bash
# GPU check of issue 13's training criterion: the LeNet CNN trained on Fashion-MNIST with winograd's convolutions
# and with implicit_gemm's (same seed and data, 3 epochs, cuda:0), accuracies and epoch times side by side;
# FAMILIES="fft implicit_gemm" compares another family.
# Binaries in .carry/bin (scripts/gpu/pack.sh), data in .carry/py/data (scripts/gpu/pack_python.sh).
#   scripts/gpu/cnn_family_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: cnn_family_check.sh OUTDIR}
mkdir -p "$OUT"
BIN=$PWD/.carry/bin
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVTUNE_SHIPPED_TUNING_DIR=$PWD/tuning CONVTUNE_CACHE_DIR=/tmp/convtune-cache CONVTUNE_DATA=$PWD/.carry/py/data
for family in ${FAMILIES:-winograd implicit_gemm}; do
  timeout 200 "$BIN/convtune" train cnn --device cuda:0 --family "$family" --epochs 3 --out "/tmp/$family.model" \
    >"$OUT/train-$family.txt" 2>&1
  echo "$family: exit $?"
  grep -E "^epoch|saved" "$OUT/train-$family.txt"
done
