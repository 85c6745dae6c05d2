#!/usr/bin/env bash
# The thread tests many times in a row: tests/threads (one plan from 8 threads x 25 calls, CPU backend and PoCL,
# outputs compared bit for bit with single-threaded runs) --gtest_repeat times, then the Python reproducer
# (tests/data/repro/py-plan-thread-race.py: one Plan, 10 threads x 100 calls, against NumPy) as many times.
# Usage: scripts/thread_tests.sh [REPEATS]   (default 20; needs build/ and .venv from scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-20}
build/tests/thread_tests --gtest_repeat="$repeats" --gtest_brief=1 | grep -E "PASSED|FAILED" | sort | uniq -c
wrong=0
for ((i = 1; i <= repeats; ++i)); do
  line=$(.venv/bin/python tests/data/repro/py-plan-thread-race.py 10 100 shared | tail -1)
  grep -q "wrong=0 " <<<"$line" || { echo "run $i: $line"; wrong=$((wrong + 1)); }
done
echo "py-plan-thread-race.py 10 100 shared: $repeats runs of 1,000 calls, $wrong with a wrong output"
((wrong == 0))
