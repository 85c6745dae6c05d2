#!/usr/bin/env bash
# Copies the binaries the GPU run needs into .carry/bin (git-ignored), to be carried to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .carry/bin && mkdir -p .carry/bin
cp build/convtune build/tests/*_test .carry/bin/
du -sh .carry
