# Sourced by the GPU drivers: say (to stdout and $SUMMARY), left (seconds of $BUDGET left since $START) and
# run SECONDS LOG command... (at most SECONDS, less when the budget is running out; SIGINT first, so pytest and the
# examples still print what they have; the exit status and duration go to the log and the summary). Also the
# drivers' common start: $OUT made, $SUMMARY emptied, $START set, and $PY PyTorch's Python where it is installed.
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
START=$(date +%s)
PY=python3
[ -x /opt/torch/.venv/bin/python ] && PY=/opt/torch/.venv/bin/python
say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $((${BUDGET:-520} - ($(date +%s) - START))); }
run() {
  local limit=$1 log=$2
  shift 2
  local remaining
  remaining=$(left)
  ((limit > remaining - 10)) && limit=$((remaining - 10))
  if ((limit < 5)); then
    say "skipped (out of time): $*"
    return 124
  fi
  local t0=$SECONDS
  timeout -s INT -k 15 "$limit" "$@" >>"$log" 2>&1
  local status=$?
  echo "(exit $status after $((SECONDS - t0)) s: $*)" >>"$log"
  say "exit $status after $((SECONDS - t0)) s: $*"
  return $status
}
