#!/usr/bin/env bash
# implicit_gemm_nhwc_wgmma (issue 14) on the GPU machine in one call (binaries carried: scripts/gpu/pack.sh; carry
# [".carry/bin"]). Its default configuration in bf16 against cuDNN bf16 on AlexNet + the seeds +
# scripts/gpu/unseen_shapes.txt, forward and backward-data (every row checked against float64 by the bench), while
# family_conformance_test checks the family on cuda:0 (every standard case, sampled configurations, bf16 and tf32;
# fp16 too with FP16=1) at nice 19 beside it (the benches time on device events; cuDNN runs in the same bench).
# TF32=1 adds the family's default in tf32 against cuDNN tf32 on the same layers (tf32_fwd, tf32_bwd-data).
# PLAN=1 adds issue 14's bf16 bar: the plans' own choice (the shipped tuning/ files, an empty user database) on the
# same layers in every direction against cuDNN bf16 (bf16_plan.md/.json), after the family's benches.
# Files in OUTDIR: bf16_fwd.md/.json, bf16_bwd-data.md/.json, conformance.txt, log.txt.
#   [PLAN=1] [TF32=1] [FP16=1] scripts/gpu/nhwc_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: nhwc_check.sh OUTDIR}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=$OUT/db.json  # empty: the family's defaults
FAMILY=implicit_gemm_nhwc_wgmma
ALL=/tmp/all-layers.txt
cat bench/suites/alexnet.txt bench/suites/seeds.txt scripts/gpu/unseen_shapes.txt >"$ALL"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "cudnn: $CONVTUNE_CUDNN_LIBRARY"
  precisions=bf16,tf32
  [ "${FP16:-0}" = 1 ] && precisions=bf16,fp16,tf32
  pids=()
  for dir in fwd bwd_data; do
    CONVTUNE_CONFORMANCE_DEVICES=cuda:0 CONVTUNE_CONFORMANCE_PRECISIONS=$precisions timeout "${CONF_SECONDS:-150}" \
      nice -n 19 "$BIN/family_conformance_test" --gtest_brief=1 \
      --gtest_filter="AllFamilies/FamilyConformance.SampledConfigurationsMatchTheReference/${FAMILY}_$dir" \
      >"/tmp/conf-$dir.txt" 2>&1 &
    pids+=($!)
  done
  maths=bf16
  [ "${TF32:-0}" = 1 ] && maths="bf16 tf32"
  for math in $maths; do
    for dir in fwd bwd-data; do
      echo "--- bench $math $dir ($(date +%T))"
      timeout "${BENCH_SECONDS:-75}" "$BIN/convtune" bench --suite "$ALL" --direction "$dir" --device cuda:0 \
        --math "$math" --family "$FAMILY" --against cudnn --warmup 2 --repeats 10 --out "$OUT/${math}_$dir.json" \
        --markdown "$OUT/${math}_$dir.md" >"/tmp/bench-$math-$dir.txt" 2>&1
      echo "exit $?"
      grep -vE "^\[" "/tmp/bench-$math-$dir.txt" | cut -c1-300 | tail -30
    done
  done
  if [ "${PLAN:-0}" = 1 ]; then
    echo "--- bench bf16, the plans' choice, every direction ($(date +%T))"
    timeout "${PLAN_SECONDS:-240}" "$BIN/convtune" bench --suite "$ALL" --direction all --device cuda:0 --math bf16 \
      --against cudnn --warmup 2 --repeats 10 --out "$OUT/bf16_plan.json" --markdown "$OUT/bf16_plan.md" \
      >/tmp/bench-plan.txt 2>&1
    echo "exit $?"
    grep -vE "^\[" /tmp/bench-plan.txt | cut -c1-300 | tail -55
  fi
  echo "--- conformance ($(date +%T))"
  for p in "${pids[@]}"; do wait "$p"; echo "conformance exit $?"; done
  for dir in fwd bwd_data; do
    echo "== $dir"
    grep -E "^conformance:|checks so far|Failure|rel L2|threw|FAILED|PASSED|OK \]" "/tmp/conf-$dir.txt" | head -20 |
      cut -c1-400
  done | tee "$OUT/conformance.txt"
  echo "--- done ($(date +%T))"
} >"$OUT/log.txt" 2>&1
tail -60 "$OUT/log.txt"
