#!/usr/bin/env bash
# Peak memory stays in proportion to the problem: extreme strides, dilations, paddings and channel counts in every
# direction on the CPU backend, each under an address-space limit (ulimit -v) and a time-out. Each either runs and
# checks out against the reference (exit 0) or is refused by name (exit 2, a message naming the limit it passes);
# none is killed, runs out of memory or ends in "unexpected error". The one-pixel layer at stride 16384
# (layer-bwd-data-stride-memory.txt) took 4.2 GB and 18 s before.
# Usage: memory_bounds.sh CONVTUNE REPRO_DIR
set -u
bin=$1 repro=$2
limit_kb=1000000  # 1 GB of address space: the process itself needs under 100 MB of it
layers=(
  "$(cat "$repro/layer-bwd-data-stride-memory.txt")"
  "N=1,C=1,H=1,K=1,R=1,stride=2147483647"
  "N=1,C=1,H=40000,W=1,K=1,R=1,S=1,stride=40000"
  "N=1,C=4,H=1000,W=1,K=4,R=1,S=1,groups=4,stride=1000000"
  "N=64,C=1,H=1,K=1,R=1,pad=3000,stride=3000"
  "N=1,C=1,H=3,K=1,R=3,dilation=1000000,pad=1000000"
  "N=1,C=2,H=2,K=2,R=2,dilation=2147483647,pad=1073741823"
  "N=1,C=1,H=1,K=1,R=1,pad=30000"
  "N=1,C=262144,H=1,K=1,R=1"
  "N=1,C=1,H=1,K=262144,R=1"
  "N=1,C=65536,H=1,K=65536,R=1"
)
failures=0
run() {  # run WHAT ARGS...: one bench under the limits, judged
  local what=$1
  shift
  local out status
  out=$( (ulimit -v $limit_kb; exec timeout 120 "$bin" bench "$@" --device cpu --repeats 1 --warmup 0) 2>&1)
  status=$?
  if [ $status -eq 0 ] && ! grep -q "FAILED" <<<"$out"; then
    echo "ok      $what"
  elif [ $status -eq 2 ] && grep -qE "too large|workspace limit|host memory|more than the [0-9]+ that backends index" <<<"$out" &&
       ! grep -q "unexpected error" <<<"$out"; then
    echo "refused $what: $(grep -oE "(error|FAILED): .*" <<<"$out" | head -1 | cut -c1-200)"
  else
    echo "BAD     $what: exit $status"
    printf '%s\n' "$out" | tail -5
    failures=$((failures + 1))
  fi
}
for layer in "${layers[@]}"; do
  for direction in fwd bwd-data bwd-filter; do
    run "$layer $direction" --layer "$layer" --direction "$direction"
    # Under a tight workspace limit the plan is replaced or refused before anything is allocated.
    run "$layer $direction --workspace-limit 16M" --layer "$layer" --direction "$direction" --workspace-limit 16M
  done
done
echo "memory_bounds.sh: $failures bad of $((${#layers[@]} * 6)) runs"
[ $failures -eq 0 ]
