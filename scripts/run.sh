#!/usr/bin/env bash
# The main job, on the best device present (a GPU through CUDA or OpenCL, else the CPU backend's cpu_blocked): set up,
# list the devices, tune the CNN's convolution layers within a short budget, train the CNN on Fashion-MNIST,
# evaluate it on the 10,000 test images (accuracy and each layer's op time), then time the seed layers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build/convtune devices | tee build/devices.txt
best=$(sed -n 's/^best device: \([^ ]*\).*/\1/p' build/devices.txt)
# The full LeNet on a GPU; on a CPU a narrower one on a third of the training set keeps the job to minutes.
if [[ "$best" == cuda* ]] || grep -qE "^$best .*(NVIDIA|AMD Radeon|Intel.*Graphics)" build/devices.txt; then
  train=(--arch lenet --epochs "${EPOCHS:-8}")
  tune_layers=(--layer N=64,C=1,H=28,K=32,R=5,pad=2 --layer N=64,C=32,H=14,K=64,R=5,pad=2)
else
  train=(--arch lenet-small --epochs "${EPOCHS:-1}" --limit 20000)
  tune_layers=(--layer N=64,C=1,H=28,K=8,R=5,pad=2 --layer N=64,C=8,H=14,K=16,R=5,pad=2)
fi
# Tuned parameters go to the user's tuning database, where the CNN's plans find them.
build/convtune tune "${tune_layers[@]}" --direction all --device best --budget "${TUNE_BUDGET:-60s}" --no-peak ||
  echo "run: tuning failed; the CNN uses built-in defaults"
build/convtune train cnn --backend best "${train[@]}" --out build/cnn.model
build/convtune eval build/cnn.model --backend best
build/convtune bench --suite seeds --backend best --batch-scale 0.01 --warmup 1 --repeats 3 --out build/bench-seeds.csv "$@"
