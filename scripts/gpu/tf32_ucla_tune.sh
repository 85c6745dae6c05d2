#!/usr/bin/env bash
# tf32 tune of the seeds' ucla5x5 (no tf32 entry shipped: implicit_gemm_tc's built-in default ran 2.1-5.2x cuDNN tf32),
# every family, into OUTDIR/db.json, then the row beside cuDNN tf32 with it. Binaries in .carry/bin.
#   scripts/gpu/tf32_ucla_tune.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: tf32_ucla_tune.sh OUTDIR}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=$OUT/db.json
timeout 300 "$BIN/convtune" tune --suite seeds --layer ${LAYER:-ucla5x5} --math tf32 --family all --direction all \
  --device cuda:0 --budget "${TUNE_BUDGET:-4m}" >"$OUT/tune.txt" 2>&1
echo "tune: exit $? ($(date +%T))"
grep -vE "^tune \[" "$OUT/tune.txt" | grep -vE "skipped" | tail -22 | cut -c1-170
timeout 200 "$BIN/convtune" bench --suite seeds --layer ${LAYER:-ucla5x5} --direction all --family auto --device cuda:0 \
  --math tf32 --against cudnn --warmup 2 --repeats 10 --out "$OUT/bench.json" >"$OUT/bench.txt" 2>&1
echo "bench: exit $? ($(date +%T))"
grep -E "^ucla|^fmnist" "$OUT/bench.txt" | cut -c1-220
