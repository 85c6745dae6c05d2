#!/usr/bin/env bash
# Runs a command and checks both its exit status and that its output matches a regex.
# Usage: expect.sh ok|fail REGEX command args...   (REGEX may hold several patterns separated by "@@", all must match)
#   ok: exit status 0. fail: exit status 2, convtune's status for bad input: a crash (a signal, status 128+N), an
#   "unexpected error" (status 3) or any other status is not the named refusal bad input must get.
# Either way the output must not say "unexpected error": that is for convtune's own bugs, never for input.
set -u
want=$1 regex=$2
shift 2
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [ "$want" = ok ] && [ $status -ne 0 ]; then echo "expect.sh: exit status $status, expected 0"; exit 1; fi
if [ "$want" = fail ] && [ $status -ne 2 ]; then echo "expect.sh: exit status $status, expected 2 (bad input)"; exit 1; fi
if grep -q "unexpected error" <<<"$output"; then echo "expect.sh: the output says 'unexpected error'"; exit 1; fi
IFS=$'\n' read -r -d '' -a patterns < <(printf '%s' "${regex//@@/$'\n'}"; printf '\0')
for pattern in "${patterns[@]}"; do
  if ! grep -Eq -- "$pattern" <<<"$output"; then echo "expect.sh: output does not match /$pattern/"; exit 1; fi
done
exit 0
