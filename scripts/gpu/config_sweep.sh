#!/usr/bin/env bash
# Times chosen configurations of chosen families on chosen layers, all in one GPU run, to decide a built-in default
# or an untuned rule from measurements rather than guesses. SPEC lists one run per line:
#   DIRECTION FAMILY CONFIG LAYER...
# CONFIG is `-` for the family's built-in default, else the parameters to change (bench --config: the others keep
# the default's values for each layer); each LAYER is NAME=PROBLEM (e.g. s2a=N=32,C=64,H=56,...). Every row is
# checked against the reference by bench. $OUT/summary.txt lists each (layer, direction) fastest first.
# Binaries in .carry/bin (scripts/gpu/pack.sh): OUT=dir SPEC=file scripts/gpu/config_sweep.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.carry/bin}
OUT=${OUT:-/tmp/convtune-out}
SPEC=${SPEC:?SPEC=file of DIRECTION FAMILY CONFIG LAYER... lines}
DEVICE=${DEVICE:-cuda:0} REPEATS=${REPEATS:-20}
mkdir -p "$OUT/sweep" "$OUT/empty"
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVTUNE_CACHE_DIR=${CONVTUNE_CACHE_DIR:-/tmp/convtune-cache}
# Built-in defaults only: no tuning entry may stand in for a default.
export CONVTUNE_SHIPPED_TUNING_DIR=$OUT/empty CONVTUNE_TUNING_DB=$OUT/none.json
n=0
while read -r dir family config layers; do
  [[ -z "$dir" || "$dir" == \#* ]] && continue
  for l in $layers; do  # one process a layer, so a configuration a layer cannot take costs only that row
    n=$((n + 1))
    args=(--layer "${l#*=}")
    [ "$config" != - ] && args+=(--config "$config")
    timeout 120 "$BIN/convtune" bench "${args[@]}" --device "$DEVICE" --direction "$dir" --family "$family" \
      --repeats "$REPEATS" --out "$OUT/sweep/run$n.json" >"$OUT/sweep/run$n.log" 2>&1 ||
      echo "${l%%=*} $dir $family $config: exit $? ($(tail -1 "$OUT/sweep/run$n.log" | cut -c1-150))"
    echo "${l%%=*}|$family|$config" >"$OUT/sweep/run$n.spec"
  done
done <"$SPEC"
python3 - "$OUT/sweep" <<'PY' | tee "$OUT/summary.txt"
import glob, json, os, sys
rows = {}
for spec_path in glob.glob(os.path.join(sys.argv[1], 'run*.spec')):
    name, family, config = open(spec_path).read().strip().split('|')
    try:
        result = json.load(open(spec_path[:-5] + '.json'))['rows']
    except (OSError, ValueError):
        continue
    for r in result:
        if 'ms' in r:  # a row that did not run (its error is in the run's log) has no time
            rows.setdefault((name, r['direction']), []).append((r['ms'], family, config, r.get('check_rel_l2', '')))
for (name, direction), runs in sorted(rows.items()):
    runs.sort()
    print(f"{name} {direction}")
    for ms, family, config, err in runs:
        print(f"  {ms:9.4f} ms  {ms / runs[0][0]:5.2f}x  {family:14} {config}  (err {err})")
PY
