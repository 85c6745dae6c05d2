#!/usr/bin/env bash
# Runs a command and checks both its exit status (zero or non-zero) and that its output matches a regex.
# Usage: expect.sh ok|fail REGEX command args...
set -u
want=$1 regex=$2
shift 2
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [ "$want" = ok ] && [ $status -ne 0 ]; then echo "expect.sh: exit status $status, expected 0"; exit 1; fi
if [ "$want" = fail ] && [ $status -eq 0 ]; then echo "expect.sh: exit status 0, expected failure"; exit 1; fi
if ! grep -Eq -- "$regex" <<<"$output"; then echo "expect.sh: output does not match /$regex/"; exit 1; fi
exit 0
