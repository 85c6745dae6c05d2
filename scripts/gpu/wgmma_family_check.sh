#!/usr/bin/env bash
# One wgmma family (issue 14) on the GPU machine in one call (binaries carried: scripts/gpu/pack.sh; carry
# [".carry/bin"]): its default configuration in bf16 against cuDNN bf16 on AlexNet + the seeds +
# scripts/gpu/unseen_shapes.txt in the family's directions (every row checked against float64 by the bench), while
# family_conformance_test checks the family on cuda:0 (every standard case, sampled configurations, bf16 and tf32;
# fp16 too with FP16=1) at nice 19 beside it (the benches time on device events; cuDNN runs in the same bench).
#   FAMILY  the family (implicit_gemm_nhwc_wgmma)        DIRS  its directions ("fwd bwd-data")
#   TF32=1  the family's default in tf32 against cuDNN tf32 too (tf32_<dir>)
#   TUNE=S  then `tune` the family on the same layers and directions for S seconds a math mode (TUNE_MATHS: bf16)
#           (tune_db.json, tune_log_<math>_<dir>.json), and bench the tuned entries against cuDNN in that mode
#           (<math>_tuned_<dir>)
#   TUNE_LAYERS="alex1 u7"  tune (and bench tuned) only these layers of the set
#   IMPORT_DB=tuning/FILE  then those benches' rows into a copy of FILE (db import-bench) in OUTDIR/tuning/, which
#           the PLAN benches use
#   PLAN=1  issue 14's bf16 bar: the plans' own choice (the shipped tuning/ files, or TUNING_DIR's, an empty user
#           database) on the same layers in every direction against cuDNN bf16 (bf16_plan.md/.json)
#   PLAN_TF32=1  the same in tf32 against cuDNN tf32 (tf32_plan.md/.json)
#   BENCH=0 leaves out the family's default benches and the conformance test (a plan-only call)
# Files in OUTDIR: bf16_<dir>.md/.json, conformance.txt, log.txt and the above.
#   [FAMILY=..] [DIRS=".."] [TF32=1] [TUNE=120] [PLAN=1] [FP16=1] scripts/gpu/wgmma_family_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: wgmma_family_check.sh OUTDIR}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
[ -n "${TUNING_DIR:-}" ] && export CONVTUNE_SHIPPED_TUNING_DIR=$PWD/$TUNING_DIR
export CONVTUNE_TUNING_DB=$OUT/db.json  # empty: the family's defaults
FAMILY=${FAMILY:-implicit_gemm_nhwc_wgmma}
DIRS=${DIRS:-fwd bwd-data}
ALL=/tmp/all-layers.txt
cat bench/suites/alexnet.txt bench/suites/seeds.txt scripts/gpu/unseen_shapes.txt >"$ALL"
bench_rows() {  # name, then bench's arguments
  local name=$1
  shift
  echo "--- bench $name ($(date +%T))"
  timeout "${BENCH_SECONDS:-75}" "$BIN/convtune" bench --suite "$ALL" --device cuda:0 --warmup 2 --repeats 10 \
    --out "$OUT/$name.json" --markdown "$OUT/$name.md" "$@" >"/tmp/bench-$name.txt" 2>&1
  echo "exit $?"
  grep -vE "^\[" "/tmp/bench-$name.txt" | cut -c1-300 | tail -55
}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "cudnn: $CONVTUNE_CUDNN_LIBRARY"
  echo "family: $FAMILY ($DIRS); shipped tuning: $CONVTUNE_SHIPPED_TUNING_DIR"
  pids=()
  if [ "${BENCH:-1}" = 1 ]; then
    precisions=bf16,tf32
    [ "${FP16:-0}" = 1 ] && precisions=bf16,fp16,tf32
    for dir in $DIRS; do
      CONVTUNE_CONFORMANCE_DEVICES=cuda:0 CONVTUNE_CONFORMANCE_PRECISIONS=$precisions timeout "${CONF_SECONDS:-150}" \
        nice -n 19 "$BIN/family_conformance_test" --gtest_brief=1 \
        --gtest_filter="AllFamilies/FamilyConformance.SampledConfigurationsMatchTheReference/${FAMILY}_${dir//-/_}" \
        >"/tmp/conf-$dir.txt" 2>&1 &
      pids+=($!)
    done
    maths=bf16
    [ "${TF32:-0}" = 1 ] && maths="bf16 tf32"
    for math in $maths; do
      for dir in $DIRS; do
        bench_rows "${math}_$dir" --direction "$dir" --math "$math" --family "$FAMILY" --against cudnn
      done
    done
  fi
  if [ "${TUNE:-0}" != 0 ]; then
    layer_args=()
    for layer in ${TUNE_LAYERS:-}; do layer_args+=(--layer "$layer"); done
    for math in ${TUNE_MATHS:-bf16}; do
      for dir in $DIRS; do
        echo "--- tune $FAMILY $math $dir for $((TUNE / $(echo $DIRS | wc -w)))s ($(date +%T))"
        timeout $((TUNE + 60)) "$BIN/convtune" tune --suite "$ALL" "${layer_args[@]}" --direction "$dir" \
          --device cuda:0 --math "$math" --family "$FAMILY" --budget "$((TUNE / $(echo $DIRS | wc -w)))s" --db "$OUT/tune_db.json" \
          --log "$OUT/tune_log_${math}_$dir.json" --no-peak >"/tmp/tune-$math-$dir.txt" 2>&1
        echo "exit $?"
        grep -vE "^\[" "/tmp/tune-$math-$dir.txt" | cut -c1-250 | tail -25
        CONVTUNE_TUNING_DB=$OUT/tune_db.json bench_rows "${math}_tuned_$dir" "${layer_args[@]}" --direction "$dir" \
          --math "$math" --family "$FAMILY" --against cudnn
      done
    done
  fi
  if [ -n "${IMPORT_DB:-}" ]; then
    # The tuned rows (checked against float64 by their bench) into a copy of the shipped tuning, which the plans
    # below then use: OUT/tuning/ comes back with the results.
    echo "--- import the tuned rows into $OUT/tuning/$(basename "$IMPORT_DB") ($(date +%T))"
    mkdir -p "$OUT/tuning" && cp "$CONVTUNE_SHIPPED_TUNING_DIR"/*.json "$OUT/tuning/"
    empty=$(mktemp -d)  # no shipped defaults beside the file being written
    for f in "$OUT"/*_tuned_*.json; do
      CONVTUNE_SHIPPED_TUNING_DIR=$empty "$BIN/convtune" db --db "$OUT/tuning/$(basename "$IMPORT_DB")" \
        import-bench "$f" 2>&1 | tail -1
    done
    export CONVTUNE_SHIPPED_TUNING_DIR=$OUT/tuning
  fi
  if [ "${PLAN:-0}" = 1 ]; then
    BENCH_SECONDS=${PLAN_SECONDS:-240} bench_rows bf16_plan --direction all --math bf16 --against cudnn
  fi
  if [ "${PLAN_TF32:-0}" = 1 ]; then
    BENCH_SECONDS=${PLAN_SECONDS:-240} bench_rows tf32_plan --direction all --math tf32 --against cudnn
  fi
  if [ ${#pids[@]} -gt 0 ]; then
    echo "--- conformance ($(date +%T))"
    for p in "${pids[@]}"; do wait "$p"; echo "conformance exit $?"; done
    for dir in $DIRS; do
      echo "== $dir"
      grep -E "^conformance:|checks so far|Failure|rel L2|threw|FAILED|PASSED|OK \]" "/tmp/conf-$dir.txt" | head -20 |
        cut -c1-400
    done | tee "$OUT/conformance.txt"
  fi
  echo "--- done ($(date +%T))"
} >"$OUT/log.txt" 2>&1
tail -80 "$OUT/log.txt"
