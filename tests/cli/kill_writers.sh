#!/usr/bin/env bash
# kill -9 against writers: `convtune tune` (saving a tuning database of 10,000 entries) or `convtune train cnn`
# (saving a model), killed while its temporary file exists (between creating and renaming it; the slow_write
# shim widens that window to a fraction of a second) and at random moments. After every kill the file must load
# whole. A last run then finishes: its save must remove the temporaries the killed writers left, and keep
# everything. Usage: kill_writers.sh tune|train CONVTUNE SHIM WORKDIR [KILLS]
set -u
mode=$1 bin=$2 shim=$3 work=$4 kills=${5:-6}
here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/../data" && pwd)
rm -rf "$work" && mkdir -p "$work"
export CONVTUNE_CACHE_DIR="$work/cache" CONVTUNE_TUNING_DB="$work/unused-tuning.json"
if [ "$mode" = tune ]; then
  target="$work/tuning.json"
  "$here/prefill_db.sh" "$target" 10000
  writer=("$bin" tune --layer N=1,C=2,H=6,K=2,R=3 --device opencl --family direct_tiled --direction fwd
          --max-candidates 1 --budget 60s --no-peak --db "$target" --log "$work/log.json")
  # The file loads whole: db list reads it strictly and warns about anything else.
  check() { local out; out=$("$bin" db --db "$target" list --user-only 2>&1) && ! grep -q warning <<<"$out" &&
            grep -q ": 100[0-9][0-9] user entries" <<<"$out" || { echo "$out" | head -3; return 1; }; }
else
  target="$work/cnn.model"
  writer=("$bin" train cnn --device cpu --arch lenet-small --limit 200 --test-limit 100 --epochs 1 --out "$target")
  "${writer[@]}" >"$work/first.out" 2>&1 || { echo "the first training failed:"; cat "$work/first.out"; exit 1; }
  check() { "$bin" eval "$target" --device cpu --data "$data/tiny-fmnist" >"$work/eval.out" 2>&1 ||
            { tail -3 "$work/eval.out"; return 1; }; }
fi

status=0
during_write=0
for ((k = 1; k <= kills; ++k)); do
  LD_PRELOAD="$shim" "${writer[@]}" >"$work/run$k.out" 2>&1 &
  pid=$!
  when="at a random moment"
  if ((k % 2)); then
    # Wait for this writer's temporary file, then kill it before the rename.
    for ((i = 0; i < 6000; ++i)); do
      compgen -G "$target.tmp.$pid.*" >/dev/null && { when="during its write"; break; }
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.01
    done
  else
    sleep "0.$((RANDOM % 9 + 1))$((RANDOM % 10))"
  fi
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  [ "$when" = "during its write" ] && during_write=$((during_write + 1))
  if check; then echo "kill $k ($when): $target loads"; else echo "FAIL: kill $k ($when): $target does not load"; status=1; fi
done
left=$(compgen -G "$target.tmp.*" | wc -l)
echo "$during_write of $kills kills landed during a write; $left temporary file(s) left behind"
((during_write > 0)) || { echo "FAIL: no kill landed during a write: the test proved nothing"; status=1; }

"${writer[@]}" >"$work/last.out" 2>&1 || { echo "FAIL: the last run failed:"; tail -5 "$work/last.out"; status=1; }
check || { echo "FAIL: $target does not load after the last run"; status=1; }
if compgen -G "$target.tmp.*" >/dev/null; then
  echo "FAIL: the last save left temporaries behind: $(ls "$target".tmp.*)"; status=1
else
  echo "the last save removed the killed writers' temporaries"
fi
[ $status -eq 0 ] && rm -rf "$work"
exit $status
