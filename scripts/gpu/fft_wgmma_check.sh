#!/usr/bin/env bash
# fft_wgmma (the FFT's per-bin GEMMs on Hopper's wgmma, tf32 and 3xtf32) on the GPU machine, one call (binaries
# carried: scripts/gpu/pack.sh; carry [".carry"]). Stages (STAGES, default "conformance layer"), each with a timeout:
#   conformance  family_conformance_test for fft_wgmma in tf32 and 3xtf32 on cuda:0, every standard case, one process
#                per direction, to each mode's tolerance;
#   layer        LAYER (default alex2) of AlexNet, every direction: fft_wgmma's and fft_tc's defaults in 3xtf32 and
#                tf32, and the FP32 plan (fft), in one process each, against cuDNN (tables in log.txt);
#   tune         `tune --family fft_wgmma` of LAYER in each of TUNE_MATHS (default "3xtf32 tf32") with TUNE_BUDGET
#                (default 60s), into OUTDIR/db.json over the shipped file;
#   plan         AlexNet in 3xtf32 (the plan's choice, reading OUTDIR/db.json) against cuDNN FP32, and in fp32, then
#                the split mode's time over FP32's per row (split_tf32_summary.py).
# Files in OUTDIR (few: the device tool returns at most 8): log.txt (everything, the layer benches' tables among
# it), db.json, 3xtf32.json, 3xtf32.md, fp32_alexnet.json, summary.txt.
#   [STAGES="conformance layer tune plan"] [LAYER=alex2] [TUNE_BUDGET=60s] scripts/gpu/fft_wgmma_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: fft_wgmma_check.sh OUTDIR}
STAGES=${STAGES:-conformance layer}
LAYER=${LAYER:-alex2}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=$OUT/db.json
LOG=$OUT/log.txt
has() { [[ " $STAGES " == *" $1 "* ]]; }
stamp() { echo "--- $* ($(date +%T))"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "cudnn: $CONVTUNE_CUDNN_LIBRARY; commit $(git rev-parse --short HEAD 2>/dev/null)"

  if has conformance; then
    stamp conformance
    pids=()
    for dir in fwd bwd_data bwd_filter; do
      CONVTUNE_CONFORMANCE_DEVICES=cuda:0 CONVTUNE_CONFORMANCE_PRECISIONS=tf32,3xtf32 timeout 240 \
        "$BIN/family_conformance_test" --gtest_brief=1 \
        --gtest_filter="AllFamilies/FamilyConformance.SampledConfigurationsMatchTheReference/fft_wgmma_$dir" \
        >"/tmp/conformance_$dir.txt" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; echo "conformance: exit $?"; done
    for f in /tmp/conformance_*.txt; do
      echo "== $f"; grep -E "^conformance:|checks so far|Failure|rel L2|threw|FAILED|PASSED|OK \]|Skipped" "$f" | head -14 | cut -c1-400
    done
  fi

  if has layer; then
    for run in "fft_wgmma 3xtf32" "fft_tc 3xtf32" "fft_wgmma tf32" "fft_tc tf32" "plan fp32" "plan 3xtf32"; do
      set -- $run
      family_args=()
      [ "$1" != plan ] && family_args=(--family "$1")
      stamp "bench $LAYER $1 $2"
      timeout 120 "$BIN/convtune" bench --suite alexnet --layer "$LAYER" --direction all --device cuda:0 --math "$2" \
        "${family_args[@]}" --against cudnn --warmup 3 --repeats 20 --out "/tmp/layer_$1_$2.json" >"/tmp/layer_$1_$2.txt" 2>&1
      echo "exit $?"; grep -vE "^\[" "/tmp/layer_$1_$2.txt" | cut -c1-220 | tail -8
    done
  fi

  if has tune; then
    for math in ${TUNE_MATHS:-3xtf32 tf32}; do
      stamp "tune fft_wgmma $LAYER $math ${TUNE_BUDGET:-60s}"
      timeout 200 "$BIN/convtune" tune --suite alexnet --layer "$LAYER" --math "$math" --direction all --device cuda:0 \
        --family fft_wgmma --budget "${TUNE_BUDGET:-60s}" >"/tmp/tune_$math.txt" 2>&1
      echo "exit $?"; grep -vE "^tune \[" "/tmp/tune_$math.txt" | tail -30 | cut -c1-230
    done
  fi

  if has plan; then
    stamp "bench 3xtf32 AlexNet (the plan's choice)"
    timeout 150 "$BIN/convtune" bench --suite alexnet --direction all --device cuda:0 --math 3xtf32 --against cudnn \
      --warmup 2 --repeats 10 --out "$OUT/3xtf32.json" --markdown "$OUT/3xtf32.md" >/tmp/plan_3xtf32.txt 2>&1
    echo "exit $?"; grep -vE "^\[" /tmp/plan_3xtf32.txt | cut -c1-250 | tail -20
    stamp "bench fp32 AlexNet"
    timeout 120 "$BIN/convtune" bench --suite alexnet --direction all --device cuda:0 --math fp32 --warmup 2 \
      --repeats 10 --out "$OUT/fp32_alexnet.json" >/tmp/plan_fp32.txt 2>&1
    echo "exit $?"; grep -vE "^\[" /tmp/plan_fp32.txt | cut -c1-250 | tail -20
    stamp summary
    python3 scripts/gpu/split_tf32_summary.py "$OUT" | tee "$OUT/summary.txt"
  fi
  stamp done
} >"$LOG" 2>&1
grep -vE "^\[" "$LOG" | tail -120 | cut -c1-240
