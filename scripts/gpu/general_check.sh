#!/usr/bin/env bash
# Issue 15 on layers convtune never saw (scripts/gpu/general_shapes.txt: other networks' shapes, odd sizes, groups,
# dilation, asymmetric filters, N=1), all directions, one GPU run:
#   STAGES=before    the plan's own choice as a user gets it (shipped tuning, empty user database) beside cuDNN in
#                    the same math (bench --against "$AGAINST" --math MATH)
#   STAGES=defaults  every family's built-in default (no tuning data at all): the best of them is what an untuned
#                    choice could have had
#   STAGES=tune      tune --budget TUNE_BUDGET (default 60s) from the shipped entries into $OUT/tuned-db.json
#   STAGES=after     the plan's choice again on that database, beside cuDNN: the tune must leave no row slower
#   STAGES=recheck   every row whose configuration the tune changed, its before and after configurations re-timed
#                    alternately (ROUNDS rounds, default 3), so drift between the two benches cannot decide; rows
#                    that kept their configuration run the same kernel before and after
#   STAGES=summary   the table ($OUT/summary.txt): best default/choice with no data and with shipped data,
#                    convtune/cuDNN before and after the tune, after/before
# Binaries in .carry/bin (scripts/gpu/pack.sh): OUT=dir STAGES="rules before defaults tune after summary" \
#   scripts/gpu/general_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.carry/bin}
OUT=${OUT:-/tmp/convtune-out}
STAGES=${STAGES:-rules before defaults tune after summary}
MATH=${MATH:-fp32}
LAYERS_FILE=${LAYERS_FILE:-scripts/gpu/general_shapes.txt}  # or several files, space-separated
FAMILIES=${FAMILIES:-implicit_gemm im2col_gemm direct_tiled winograd depthwise}
DEVICE=${DEVICE:-cuda:0} AGAINST=${AGAINST:-cudnn}  # other values only to try the script on a CPU machine
export AGAINST
mkdir -p "$OUT/empty"
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_CACHE_DIR=${CONVTUNE_CACHE_DIR:-/tmp/convtune-cache}
export CONVTUNE_SHIPPED_TUNING_DIR=${CONVTUNE_SHIPPED_TUNING_DIR:-$PWD/tuning}  # the tree's, as an install has them
LAYERS=$OUT/layers.txt
grep -hvE '^\s*(#|$)' $LAYERS_FILE | sed 's/#.*//' >"$LAYERS"
has() { [[ " $STAGES " == *" $1 "* ]]; }
stamp() { echo "[$(date +%T)] $*"; }
if has rules; then
  CONVTUNE_SHIPPED_TUNING_DIR=$OUT/empty CONVTUNE_TUNING_DB=$OUT/none.json timeout 400 "$BIN/convtune" bench \
    --suite "$LAYERS" --device "$DEVICE" --direction all --repeats 10 --math "$MATH" --out "$OUT/rules.json" \
    >"$OUT/rules.log" 2>&1
  stamp "bench rules: exit $?"
fi
if has before; then
  CONVTUNE_TUNING_DB=$OUT/none.json timeout 560 "$BIN/convtune" bench --suite "$LAYERS" --device "$DEVICE" \
    --direction all --repeats 10 --math "$MATH" --against "$AGAINST" --out "$OUT/before.json" >"$OUT/before.log" 2>&1
  stamp "bench before: exit $?"
fi
if has defaults; then
  for f in $FAMILIES; do
    CONVTUNE_SHIPPED_TUNING_DIR=$OUT/empty CONVTUNE_TUNING_DB=$OUT/none.json timeout 300 "$BIN/convtune" bench \
      --suite "$LAYERS" --device "$DEVICE" --direction all --repeats 10 --math "$MATH" --family "$f" \
      --out "$OUT/default-$f.json" >"$OUT/default-$f.log" 2>&1
    stamp "bench default $f: exit $?"
  done
fi
if has tune; then
  timeout 400 "$BIN/convtune" tune --suite "$LAYERS" --device "$DEVICE" --direction all --math "$MATH" \
    --budget "${TUNE_BUDGET:-60s}" --db "$OUT/tuned-db.json" --log "$OUT/tune-log.json" >"$OUT/tune.log" 2>&1
  stamp "tune: exit $?"
  grep -vE "^tune \[" "$OUT/tune.log" | tail -3 | cut -c1-200
fi
if has after; then
  CONVTUNE_TUNING_DB=$OUT/tuned-db.json timeout 560 "$BIN/convtune" bench --suite "$LAYERS" --device "$DEVICE" \
    --direction all --repeats 10 --math "$MATH" --against "$AGAINST" --out "$OUT/after.json" >"$OUT/after.log" 2>&1
  stamp "bench after: exit $?"
fi
if has recheck; then
  # Each changed row's two configurations in ABAB order (scripts/gpu/alternate_retime.py); $OUT/recheck.txt.
  python3 scripts/gpu/alternate_retime.py "$OUT" "$LAYERS" "$BIN/convtune" "$DEVICE" "$MATH" "${ROUNDS:-3}" before after \
    | tee "$OUT/recheck.txt"
fi
if has summary; then
  python3 - "$OUT" $FAMILIES <<'PY' | tee "$OUT/summary.txt"
import json, math, os, sys
out, families = sys.argv[1], sys.argv[2:]
def rows(label):
    path = os.path.join(out, label + '.json')
    if not os.path.exists(path): return {}
    return {(r['layer'], r['direction']): r for r in json.load(open(path))['rows'] if r.get('ms')}
rules, before, after = rows('rules'), rows('before'), rows('after')
defaults = {f: rows('default-' + f) for f in families}
def fam(r): return r['algorithm'].split('[')[0] if r else '-'
def tier(r): return r['algorithm'].rsplit('(', 1)[-1].rstrip(')') if r and '(' in r['algorithm'] else '-'
def ref(r):  # cuDNN's time in the row, if it ran
    a = ((r or {}).get('against') or {}).get(os.environ.get('AGAINST', 'cudnn')) or {}
    return a.get('ms')
def gm(xs): return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float('nan')
print(f"{'layer':10} {'dir':10} {'no data':14} {'ms':>8} {'best/it':>7}  {'choice':14} {'tier':17} {'ms':>8} {'best default':14} {'ms':>8} {'best/choice':>11} "
      f"{'cudnn ms':>8} {'ct/cudnn':>8} {'tuned ms':>8} {'ct/cudnn':>8} {'after/before':>12}")
choice_ratios, rule_ratios, before_ratios, after_ratios, slower = [], [], [], [], []
for k in sorted(set(before) | set(after)):
    b, a = before.get(k), after.get(k)
    cands = [(d[k]['ms'], f) for f, d in defaults.items() if k in d]
    best = min(cands) if cands else None
    q = best[0] / b['ms'] if b and best else None
    if q is not None: choice_ratios.append(q)
    u = rules.get(k)
    qu = best[0] / u['ms'] if u and best else None
    if qu is not None: rule_ratios.append(qu)
    c = ref(b) or ref(a)
    rb = b['ms'] / c if b and c else None
    ra = a['ms'] / c if a and c else None
    if rb: before_ratios.append(rb)
    if ra: after_ratios.append(ra)
    ab = a['ms'] / b['ms'] if a and b else None
    same = a and b and a['algorithm'].rsplit(' (', 1)[0] == b['algorithm'].rsplit(' (', 1)[0]
    if ab is not None and ab > 1.05: slower.append((k, ab, same))
    f = lambda x, p=3: f"{x:.{p}f}" if x is not None else '-'
    print(f"{k[0]:10} {k[1]:10} {fam(u):14} {f(u and u['ms'], 4):>8} {f(qu, 2):>7}{'*' if qu is not None and qu < 0.9 else ' '} {fam(b):14} {tier(b):17} {f(b and b['ms'], 4):>8} {(best[1] if best else '-'):14} "
          f"{f(best and best[0], 4):>8} {f(q, 2):>11}{'*' if q is not None and q < 0.9 else ' '} {f(c, 4):>8} {f(rb, 2):>8} "
          f"{f(a and a['ms'], 4):>8} {f(ra, 2):>8} {f(ab, 3):>12}")
print(f"no tuning data: the choice within 90% of the best family default on {sum(q >= 0.9 for q in rule_ratios)} of {len(rule_ratios)} rows, geomean best/choice {gm(rule_ratios):.3f}")
print(f"shipped tuning: the choice within 90% of the best family default on {sum(q >= 0.9 for q in choice_ratios)} of {len(choice_ratios)} rows, geomean best/choice {gm(choice_ratios):.3f}")
print(f"convtune/cuDNN before the tune: geomean {gm(before_ratios):.3f} over {len(before_ratios)} rows, "
      f"worst {max(before_ratios, default=float('nan')):.2f}, above 1.5x: {sum(r > 1.5 for r in before_ratios)}")
print(f"convtune/cuDNN after the tune:  geomean {gm(after_ratios):.3f} over {len(after_ratios)} rows, "
      f"worst {max(after_ratios, default=float('nan')):.2f}, above 1.5x: {sum(r > 1.5 for r in after_ratios)}")
print(f"rows more than 5% slower after the tune: {len(slower)}, {sum(not s for _, _, s in slower)} of them on another "
      "configuration" + ''.join(f"\n  {k[0]} {k[1]} {r:.3f}" + (" (the same configuration: timing spread)" if s else "")
                                 for k, r, s in slower))
PY
fi
