#!/usr/bin/env bash
# The networks driver: convtune inside PyTorch on the GPU machine, with what scripts/gpu/pack.sh and pack_python.sh put
# in .carry. Stages (STAGES, space-separated; default all but first and layers):
#   conformance  the families that read channels-last themselves ($CONF_FAMILIES, default implicit_gemm_nhwc_wgmma,
#                implicit_gemm_shifted_wgmma, col2im_wgmma, depthwise_nhwc) on the conformance list's channels-last
#                cases, bf16 and tf32 (depthwise_nhwc: also fp32), on cuda:0
#   epilogue     every family's fused epilogues (bias, residual, ReLU, ReLU6) on the epilogue cases, on cuda:0
#   pytest       $PYTESTS on CUDA (default python/tests/test_torch.py test_torch_graphs.py test_threads.py: layouts,
#                precision settings, streams, custom operators, CUDA graphs, torch.compile, threads)
#   models       examples/python/bench_models.py $MODELS in $MODES (batch $BATCH, $STEPS timed steps a side, default
#                20): $SIDES (default stock,convtune), the check
#                against float64, and with PROFILE=N the N costliest kernels of each side
#   first        the first training step of a fresh process per side (empty program cache), $FIRST_MODELS in
#                $FIRST_MODES
#   layers       bench --suite resnet50 --math bf16 --layout nhwc --against cudnn (one direction set, $LAYER_DIRS),
#                then each entry FAMILY[:DIRECTION] of $LAYER_FAMILIES alone on the same layers
# Logs go to $OUT; the end of stdout is a summary (also $OUT/summary.txt).
#   OUT=/somewhere STAGES="conformance models" MODELS="resnet50" scripts/gpu/torch_models.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/convtune-models-out}
STAGES=${STAGES:-"conformance pytest models"}
MODELS=${MODELS:-"resnet50 mobilenet_v2"}
MODES=${MODES:-"fp32,tf32,bf16,bf16-cl"}
FIRST_MODES=${FIRST_MODES:-"bf16-cl"}
FIRST_MODELS=${FIRST_MODELS:-$MODELS}
BATCH=${BATCH:-64}
PROFILE=${PROFILE:-0}
LAYER_DIRS=${LAYER_DIRS:-all}
BUDGET=${BUDGET:-560}
PYTESTS=${PYTESTS:-"python/tests/test_torch.py python/tests/test_torch_graphs.py python/tests/test_threads.py \
python/tests/test_fusion.py"}
SIDES=${SIDES:-stock,convtune}
source scripts/gpu/budget.sh  # $SUMMARY, $START, $PY; say, left, run
CARRY=$PWD/.carry/py
export PYTHONPATH=$CARRY/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$CARRY/site/convtune/lib:$PWD/.carry/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVTUNE_CACHE_DIR=${CONVTUNE_CACHE_DIR:-/tmp/convtune-cache}
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_SHIPPED_TUNING_DIR=$PWD/tuning
export CONVTUNE_TUNING_DB=/tmp/convtune-user-tuning.json  # the shipped tuning alone, no stray user entries

has() { [[ " $STAGES " == *" $1 "* ]]; }

[ -d "$CARRY/site/convtune" ] || { echo "torch_models: $CARRY is missing: run scripts/gpu/pack_python.sh" >&2; exit 2; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee -a "$SUMMARY"
$PY -c "import torch, torchvision, convtune; print('torch', torch.__version__, 'torchvision', torchvision.__version__, \
'cudnn', torch.backends.cudnn.version(), 'convtune', convtune.__version__)" 2>&1 | tee -a "$SUMMARY"

if has conformance; then
  # The three families in parallel (NVRTC compiles on the host's cores).
  for f in ${CONF_FAMILIES:-implicit_gemm_nhwc_wgmma implicit_gemm_shifted_wgmma col2im_wgmma depthwise_nhwc}; do
    CONVTUNE_CONFORMANCE_CASES=nhwc CONVTUNE_CONFORMANCE_PRECISIONS=bf16,tf32,fp32 CONVTUNE_CONFORMANCE_DEVICES=cuda:0 \
      run 240 "$OUT/conformance_$f.log" .carry/bin/family_conformance_test --gtest_filter="*/${f}_*" &
  done
  wait
  for f in "$OUT"/conformance_*.log; do
    grep -hE "^conformance: |FAILED|Failure" "$f" | head -20 | tee -a "$SUMMARY"
  done
fi

if has epilogue; then
  CONVTUNE_CONFORMANCE_DEVICES=cuda:0 run 240 "$OUT/epilogue.log" .carry/bin/family_conformance_test \
    --gtest_filter="*FamilyEpilogue*"
  grep -hE "^epilogue conformance: |FAILED|Failure|PASSED" "$OUT/epilogue.log" | head -40 | tee -a "$SUMMARY"
fi

if has pytest; then
  run 240 "$OUT/pytest.log" $PY -m pytest -q -p no:cacheprovider -rs $PYTESTS
  tail -5 "$OUT/pytest.log" | tee -a "$SUMMARY"
fi

if has models; then
  run 420 "$OUT/models.log" $PY examples/python/bench_models.py $MODELS --modes "$MODES" --batch "$BATCH" \
    --steps "${STEPS:-20}" --new-batch $((BATCH * 3 / 4)) --profile "$PROFILE" --sides "$SIDES" --out "$OUT/models.json" \
    --markdown "$OUT/models.md"
  grep -E "^\||^profile|^  " "$OUT/models.log" | tail -120 | tee -a "$SUMMARY"
fi

if has first; then
  run 300 "$OUT/first.log" $PY examples/python/bench_models.py $FIRST_MODELS --modes "$FIRST_MODES" --batch "$BATCH" \
    --steps 5 --warmup 2 --inference-batches "" --no-check --first-step --out "$OUT/first.json"
  grep -E "^\|" "$OUT/first.log" | tail -8 | tee -a "$SUMMARY"
fi

if has layers; then
  # PyTorch's own cuDNN, the one its users run (the system's may be older).
  source scripts/gpu/find_cudnn.sh
  CONVTUNE_CUDNN_LIBRARY=$(PATH=$(dirname "$PY"):$PATH find_cudnn) && export CONVTUNE_CUDNN_LIBRARY
  # The plan's choice against cuDNN, then each of $LAYER_FAMILIES alone on the same layers.
  run 300 "$OUT/layers.log" .carry/bin/convtune bench --suite resnet50 --math bf16 --layout nhwc --device cuda:0 \
    --direction "$LAYER_DIRS" --against cudnn --out "$OUT/layers.json"
  tail -80 "$OUT/layers.log" | tee -a "$SUMMARY"
  for entry in ${LAYER_FAMILIES:-}; do
    f=${entry%%:*} d=$LAYER_DIRS
    [[ $entry == *:* ]] && d=${entry#*:}
    run 200 "$OUT/layers_${f}_$d.log" .carry/bin/convtune bench --suite resnet50 --math bf16 --layout nhwc \
      --device cuda:0 --direction "$d" --family "$f" --out "$OUT/layers_${f}_$d.json"
    tail -30 "$OUT/layers_${f}_$d.log" | tee -a "$SUMMARY"
  done
fi
say "torch_models: $(($(date +%s) - START)) s"
