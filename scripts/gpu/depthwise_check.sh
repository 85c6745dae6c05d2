#!/usr/bin/env bash
# The depthwise family on the GPU (issue 15): its conformance on the device, then for the depthwise layers of
# untuned_shapes.txt (groups == C: MobileNet-style 3x3 stride 1 and 2 from 112x112 to 7x7, C=32..1024, N=32, one
# 5x5), all directions: the untuned plan (no tuning entry: the plan's own choice, which should be depthwise) beside
# cuDNN, direct_tiled's default (the choice before this family), a short tune of the depthwise family and the
# tuned plan beside cuDNN. Binaries in .carry/bin (scripts/gpu/pack.sh).
#   [DEVICE=cuda:0] [TUNE_SECONDS=60] [STAGES="conformance untuned tune tuned"] scripts/gpu/depthwise_check.sh OUTDIR
# TUNE_SECONDS is per layer (its three directions; 7 layers: 7 minutes at the default). For 10-minute calls:
# STAGES=conformance (1-2 min), then STAGES="untuned tune tuned" TUNE_SECONDS=45 (~9 min; the table needs the
# untuned and tuned benches in one OUTDIR); TUNED_DB_IN=<a carried depthwise-db.json> goes on from an earlier tune. DEVICE=opencl:0 runs the same on PoCL (no cuDNN off CUDA); BATCH_SCALE=0.0625
# (N=2) makes that a quick dry run.
# OUTDIR/summary.txt: per layer and direction the untuned, direct_tiled, tuned and cuDNN ms, tuned/cuDNN.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: depthwise_check.sh OUTDIR}
mkdir -p "$OUT/empty"
BIN=${BIN:-$PWD/.carry/bin}
DEVICE=${DEVICE:-cuda:0}
STAGES=${STAGES:-conformance untuned tune tuned}
TUNE_SECONDS=${TUNE_SECONDS:-60}
BATCH_SCALE=${BATCH_SCALE:-1}
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_SHIPPED_TUNING_DIR=$PWD/tuning
export CONVTUNE_CACHE_DIR=${CONVTUNE_CACHE_DIR:-/tmp/convtune-cache}
source scripts/gpu/nvidia_icd.sh
AGAINST_ARGS=()
if [[ $DEVICE == cuda* ]]; then
  source scripts/gpu/find_cudnn.sh
  export CONVTUNE_CUDNN_LIBRARY=$(find_cudnn)
  AGAINST_ARGS=(--against "${AGAINST:-cudnn}" --math fp32)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/summary.txt"
fi
has() { [[ " $STAGES " == *" $1 "* ]]; }
# The depthwise layers (groups == C) of the untuned shapes, as a suite file.
LAYERS=$OUT/depthwise-layers.txt
sed 's/#.*//' scripts/gpu/untuned_shapes.txt |
  awk 'NF == 2 { c = $2; g = $2; sub(/.*C=/, "", c); sub(/,.*/, "", c); sub(/.*groups=/, "", g); sub(/,.*/, "", g);
                 if (c == g) print $1, $2 }' >"$LAYERS"
echo "depthwise layers: $(cut -d' ' -f1 "$LAYERS" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
bench() {  # LABEL USER_DB [bench options...]: every layer and direction on DEVICE
  local label=$1 db=$2
  shift 2
  CONVTUNE_TUNING_DB=$db timeout 540 "$BIN/convtune" bench --suite "$LAYERS" --device "$DEVICE" --direction all \
    --warmup 2 --repeats 10 --batch-scale "$BATCH_SCALE" --out "$OUT/$label.json" "$@" >"$OUT/$label.log" 2>&1
  echo "bench $label: exit $?" | tee -a "$OUT/summary.txt"
}

if has conformance; then
  CONVTUNE_CONFORMANCE_DEVICES=$DEVICE timeout 540 "$BIN/family_conformance_test" --gtest_filter='*depthwise*' \
    --gtest_brief=1 >"$OUT/conformance.log" 2>&1
  echo "conformance (depthwise on $DEVICE): exit $?" | tee -a "$OUT/summary.txt"
  grep -hE "^conformance:|Failure|FAILED" "$OUT/conformance.log" | head -20 | tee -a "$OUT/summary.txt"
  # The untuned choice, fused bias/ReLU and the fixed-order split sum (on the first OpenCL device where there is one).
  timeout 300 "$BIN/depthwise_test" --gtest_brief=1 >"$OUT/depthwise_test.log" 2>&1
  echo "depthwise_test: exit $?" | tee -a "$OUT/summary.txt"
fi
if has untuned; then
  # No user entries and none shipped for these layers: the plan's own choice with its built-in default.
  bench untuned "$OUT/none.json" "${AGAINST_ARGS[@]}"
  bench direct_tiled "$OUT/none.json" --family direct_tiled
  grep -hoE "(depthwise|direct_tiled|implicit_gemm|im2col_gemm|winograd)\[[^ ]*\] \([a-z -]+\)" "$OUT/untuned.log" |
    sed 's/\[.*\]//' | sort | uniq -c | sed 's/^/untuned plans: /' | tee -a "$OUT/summary.txt"
fi
if has tune; then
  [ -n "${TUNED_DB_IN:-}" ] && cp "$TUNED_DB_IN" "$OUT/depthwise-db.json"
  layers=$(wc -l <"$LAYERS")
  CONVTUNE_SHIPPED_TUNING_DIR=$OUT/empty timeout $((TUNE_SECONDS * layers + 60)) "$BIN/convtune" tune --suite "$LAYERS" --device "$DEVICE" \
    --direction all --family depthwise --budget "$((TUNE_SECONDS * layers))s" --batch-scale "$BATCH_SCALE" \
    --skip-tuned --no-peak \
    --db "$OUT/depthwise-db.json" --log "$OUT/tune-log.json" >"$OUT/tune.log" 2>&1
  echo "tune depthwise ($TUNE_SECONDS s per layer): exit $?" | tee -a "$OUT/summary.txt"
  grep -vE "^tune \[" "$OUT/tune.log" | tail -5 | cut -c1-200
fi
if has tuned; then
  bench tuned "$OUT/depthwise-db.json" "${AGAINST_ARGS[@]}"
  runs=()
  for label in untuned direct_tiled tuned; do [ -f "$OUT/$label.json" ] && runs+=("$label=$OUT/$label.json"); done
  python3 scripts/gpu/variant_table.py "${AGAINST:-cudnn}" "${runs[@]}" | tee -a "$OUT/summary.txt"
fi
