#!/usr/bin/env bash
# The tuning budget holds: runs `convtune tune ... --budget B` and checks that the whole command ended within
# B + SLACK seconds and that it printed something within the first FIRST seconds (progress from the start).
# Usage: tune_budget.sh BUDGET_S SLACK_S FIRST_S convtune tune args...   (the script adds --budget BUDGET_S)
set -u
budget=$1 slack=$2 first=$3
shift 3
log=$(mktemp)
start=$(date +%s%3N)
# Each line stamped with the milliseconds since the start, so the first one's time is known.
"$@" --budget "${budget}s" 2>&1 | while IFS= read -r line; do
  printf '%d %s\n' "$(( $(date +%s%3N) - start ))" "$line"
done >"$log"
status=${PIPESTATUS[0]}
elapsed=$(( $(date +%s%3N) - start ))
cat "$log"
first_line=$(head -1 "$log" | cut -d' ' -f1)
echo "tune_budget.sh: exit $status, ${elapsed} ms in all (budget ${budget} s + ${slack} s), first output at ${first_line:-never} ms"
[ "$status" -eq 0 ] || { echo "tune_budget.sh: the run failed"; exit 1; }
(( elapsed <= (budget + slack) * 1000 )) || { echo "tune_budget.sh: over budget"; exit 1; }
[ -n "$first_line" ] && (( first_line <= first * 1000 )) || { echo "tune_budget.sh: no output in the first $first s"; exit 1; }
exit 0
