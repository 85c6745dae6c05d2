#!/usr/bin/env bash
# Layers never tuned (scripts/gpu/general_shapes.txt: other networks' shapes, odd sizes, groups, dilation) in
# every math mode on the GPU machine, one call (binaries carried: scripts/gpu/pack.sh; carry [".carry/bin"]): the
# plans' own choice (shipped tuning, an empty user database), every direction, against cuDNN in the same mode
# (FP32 beside 3xtf32), each row checked against float64 by the bench. MATHS (default "fp32 3xtf32 fp16 bf16
# tf32"). Files in OUTDIR: general_<math>.json/.md, log.txt; with TAR=1 the tables go into general.tar.gz instead (the
# device tool returns at most 8 files).
#   [MATHS="3xtf32 fp16"] [TAR=1] scripts/gpu/general_modes.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: general_modes.sh OUTDIR}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=$OUT/db.json
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  for math in ${MATHS:-fp32 3xtf32 fp16 bf16 tf32}; do
    echo "--- bench $math ($(date +%T))"
    timeout "${BENCH_SECONDS:-150}" "$BIN/convtune" bench --suite scripts/gpu/general_shapes.txt --direction all \
      --device cuda:0 --math "$math" --against cudnn --warmup 2 --repeats 10 --out "$OUT/general_$math.json" \
      --markdown "$OUT/general_$math.md" >"/tmp/general-$math.txt" 2>&1
    echo "exit $?"; grep -vE "^\[" "/tmp/general-$math.txt" | cut -c1-300 | tail -8
    python3 scripts/gpu/stride1_summary.py "$OUT/general_$math.json" 2>&1 | tail -3
  done
  echo "--- done ($(date +%T))"
} >"$OUT/log.txt" 2>&1
if [ "${TAR:-0}" = 1 ]; then
  (cd "$OUT" && tar -czf general.tar.gz general_*.json general_*.md && rm -f general_*.json general_*.md)
fi
grep -E "^---|exit|geomean|largest|disagree|error" "$OUT/log.txt"
