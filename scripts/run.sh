#!/usr/bin/env bash
# The main job, on the best device present (a GPU through CUDA or OpenCL, else the CPU backend's cpu_blocked): set up,
# list the devices, tune the CNN's convolution layers within a short budget, train the CNN on Fashion-MNIST,
# evaluate it on the 10,000 test images (accuracy and each layer's op time), then time the seed layers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build/convtune devices
# What --device best picks, read from the machine-readable listing rather than scraped from the text.
build/convtune devices --json >build/devices.json
best_is_gpu=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["best"]["is_gpu"])' build/devices.json)
# The full LeNet on a GPU; on a CPU a narrower one on a third of the training set keeps the job to minutes.
if [[ "$best_is_gpu" == True ]]; then
  train=(--arch lenet --epochs "${EPOCHS:-8}")
  tune_layers=(--layer N=64,C=1,H=28,K=32,R=5,pad=2 --layer N=64,C=32,H=14,K=64,R=5,pad=2)
else
  train=(--arch lenet-small --epochs "${EPOCHS:-1}" --limit 20000)
  tune_layers=(--layer N=64,C=1,H=28,K=8,R=5,pad=2 --layer N=64,C=8,H=14,K=16,R=5,pad=2)
fi
# Tuned parameters go to the user's tuning database, where the CNN's plans find them.
build/convtune tune "${tune_layers[@]}" --direction all --device best --budget "${TUNE_BUDGET:-60s}" --no-peak ||
  echo "run: tuning failed; the CNN uses built-in defaults"
build/convtune train cnn --device best "${train[@]}" --model build/cnn.model
build/convtune eval build/cnn.model --device best
build/convtune bench --suite seeds --device best --batch-scale 0.01 --warmup 1 --repeats 3 --out build/bench-seeds.csv "$@"
