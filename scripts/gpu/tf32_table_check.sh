#!/usr/bin/env bash
# Issue 14's tf32 work in one GPU call (binaries carried: scripts/gpu/pack.sh with DATA=1; carry
# [".carry/bin", ".carry/data"]), each step under its own timeout, one failing step not stopping the others:
#   train    `train cnn --math tf32` for EPOCHS (default 6) epochs on Fashion-MNIST (.carry/data), then `eval`:
#            the issue's training bar (test accuracy at least 0.91) in tf32 (train.log, eval.log);
#   family   FAMILY's default configuration (default implicit_gemm_nhwc_wgmma) in tf32 against cuDNN tf32 on
#            AlexNet + the seeds + scripts/gpu/unseen_shapes.txt in DIRS (default "fwd bwd-data"), every row
#            checked against float64 (tf32_<dir>.json/.md), imported with `db import-bench` into a copy of the
#            shipped H100 file (OUT/tuning/), which the benches below use;
#   plan     the plans' own choice in tf32 against cuDNN tf32 on the same layers, every direction (tf32_plan);
#   general  the same on scripts/gpu/general_shapes.txt, layers never tuned (general_tf32).
#   [STEPS="train family plan general"] scripts/gpu/tf32_table_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: tf32_table_check.sh OUTDIR}
STEPS=${STEPS:-train family plan general}
FAMILY=${FAMILY:-implicit_gemm_nhwc_wgmma}
DIRS=${DIRS:-fwd bwd-data}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=$OUT/db.json  # empty: the shipped file (and, after `family`, its rows) alone
has() { [[ " $STEPS " == *" $1 "* ]]; }
stamp() { echo "--- $* ($(date +%T))"; }
ALL=/tmp/all-layers.txt
cat bench/suites/alexnet.txt bench/suites/seeds.txt scripts/gpu/unseen_shapes.txt >"$ALL"
bench_rows() {  # name, seconds, then bench's arguments
  local name=$1 seconds=$2
  shift 2
  stamp "bench $name"
  timeout "$seconds" "$BIN/convtune" bench --device cuda:0 --warmup 2 --repeats 10 --math tf32 --against cudnn \
    --out "$OUT/$name.json" --markdown "$OUT/$name.md" "$@" >"/tmp/bench-$name.txt" 2>&1
  echo "exit $?"
  grep -vE "^\[" "/tmp/bench-$name.txt" | cut -c1-300 | tail -12
}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "cudnn: $CONVTUNE_CUDNN_LIBRARY"
  if has train; then
    stamp "train cnn --math tf32"
    timeout 200 "$BIN/convtune" train cnn --device cuda:0 --data .carry/data --epochs "${EPOCHS:-6}" --math tf32 \
      --model "$OUT/lenet-tf32.model" >"$OUT/train.log" 2>&1
    echo "train: exit $?"; grep -vE "^train \[" "$OUT/train.log" | tail -12
    timeout 60 "$BIN/convtune" eval "$OUT/lenet-tf32.model" --device cuda:0 --data .carry/data --math tf32 \
      >"$OUT/eval.log" 2>&1
    echo "eval: exit $?"; grep -vE "^eval \[" "$OUT/eval.log" | tail -4
  fi
  if has family; then
    for dir in $DIRS; do
      bench_rows "tf32_$dir" 90 --suite "$ALL" --direction "$dir" --family "$FAMILY"
    done
    stamp "import into $OUT/tuning/nvidia-h100-cuda.json"
    mkdir -p "$OUT/tuning" && cp "$CONVTUNE_SHIPPED_TUNING_DIR"/*.json "$OUT/tuning/"
    empty=$(mktemp -d)  # no shipped defaults beside the file being written
    for dir in $DIRS; do
      CONVTUNE_SHIPPED_TUNING_DIR=$empty "$BIN/convtune" db --db "$OUT/tuning/nvidia-h100-cuda.json" \
        import-bench "$OUT/tf32_$dir.json" 2>&1 | tail -1
    done
    export CONVTUNE_SHIPPED_TUNING_DIR=$OUT/tuning
  fi
  has plan && bench_rows tf32_plan 210 --suite "$ALL" --direction all
  has general && bench_rows general_tf32 200 --suite scripts/gpu/general_shapes.txt --direction all
  stamp done
} >"$OUT/log.txt" 2>&1
grep -E "^---|exit|geomean|accuracy|epoch" "$OUT/log.txt" | tail -40
