#!/usr/bin/env bash
# The untuned family choice on the GPU (issue 15): for the layers of AlexNet, the seeds (bench/suites),
# unseen_shapes.txt and untuned_shapes.txt, all directions, the built-in rank rules (no tuning data), the cost model
# (the shipped H200 entries less those of these very layers, so every row is untuned: the nearest tier where a tuned shape is near, else the model), and what a
# tune then finds. Binaries in .carry/bin (scripts/gpu/pack.sh).
#   STAGES="untuned" (rules and model benches, ~3 min), STAGES="tune" (TUNE_BUDGET, default 8m, into
#   $OUT/tuned-db.json; carry it back and pass TUNED_DB_IN to go on in another call), STAGES="tuned" (bench on the tuned
#   database, then the table), STAGES="recheck" (rows below 0.90 re-timed alternately, scripts/gpu/alternate_retime.py):
#   OUT=dir STAGES="untuned tune tuned recheck" scripts/gpu/untuned_choice_check.sh
# Prints per layer and direction: the rules' family and ms, the untuned plan's family, tier and ms, the tuned ms,
# and tuned/untuned (the issue asks >= 0.90 on every row); $OUT/summary.txt holds the table.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.carry/bin}
OUT=${OUT:-/tmp/convtune-out}
STAGES=${STAGES:-untuned tune tuned}
mkdir -p "$OUT/empty" "$OUT/shipped-less-layers"
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_CACHE_DIR=/tmp/convtune-cache
LAYERS=$OUT/layers.txt
grep -hvE '^\s*(#|$)' bench/suites/alexnet.txt bench/suites/seeds.txt scripts/gpu/unseen_shapes.txt \
  scripts/gpu/untuned_shapes.txt | sed 's/#.*//' >"$LAYERS"
has() { [[ " $STAGES " == *" $1 "* ]]; }
bench() {  # LABEL SHIPPED_DIR USER_DB: the plan's own choice on every layer and direction
  CONVTUNE_SHIPPED_TUNING_DIR=$2 CONVTUNE_TUNING_DB=$3 timeout 540 "$BIN/convtune" bench --suite "$LAYERS" \
    --device cuda:0 --direction all --repeats ${REPEATS:-30} --out "$OUT/$1.json" >"$OUT/$1.log" 2>&1
  echo "bench $1: exit $?"
}
if has untuned; then
  # The shipped entries less those of the listed layers (any direction), so none of them is tuned.
  python3 - "$LAYERS" tuning/nvidia-h200-cuda.json "$OUT/shipped-less-layers/h200.json" <<'PY'
import json, re, sys
layers, src, dst = sys.argv[1:]
def key(text):
    f = dict(re.findall(r'(\w+)=(\d+)', text))
    d = {'stride': '1', 'pad': '0', 'dilation': '1', 'groups': '1'}
    d.update(f)
    d.setdefault('W', d['H']); d.setdefault('S', d['R'])
    return tuple(d[k] for k in ('N', 'C', 'H', 'W', 'K', 'R', 'S', 'stride', 'pad', 'dilation', 'groups'))
listed = {key(line.split()[1]) for line in open(layers) if line.split()}
db = json.load(open(src))
kept = [e for e in db['entries'] if e['problem'].startswith('gemm') or key(e['problem'].split(',dir=')[0]) not in listed]
print(f"shipped entries: {len(db['entries'])}, kept {len(kept)} (those of the listed layers left out)")
db['entries'] = kept
json.dump(db, open(dst, 'w'), indent=1)
PY
  bench rules "$OUT/empty" "$OUT/none.json"
  bench untuned "$OUT/shipped-less-layers" "$OUT/none.json"
fi
if has tune; then
  [ -n "${TUNED_DB_IN:-}" ] && cp "$TUNED_DB_IN" "$OUT/tuned-db.json"
  CONVTUNE_SHIPPED_TUNING_DIR=$OUT/empty timeout 590 "$BIN/convtune" tune --suite "$LAYERS" --device cuda:0 \
    --direction all --budget "${TUNE_BUDGET:-8m}" --skip-tuned --no-peak --db "$OUT/tuned-db.json" \
    --log "$OUT/tune-log.json" >"$OUT/tune.log" 2>&1
  echo "tune: exit $?"
  grep -vE "^tune \[" "$OUT/tune.log" | tail -5 | cut -c1-200
fi
if has tuned; then
  bench tuned "$OUT/empty" "$OUT/tuned-db.json"
  python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, os, sys
out = sys.argv[1]
def rows(label):
    path = os.path.join(out, label + '.json')
    if not os.path.exists(path): return {}
    return {(r['layer'], r['direction']): r for r in json.load(open(path))['rows']}
rules, untuned, tuned = rows('rules'), rows('untuned'), rows('tuned')
def fam(r): return r['algorithm'].split('[')[0] if r else '-'
def tier(r): return r['algorithm'].rsplit('(', 1)[-1].rstrip(')') if r else '-'
def ms(r): return f"{r['ms']:.4f}" if r else '-'
print(f"{'layer':8} {'dir':10} {'rules':14} {'ms':>8}  {'untuned':14} {'tier':18} {'ms':>8}  {'tuned ms':>8} {'tuned/untuned':>13}")
low = 0
for k in sorted(set(rules) | set(untuned) | set(tuned)):
    r, u, t = rules.get(k), untuned.get(k), tuned.get(k)
    ratio = t['ms'] / u['ms'] if u and t else None
    low += ratio is not None and ratio < 0.9
    print(f"{k[0]:8} {k[1]:10} {fam(r):14} {ms(r):>8}  {fam(u):14} {tier(u):18} {ms(u):>8}  {ms(t):>8} "
          f"{(f'{ratio:.2f}' if ratio else '-'):>13}{'  < 0.90' if ratio is not None and ratio < 0.9 else ''}")
print(f"rows with the untuned choice below 90% of the tuned speed: {low}")
PY
fi
if has recheck; then
  # Rows below 0.90 in the benches: tuned and untuned configurations re-timed alternately (ROUNDS rounds, default
  # 3), since 12-20 us kernels drift 10-25% between two benches minutes apart (the same configuration read 0.0124 and
  # 0.0156 ms); rows whose two configurations are the same are the same kernel. $OUT/recheck.txt.
  python3 scripts/gpu/alternate_retime.py "$OUT" "$LAYERS" "$BIN/convtune" cuda:0 fp32 "${ROUNDS:-3}" tuned untuned \
    1.111 1.111 | tee "$OUT/recheck.txt"
fi
