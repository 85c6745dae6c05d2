#!/usr/bin/env bash
# Runs a sanitizer test binary and, only when LeakSanitizer's own tracer crashed while suspending threads for the
# exit-time leak check ("LeakSanitizer has encountered a fatal error" after every test passed: an intermittent fault
# of LSan's thread suspension, google/sanitizers#1353, seen once in 2 CI runs of asan_unit_tests here), runs it once
# more. A leak report, a sanitizer error or a failed test is never retried: those repeat, this fault does not.
#   lsan_retry.sh BINARY [ARGS...]
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -ne 0 ] && grep -q "LeakSanitizer has encountered a fatal error" "$out" &&
   ! grep -qE "ERROR: (LeakSanitizer: detected memory leaks|AddressSanitizer)|runtime error:|\[  FAILED  \]" "$out"; then
  echo "lsan_retry: LeakSanitizer's tracer crashed after the tests passed (not a finding); running once more"
  "$@"
  rc=$?
fi
exit "$rc"
