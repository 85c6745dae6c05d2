#!/usr/bin/env bash
# Set up, build, and run every test (unit, conformance on every CPU path and OpenCL device, command line),
# then print the conformance harness's counts of checked cases.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
status=0
ctest --output-on-failure -j 2 || status=$?
echo
echo "conformance summary:"
grep -hE "^conformance: .*(checks|configurations)" Testing/Temporary/LastTest.log || echo "  (no conformance lines found)"
exit $status
