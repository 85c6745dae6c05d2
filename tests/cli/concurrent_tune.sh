#!/usr/bin/env bash
# Three `convtune tune` processes at once, on different layers, into one tuning database pre-filled with 10,000
# entries (11 MB, so saves take long enough to overlap): afterwards every old and every new entry must be there.
# Without the lock around read-merge-write, overlapping saves dropped each other's entries (16 of 24 once).
# Usage: concurrent_tune.sh CONVTUNE WORKDIR
set -u
bin=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
db="$work/tuning.json"
"$here/prefill_db.sh" "$db" 10000
export CONVTUNE_CACHE_DIR="$work/cache"
pids=()
for p in 1 2 3; do
  "$bin" tune --layer "N=1,C=$p,H=6,K=2,R=3" --layer "N=2,C=$p,H=5,K=3,R=3" --layer "N=1,C=$p,H=7,K=4,R=1" \
    --device opencl --family direct_tiled --direction fwd --max-candidates 1 --budget 120s --no-peak \
    --db "$db" --log "$work/log$p.json" >"$work/tune$p.out" 2>&1 &
  pids+=($!)
done
status=0
stored=0
for p in 1 2 3; do
  if ! wait "${pids[$((p - 1))]}"; then echo "tune $p failed:"; cat "$work/tune$p.out"; status=1; fi
  n=$(grep -oE '^[0-9]+ result\(s\) stored' "$work/tune$p.out" | grep -oE '^[0-9]+' || echo 0)
  echo "tune $p stored $n result(s)"
  stored=$((stored + n))
done
header=$("$bin" db --db "$db" list --user-only 2>&1 | head -1)
echo "$header"
prefilled=$("$bin" db --db "$db" list --user-only --device "Prefill GPU" | grep -c "Prefill GPU")
echo "prefilled entries still there: $prefilled of 10000"
expected=$((10000 + stored))
if [ "$stored" -ne 9 ]; then echo "FAIL: expected 9 new results (3 processes x 3 layers), got $stored"; status=1; fi
if [ "$prefilled" -ne 10000 ]; then echo "FAIL: prefilled entries lost"; status=1; fi
if ! grep -q ": $expected user entries" <<<"$header"; then echo "FAIL: expected $expected user entries"; status=1; fi
if compgen -G "$db.tmp.*" >/dev/null; then echo "FAIL: temporary files left: $(ls "$db".tmp.*)"; status=1; fi
[ $status -eq 0 ] && echo "concurrent_tune: all $expected entries present" && rm -rf "$work"
exit $status
