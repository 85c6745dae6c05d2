#!/usr/bin/env bash
# Set up, build, and run every test (unit, conformance on every CPU path and OpenCL device, command line).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest --output-on-failure -j 2
