#!/usr/bin/env bash
# Runs a command and checks both its exit status (zero or non-zero) and that its output matches a regex.
# Usage: expect.sh ok|fail REGEX command args...   (REGEX may hold several patterns separated by "@@", all must match)
set -u
want=$1 regex=$2
shift 2
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [ "$want" = ok ] && [ $status -ne 0 ]; then echo "expect.sh: exit status $status, expected 0"; exit 1; fi
if [ "$want" = fail ] && [ $status -eq 0 ]; then echo "expect.sh: exit status 0, expected failure"; exit 1; fi
IFS=$'\n' read -r -d '' -a patterns < <(printf '%s' "${regex//@@/$'\n'}"; printf '\0')
for pattern in "${patterns[@]}"; do
  if ! grep -Eq -- "$pattern" <<<"$output"; then echo "expect.sh: output does not match /$pattern/"; exit 1; fi
done
exit 0
