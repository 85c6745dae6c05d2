#!/usr/bin/env bash
# Two builds of libconvtune alternated run by run over scripts/gpu/general_shapes.txt on the CPU (untuned, every
# direction, against oneDNN), so that a noisy shared host weighs on both alike: ROUNDS rounds of A then B, one
# bench file per run (OUT/ab_A<round>.json, ab_B<round>.json), then per-row medians
# (scripts/ab_medians.py). LIB_A and LIB_B are folders holding libconvtune.so.0 (copies of
# build/lib from two commits); build/convtune loads the library from LD_LIBRARY_PATH before its own RUNPATH.
#   [ROUNDS=6] [BATCH_SCALE=0.25] [BUILD=build] scripts/cpu_ab_general.sh LIB_A LIB_B OUT
set -euo pipefail
cd "$(dirname "$0")/.."
A=$(realpath "${1:?usage: cpu_ab_general.sh LIB_A LIB_B OUT}") B=$(realpath "${2:?LIB_B}") OUT=${3:?OUT}
BUILD=${BUILD:-build}
mkdir -p "$OUT"
for lib in "$A" "$B"; do
  [ -e "$lib/libconvtune.so.0" ] || { echo "cpu_ab_general.sh: $lib has no libconvtune.so.0" >&2; exit 2; }
done
for round in $(seq "${ROUNDS:-6}"); do
  for v in A B; do
    lib=$A; [ "$v" = B ] && lib=$B
    echo "$(date +%T) round $round: $v ($lib)"
    LD_LIBRARY_PATH=$lib CONVTUNE_TUNING_DB="$OUT/empty.json" "$BUILD/convtune" bench \
      --suite scripts/gpu/general_shapes.txt --device cpu --direction all --batch-scale "${BATCH_SCALE:-0.25}" \
      --against onednn --out "$OUT/ab_$v$round.json" >"$OUT/ab_$v$round.log" 2>&1
  done
done
python3 scripts/ab_medians.py "$OUT" | tee "$OUT/medians.txt"
