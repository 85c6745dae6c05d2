#!/usr/bin/env bash
# Issue 14's remaining measurements in one GPU call (binaries and data carried: DATA=1 scripts/gpu/pack.sh; carry
# [".carry/bin", ".carry/data"]):
#   gemm   the GEMM plans' own choice (shipped tuning, an empty user database) against cuBLAS in the same mode, on
#          square GEMMs and LeNet's dense layers with their gradients, in each of GEMM_MATHS (default "tf32 3xtf32
#          bf16 fp16"; cuBLAS runs FP32 SGEMM beside 3xtf32); every row checked against float64 by the bench;
#   train  `train cnn` for EPOCHS (default 6) in each of TRAIN_MATHS (default "fp32 tf32 bf16 fp16"), then the same
#          network in PyTorch (scripts/gpu/cnn_torch.py) in fp32, tf32 and bf16 autocast; `train mlp` in each mode
#          (its default 4,000 images a epoch, 5 epochs).
# STAGES picks (default "gemm train"). Files in OUTDIR: log.txt and results.tar.gz (gemm_<math>.md/.json and every
# log; the device tool returns at most 8 files).
#   [STAGES=gemm] scripts/gpu/modes_gemm_train.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: modes_gemm_train.sh OUTDIR}
WORK=/tmp/modes-work
rm -rf "$WORK" && mkdir -p "$OUT" "$WORK"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=$WORK/db.json
STAGES=${STAGES:-gemm train}
has() { [[ " $STAGES " == *" $1 "* ]]; }
stamp() { echo "--- $* ($(date +%T))"; }
source scripts/gpu/gemm_shapes.sh  # GEMMS
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "cudnn: $CONVTUNE_CUDNN_LIBRARY; commit $(git rev-parse --short HEAD 2>/dev/null)"
  if has gemm; then
    for math in ${GEMM_MATHS:-tf32 3xtf32 bf16 fp16}; do
      stamp "gemm $math against cuBLAS"
      timeout 120 "$BIN/convtune" bench "${GEMMS[@]}" --device cuda:0 --math "$math" --against cublas --warmup 3 \
        --repeats 20 --out "$WORK/gemm_$math.json" --markdown "$WORK/gemm_$math.md" >"$WORK/gemm_$math.txt" 2>&1
      echo "exit $?"; grep -vE "^\[" "$WORK/gemm_$math.txt" | cut -c1-260 | tail -14
    done
  fi
  if has train; then
    DATA=$PWD/.carry/data
    for math in ${TRAIN_MATHS:-fp32 tf32 bf16 fp16}; do
      stamp "train cnn --math $math, ${EPOCHS:-6} epochs"
      timeout 150 "$BIN/convtune" train cnn --device cuda:0 --data "$DATA" --epochs "${EPOCHS:-6}" --math "$math" \
        --model "$WORK/cnn_$math.model" >"$WORK/train_cnn_$math.log" 2>&1
      echo "exit $?"; grep -vE "^\[" "$WORK/train_cnn_$math.log" | tail -9
    done
    for math in fp32 tf32 bf16; do
      stamp "PyTorch cnn_torch.py --math $math, ${EPOCHS:-6} epochs"
      timeout 200 python3 scripts/gpu/cnn_torch.py "$DATA" --epochs "${EPOCHS:-6}" --math "$math" \
        >"$WORK/torch_cnn_$math.log" 2>&1
      echo "exit $?"; tail -9 "$WORK/torch_cnn_$math.log"
    done
    for math in ${TRAIN_MATHS:-fp32 tf32 bf16 fp16}; do
      stamp "train mlp --math $math"
      timeout 100 "$BIN/convtune" train mlp --device cuda:0 --data "$DATA" --math "$math" \
        >"$WORK/train_mlp_$math.log" 2>&1
      echo "exit $?"; grep -vE "^\[" "$WORK/train_mlp_$math.log" | tail -3
    done
  fi
  stamp done
} >"$OUT/log.txt" 2>&1
tar -C "$WORK" -czf "$OUT/results.tar.gz" --exclude '*.model' .
grep -E "^---|exit|geomean|accuracy" "$OUT/log.txt" | cut -c1-240
