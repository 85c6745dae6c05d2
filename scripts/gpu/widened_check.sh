#!/usr/bin/env bash
# bf16 through the widened FP32 families on the GPU machine, one call (binaries carried: scripts/gpu/pack.sh; carry
# [".carry"]; a database to start from as .carry/db-start.json): targeted tunes, each of one widened family over the
# layers its algorithm can serve (FFT: the 5x5 stride-1 layers; Winograd: the 3x3 ones; direct and im2col: the thin
# C=1 and C=3 layers), then issue 14's bf16 bench against cuDNN on AlexNet + the seeds + scripts/gpu/unseen_shapes.txt.
# A tune starts each layer from today's plan, the family's default and the family it widens' entries for the shape
# in fp32 and tf32 (KernelFamily::seed_family). BUDGET_SCALE multiplies every tune's budget (default 1). TUNES
# replaces the list: space-separated family:layers:seconds[:direction], layers a grep pattern over the suite's lines
# (e.g. "widened_fft_tc:^u8:60 widened_direct_tiled:^fmnist1:40:bwd-data").
# Files in OUTDIR: log.txt, db.json, bf16.md/.json, tunes.txt.
#   scripts/gpu/widened_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: widened_check.sh OUTDIR}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=$OUT/db.json
[ -f .carry/db-start.json ] && cp .carry/db-start.json "$OUT/db.json"
SCALE=${BUDGET_SCALE:-1}
ALL=/tmp/all-layers.txt
cat bench/suites/alexnet.txt bench/suites/seeds.txt scripts/gpu/unseen_shapes.txt | grep -vE "^#|^$" >"$ALL"
stamp() { echo "--- $* ($(date +%T))"; }
tune() {  # family layers-pattern seconds [direction]
  local budget
  budget=$(python3 -c "print(int($3 * $SCALE))")
  grep -E "$2" "$ALL" >"/tmp/tune-$1.suite"
  stamp "tune $1 on $(cut -d' ' -f1 "/tmp/tune-$1.suite" | tr '\n' ' ')${4:-all} (${budget}s)"
  timeout $((budget + 60)) "$BIN/convtune" tune --suite "/tmp/tune-$1.suite" --math bf16 --direction "${4:-all}" \
    --device cuda:0 --family "$1" --budget "${budget}s" >>"/tmp/tune-$1.txt" 2>&1
  echo "exit $?"
  grep -vE "^tune \[|skipped \(unsupported\)" "/tmp/tune-$1.txt" | cut -c1-60,130-175,250-420 | tail -24
}
DEFAULT_TUNES="widened_fft_tc:R=5,S=5,stride=1:80 widened_fft:R=5,S=5,stride=1:50 widened_winograd_tc:R=3,S=3,stride=1:80
  widened_direct_tiled:,C=[13],|^fmnist1:40 widened_im2col_gemm:,C=[13],|^fmnist1:40"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  for t in ${TUNES:-$DEFAULT_TUNES}; do
    IFS=: read -r fam pattern seconds direction <<<"$t"
    tune "$fam" "$pattern" "$seconds" "$direction"
  done
  stamp "bench bf16"
  timeout 240 "$BIN/convtune" bench --suite "$ALL" --direction all --device cuda:0 --math bf16 \
    --against cudnn --warmup 2 --repeats 10 --out "$OUT/bf16.json" --markdown "$OUT/bf16.md" >/tmp/bf16.txt 2>&1
  echo "bench bf16: exit $?"; cut -c1-250 /tmp/bf16.txt | grep -vE "^\[" | tail -60
  stamp done
} >"$OUT/log.txt" 2>&1
cat /tmp/tune-widened_*.txt | grep -vE "^tune \[|skipped \(unsupported\)" >"$OUT/tunes.txt"
grep -E "^---|exit|geomean" "$OUT/log.txt"
