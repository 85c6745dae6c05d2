#!/usr/bin/env bash
# Issue 14's tensor-core modes (tf32, and 3xtf32: FP32-accurate split TF32) for one family at a time, one call
# (binaries carried: scripts/gpu/pack.sh; carry [".carry"]). Written for implicit_gemm_wgmma (the defaults) and
# used for fft_tc with FAMILY=fft_tc. Stages (STAGES, default all), each with a timeout, one failing stage not
# stopping the others:
#   conformance  FAMILY in CONF_PRECISIONS (default 3xtf32; comma-separated) on cuda:0, every standard case and
#                direction (CONF_DIRS), to each mode's tolerance (family_conformance_test), one process per direction;
#   tune         with TUNE_BUDGET (e.g. 120s): `tune --math M --family FAMILY` (M in TUNE_MATHS, default 3xtf32) of
#                TUNE_SUITE (default alexnet; "all": AlexNet + seeds + unseen), only the layers named in LAYERS if
#                set, every direction, into OUTDIR/db.json (the benches read it); the tuner's never-worse rule stores
#                today's plan where it stays faster, so the plan's rows improve; TUNE_DIRECTION (default all)
#                for a family of one direction;
#   bench        AlexNet + the seeds + scripts/gpu/unseen_shapes.txt, every direction, against cuDNN (FP32 for
#                3xtf32: cuDNN has no split mode): BENCHES picks (default "wgmma plan fp32") among
#                  family  FAMILY alone in each of FAMILY_MATHS (default "tf32 3xtf32"), only LAYERS if set
#                          (<math>_family.json),
#                  wgmma   FAMILY alone in 3xtf32 (3xtf32_wgmma.json),
#                  plan    the plan's own choice in 3xtf32 (3xtf32.json),
#                  fp32    AlexNet in `--math fp32` (convtune's FP32 SIMT families: fp32_alexnet.json),
#                  tf32    the plan's choice in `--math tf32` against cuDNN tf32 (tf32.json);
#   summary      scripts/gpu/split_tf32_summary.py over those files.
# WORKSPACE_LIMIT (e.g. 1G) passes --workspace-limit to every tune and bench.
# Files in OUTDIR: log.txt (everything), *.json, *.md, summary.txt, db.json.
#   [STAGES="conformance bench summary"] [FAMILY=fft_tc] [TUNE_BUDGET=120s] scripts/gpu/split_tf32_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: split_tf32_check.sh OUTDIR}
STAGES=${STAGES:-conformance tune bench summary}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=$OUT/db.json
[ -f .carry/db-start.json ] && cp .carry/db-start.json "$OUT/db.json"
LOG=$OUT/log.txt
FAMILY=${FAMILY:-implicit_gemm_wgmma}
layer_args=()
for layer in ${LAYERS:-}; do layer_args+=(--layer "$layer"); done
# WORKSPACE_LIMIT (e.g. 1G: the search workspace cuDNN's adapter gets) for every tune and bench; unset: the device's.
ws_args=()
[ -n "${WORKSPACE_LIMIT:-}" ] && ws_args=(--workspace-limit "$WORKSPACE_LIMIT")
has() { [[ " $STAGES " == *" $1 "* ]]; }
stamp() { echo "--- $* ($(date +%T))"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "cudnn: $CONVTUNE_CUDNN_LIBRARY; commit $(git rev-parse --short HEAD 2>/dev/null)"
  ALL=/tmp/all-layers.txt
  cat bench/suites/alexnet.txt bench/suites/seeds.txt scripts/gpu/unseen_shapes.txt >"$ALL"

  if has conformance; then
    stamp conformance
    pids=()
    for dir in ${CONF_DIRS:-fwd bwd_data bwd_filter}; do
      CONVTUNE_CONFORMANCE_DEVICES=cuda:0 CONVTUNE_CONFORMANCE_PRECISIONS=${CONF_PRECISIONS:-3xtf32} timeout 300 \
        "$BIN/family_conformance_test" --gtest_brief=1 \
        --gtest_filter="AllFamilies/FamilyConformance.SampledConfigurationsMatchTheReference/${FAMILY}_$dir" \
        >"/tmp/conf-$dir.txt" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    for f in /tmp/conf-*.txt; do
      echo "== $f"; grep -E "^conformance:|checks so far|Failure|rel L2|threw|FAILED|PASSED|OK \]|Skipped" "$f" | head -12 | cut -c1-400
    done
  fi

  if has tune && [ -n "${TUNE_BUDGET:-}" ]; then
    suite=${TUNE_SUITE:-alexnet}
    [ "$suite" = all ] && suite=$ALL
    for math in ${TUNE_MATHS:-3xtf32}; do
      stamp "tune $math $TUNE_BUDGET"
      timeout 270 "$BIN/convtune" tune --suite "$suite" "${layer_args[@]}" "${ws_args[@]}" --math "$math" \
        --direction "${TUNE_DIRECTION:-all}" --device cuda:0 --family "$FAMILY" --budget "$TUNE_BUDGET" >"/tmp/tune-$math.txt" 2>&1
      echo "tune $math: exit $?"; grep -vE "^tune \[" "/tmp/tune-$math.txt" | tail -60 | cut -c1-230
    done
  fi

  bench_has() { [[ " ${BENCHES:-wgmma plan fp32} " == *" $1 "* ]]; }
  if has bench && bench_has family; then
    for math in ${FAMILY_MATHS:-tf32 3xtf32}; do
      stamp "bench $math ($FAMILY)"
      timeout 240 "$BIN/convtune" bench --suite "$ALL" "${layer_args[@]}" "${ws_args[@]}" --direction all --device cuda:0 \
        --math "$math" --family "$FAMILY" --against cudnn --warmup 2 --repeats 10 --out "$OUT/${math}_family.json" \
        --markdown "$OUT/${math}_family.md" >"/tmp/family-$math.txt" 2>&1
      echo "bench $math $FAMILY: exit $?"; cut -c1-250 "/tmp/family-$math.txt" | grep -vE "^\[" | tail -20
    done
  fi
  if has bench && bench_has wgmma; then
    stamp "bench 3xtf32 ($FAMILY)"
    timeout 240 "$BIN/convtune" bench --suite "$ALL" "${ws_args[@]}" --direction all --device cuda:0 --math 3xtf32 \
      --family "$FAMILY" --against cudnn --warmup 2 --repeats 10 --out "$OUT/3xtf32_wgmma.json" \
      --markdown "$OUT/3xtf32_wgmma.md" >/tmp/wgmma.txt 2>&1
    echo "bench 3xtf32 wgmma: exit $?"; cut -c1-250 /tmp/wgmma.txt | grep -vE "^\[" | tail -8
  fi
  if has bench && bench_has plan; then
    stamp "bench 3xtf32 (the plan's choice)"
    timeout 240 "$BIN/convtune" bench --suite "$ALL" "${ws_args[@]}" --direction all --device cuda:0 --math 3xtf32 \
      --against cudnn --warmup 2 --repeats 10 --out "$OUT/3xtf32.json" --markdown "$OUT/3xtf32.md" >/tmp/plan.txt 2>&1
    echo "bench 3xtf32: exit $?"; cut -c1-250 /tmp/plan.txt | grep -vE "^\[" | tail -8
  fi
  if has bench && bench_has fp32; then
    stamp "bench fp32 AlexNet"
    timeout 120 "$BIN/convtune" bench --suite alexnet "${ws_args[@]}" --direction all --device cuda:0 --math fp32 --warmup 2 \
      --repeats 10 --out "$OUT/fp32_alexnet.json" >/tmp/fp32.txt 2>&1
    echo "bench fp32: exit $?"; cut -c1-250 /tmp/fp32.txt | grep -vE "^\[" | tail -4
  fi
  if has bench && bench_has tf32; then
    stamp "bench tf32 (the plan's choice)"
    timeout 240 "$BIN/convtune" bench --suite "$ALL" "${ws_args[@]}" --direction all --device cuda:0 --math tf32 \
      --against cudnn --warmup 2 --repeats 10 --out "$OUT/tf32.json" --markdown "$OUT/tf32.md" >/tmp/tf32.txt 2>&1
    echo "bench tf32: exit $?"; cut -c1-250 /tmp/tf32.txt | grep -vE "^\[" | tail -8
  fi

  if has summary; then
    stamp summary
    python3 scripts/gpu/split_tf32_summary.py "$OUT" | tee "$OUT/summary.txt"
  fi
  stamp done
} >"$LOG" 2>&1
grep -E "^---|exit|geomean|FAILED|PASSED|checks|faster|slower" "$LOG" | tail -60
