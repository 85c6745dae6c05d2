#!/usr/bin/env bash
# The tuner's budget on the GPU (docs/PERFORMANCE.md, "Tuning time"): `tune --suite alexnet --direction all` with
# a 15-minute and a 2-minute budget, each on an empty program cache and an empty database (shipped tuning off, so
# both start from the built-in defaults), then both databases benched side by side in one run: each row's 2-minute
# time against the 15-minute one.
# A 15-minute run outlasts one device call (10 minutes), so it runs detached in $WORK on the GPU machine and a later
# call (issued within the machine's idle release) waits for it:
#   STAGES=start-long   start the 15-minute tune in the background and return after WAIT_S (default 560) seconds
#   STAGES=wait-long    wait for it to end
#   STAGES=short        the 2-minute tune, timed by this script's clock too
#   STAGES=compare      bench --suite alexnet --direction all on each database; $OUT/summary.txt holds the table
# Binaries in .carry/bin (scripts/gpu/pack.sh). OUT=dir STAGES="..." scripts/gpu/tune_budget_comparison.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-$PWD/.carry/bin}
OUT=${OUT:-/tmp/convtune-out}
WORK=${WORK:-/tmp/tune-budget-comparison}
STAGES=${STAGES:-start-long wait-long short compare}
LONG=${LONG_BUDGET:-15m}
SHORT=${SHORT_BUDGET:-2m}
SUITE=${SUITE:-alexnet} DEVICE=${DEVICE:-cuda:0}  # other values only to try the script on a CPU machine
mkdir -p "$OUT" "$WORK/empty"
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_SHIPPED_TUNING_DIR=$WORK/empty
has() { [[ " $STAGES " == *" $1 "* ]]; }
# A long run's database from an earlier call (LONG_DB_IN, with LONG_WALL="status ms" as its long.wall said), so a
# changed tuner's short run can be compared with it without another 15 minutes.
if [ -n "${LONG_DB_IN:-}" ]; then
  cp "$LONG_DB_IN" "$WORK/long-db.json" && echo "${LONG_WALL:?LONG_WALL=\"status ms\" of the carried run}" >"$WORK/long.wall"
  : >"$WORK/long.log"
fi
tune() {  # LABEL BUDGET: one cold tune into $WORK/LABEL-db.json, exit status and wall ms into $WORK/LABEL.wall
  rm -rf "$WORK/cache-$1" "$WORK/$1-db.json"
  local start=$(date +%s%N)
  CONVTUNE_CACHE_DIR=$WORK/cache-$1 "$BIN/convtune" tune --suite "$SUITE" --direction all --device "$DEVICE" \
    --budget "$2" --db "$WORK/$1-db.json" --log "$WORK/$1-log.json" >"$WORK/$1.log" 2>&1
  local rc=$?
  echo "$rc $(( ($(date +%s%N) - start) / 1000000 ))" >"$WORK/$1.wall"  # exit status, wall milliseconds
}
if has start-long; then
  # setsid: the tune outlives this call's shell; its end is marked by $WORK/long.wall.
  rm -f "$WORK/long.wall"
  setsid nohup bash -c "$(declare -f tune); BIN=$BIN WORK=$WORK SUITE=$SUITE DEVICE=$DEVICE; tune long $LONG" >/dev/null 2>&1 &
  echo "long tune ($LONG) started at $(date -u +%T)"
  sleep "${WAIT_S:-560}"
  tail -c 300 "$WORK/long.log" | tr '\r' '\n' | tail -2 | cut -c1-160
fi
if has wait-long; then
  while [ ! -f "$WORK/long.wall" ]; do sleep 5; done
  echo "long tune: exit and wall milliseconds: $(cat "$WORK/long.wall")"
fi
if has short; then
  tune short "$SHORT"
  echo "short tune: exit and wall milliseconds: $(cat "$WORK/short.wall")"
fi
if has compare; then
  for label in long short; do
    CONVTUNE_CACHE_DIR=$WORK/cache-$label CONVTUNE_TUNING_DB=$WORK/$label-db.json timeout 280 "$BIN/convtune" bench \
      --suite "$SUITE" --direction all --device "$DEVICE" --repeats 20 --out "$OUT/bench-$label.json" >"$OUT/bench-$label.log" 2>&1
    echo "bench $label: exit $?"
  done
  for label in long short; do
    cp "$WORK/$label.log" "$WORK/$label.wall" "$WORK/$label-db.json" "$OUT/" 2>/dev/null
    grep -vE "^tune \[" "$WORK/$label.log" | tail -70 >"$OUT/$label-summary.log"
  done
  python3 - "$OUT" "$LONG" "$SHORT" <<'PY' | tee "$OUT/summary.txt"
import json, os, sys
out, long_budget, short_budget = sys.argv[1:]
def rows(label):
    return {(r['layer'], r['direction']): r for r in json.load(open(os.path.join(out, f'bench-{label}.json')))['rows']}
def wall(label):
    rc, seconds = open(os.path.join(out, f'{label}.wall')).read().split()
    return f"exit {rc}, {int(seconds) / 1000:.1f} s"
long_rows, short_rows = rows('long'), rows('short')
print(f"tune --budget {long_budget}: {wall('long')}; tune --budget {short_budget}: {wall('short')}")
print(f"{'layer':6} {'dir':10} {long_budget + ' family':14} {'ms':>8}  {short_budget + ' family':14} {'ms':>8}  "
      f"{'speed ' + short_budget + '/' + long_budget:>12}")
low = 0
for k in sorted(long_rows):
    l, s = long_rows[k], short_rows.get(k)
    if not s: continue
    ratio = l['ms'] / s['ms']
    low += ratio < 0.95
    fam = lambda r: r['algorithm'].split('[')[0]
    print(f"{k[0]:6} {k[1]:10} {fam(l):14} {l['ms']:8.4f}  {fam(s):14} {s['ms']:8.4f}  {ratio:12.3f}"
          f"{'  < 0.95' if ratio < 0.95 else ''}")
print(f"rows where the {short_budget} result is below 95% of the {long_budget} speed: {low} of {len(long_rows)}")
PY
fi
