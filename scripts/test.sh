#!/usr/bin/env bash
# Set up, build, and run every test (unit, conformance on every CPU path and OpenCL device, command line),
# then print the conformance harness's counts of checked cases.
set -eo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
status=0
ctest --output-on-failure -j 2 2>&1 | tee ctest-output.log || status=$?
echo
echo "conformance summary:"
grep -hE "^conformance: .*(checks|configurations)" Testing/Temporary/LastTest.log || echo "  (no conformance lines found)"
# ctest's own closing line last, where CI reads it.
grep -E "tests passed, [0-9]+ tests failed" ctest-output.log | tail -1
exit $status
