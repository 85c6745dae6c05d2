#!/usr/bin/env bash
# The main job: set up, list the devices, then benchmark the seed layers (seed 000's 5x5 layer, seed 003's
# Fashion-MNIST layers) in all three directions on the best device that has convolution kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build/convtune devices
# Batch scaled to 1% so the run takes a minute or two on a CPU; pass other options through, e.g. --batch-scale 1.
build/convtune bench --suite seeds --backend best --batch-scale 0.01 --warmup 1 --repeats 3 --out build/bench-seeds.csv "$@"
