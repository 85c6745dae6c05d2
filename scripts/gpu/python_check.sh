#!/usr/bin/env bash
# Issue 16's GPU checks and measurements (the Python package, convtune inside PyTorch, several GPUs), run with what
# scripts/gpu/pack_python.sh put in .carry/py (layout there). Two parts, each within 9 minutes:
#   PART=single (one GPU): the package's tests on CUDA (custom operators, opcheck, streams, NumPy through copies);
#     ResNet-18 on Fashion-MNIST: its convolutions tuned in-process, then 300 steps with cuDNN (FP32) and with
#     convtune from the same weights and batches (first-step gradients compared), plus cuDNN with TF32 for
#     reference; the LeNet CNN for 2 epochs with both.
#   PART=multi (two GPUs): `convtune tune --suite resnet18` on cuda:0, then on cuda:0,cuda:1 (fresh program caches
#     both times), wall times and agreement of the results; ResNet-18 trained with convtune (and with cuDNN) on 1
#     GPU and data-parallel on 2 (torchrun, NCCL): throughput and scaling.
#   PART=resnet50 (every GPU of the host, 2 or more): torchvision ResNet-50 on synthetic 224x224 images, BF16
#     autocast, channels-last, optimize()'s fused blocks, batch 64 per GPU, $STEPS steps (default 300): stock
#     PyTorch and convtune on one GPU and data-parallel on all (torchrun, NCCL): images/s, scaling, loss curves;
#     then tune_model(distributed=True) of its convolutions over all GPUs against one GPU: wall time, entries.
# Logs go to $OUT (at most 6 files); the end of stdout is a summary (also $OUT/summary.txt).
#   PART=single|multi|resnet50 OUT=/somewhere scripts/gpu/python_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
PART=${PART:-single}
OUT=${OUT:-/tmp/convtune-python-out}
CARRY=$PWD/.carry/py
source scripts/gpu/budget.sh  # $SUMMARY, $START, $PY; say, left, run
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CONVTUNE_DATA=$CARRY/data CONVTUNE_CACHE_DIR=/tmp/convtune-py-cache
export PYTHONPATH=$CARRY/site${PYTHONPATH:+:$PYTHONPATH}
export LD_LIBRARY_PATH=$CARRY/site/convtune/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
CLI=$CARRY/bin/convtune

[ -d "$CARRY/site/convtune" ] || { echo "python_check: $CARRY is missing: run scripts/gpu/pack_python.sh first" >&2; exit 2; }
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$SUMMARY"
# The carried extension is a cp312-abi3 build; a Python it cannot serve builds the package here from the work
# tree against the carried library (g++, CMake, nanobind and scikit-build-core are in PyTorch's environment).
if ! $PY -c "import convtune" >"$OUT/setup.log" 2>&1; then
  say "the carried package does not import ($(tail -1 "$OUT/setup.log")): building it from source"
  run 150 "$OUT/setup.log" $PY -m pip install --no-build-isolation --no-deps --target /tmp/convtune-site . \
    --config-settings=cmake.define.CONVTUNE_LIBRARY="$CARRY/site/convtune/lib/libconvtune.so.0"
  export PYTHONPATH=/tmp/convtune-site:$PYTHONPATH
fi
$PY - <<'PY' 2>&1 | tee -a "$SUMMARY"
import convtune, torch, numpy, sys
import convtune.torch as ct
print(f"python {sys.version.split()[0]}, torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
      f"{torch.backends.cudnn.version()}), numpy {numpy.__version__}, convtune {convtune.__version__} from "
      f"{convtune.__file__}, custom ops: {ct.uses_custom_ops}")
print("devices:", ", ".join(f"{d.id} {d.name}" for d in convtune.devices()))
PY

pytest_result() {  # pytest's closing line
  grep -E "[0-9]+ (passed|failed|error)" "$1" | tail -1 | tee -a "$SUMMARY"
}
summaries() {  # the examples' summary and gradient lines of a log
  grep -hE "^(summary:|first-step|tuned [0-9]+ tasks)" "$1" | sed 's/^/  /' | tee -a "$SUMMARY"
}

if [ "$PART" = single ]; then
  say "== pytest on the GPU machine"
  run 170 "$OUT/pytest.log" $PY -m pytest -q -p no:cacheprovider -rs python/tests
  pytest_result "$OUT/pytest.log"
  grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -10 | tee -a "$SUMMARY"

  say "== ResNet-18, 300 steps of batch 128: tuned convtune vs cuDNN FP32 (same weights and batches)"
  CONVTUNE_TUNING_DB=/tmp/convtune-resnet-db.json run 250 "$OUT/resnet.log" \
    $PY examples/python/train.py --model resnet18 --conv both --steps 300 --batch 128 --tune 90 \
    --tune-family implicit_gemm --log-every 50
  summaries "$OUT/resnet.log"
  say "== ResNet-18 with cuDNN allowed TF32 (PyTorch's default), 100 steps"
  run 45 "$OUT/resnet-tf32.log" $PY examples/python/train.py --model resnet18 --conv torch --tf32 --steps 100 \
    --batch 128 --log-every 0
  summaries "$OUT/resnet-tf32.log"

  say "== LeNet CNN, 2 epochs of batch 64 on 20,000 images"
  CONVTUNE_TUNING_DB=/tmp/convtune-resnet-db.json run 80 "$OUT/lenet.log" \
    $PY examples/python/train.py --model lenet --conv both --epochs 2 --batch 64 --log-every 0
  grep -E "epoch" "$OUT/lenet.log" | tee -a "$SUMMARY"
  summaries "$OUT/lenet.log"
elif [ "$PART" = resnet50 ]; then
  gpus=$(nvidia-smi -L | wc -l)
  STEPS=${STEPS:-300}
  ARGS="--model resnet50 --data synthetic --amp bf16 --channels-last --fuse --batch 64 --steps $STEPS --log-every 50"
  say "== ResNet-50, BF16 autocast, channels-last, fused blocks: 1 GPU vs $gpus (torchrun, NCCL), $STEPS steps"
  for conv in torch convtune; do
    run 150 "$OUT/ddp.log" $PY examples/python/train.py $ARGS --conv $conv
    run 200 "$OUT/ddp.log" $PY -m torch.distributed.run --standalone --nproc_per_node "$gpus" \
      examples/python/train.py $ARGS --conv $conv
  done
  summaries "$OUT/ddp.log"
  grep -E "step +[0-9]+/" "$OUT/ddp.log" | tee -a "$SUMMARY"  # the loss curves, every 50 steps
  say "== tune_model of ResNet-50's convolutions (batch 64, bf16 channels-last): one GPU, then distributed over $gpus"
  cat >/tmp/tune_resnet50.py <<'PY'
import os, sys, time, torch, torchvision, convtune, convtune.torch as ct
distributed = "RANK" in os.environ
if distributed:
    torch.distributed.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
ct.patch(model)
x = torch.randn(64, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
db = convtune.TuningDatabase(sys.argv[1] + ("" if not distributed else f".rank{os.environ['RANK']}"), shipped=False)
t0 = time.perf_counter()
with torch.autocast("cuda", dtype=torch.bfloat16):
    results = ct.tune_model(model, x, budget=float(sys.argv[2]), database=db, distributed=distributed,
                            max_candidates=8)
if not distributed or os.environ["RANK"] == "0":
    print(f"tune_model distributed={distributed}: {time.perf_counter() - t0:.1f} s wall, {len(results)} tasks here, "
          f"{len(db.entries())} entries in the database")
PY
  rm -rf /tmp/convtune-py-cache
  run 200 "$OUT/tune.log" $PY /tmp/tune_resnet50.py /tmp/tune-one.json 120
  rm -rf /tmp/convtune-py-cache
  run 200 "$OUT/tune.log" $PY -m torch.distributed.run --standalone --nproc_per_node "$gpus" /tmp/tune_resnet50.py \
    /tmp/tune-all.json 120
  grep -E "^tune_model" "$OUT/tune.log" | tee -a "$SUMMARY"
else
  gpus=$(nvidia-smi -L | wc -l)
  ((gpus >= 2)) || say "PART=multi expects two GPUs; this machine has $gpus"
  say "== pytest's multi-GPU test (current device kept, tensors on cuda:1)"
  run 60 "$OUT/pytest.log" $PY -m pytest -q -p no:cacheprovider python/tests/test_torch.py -k "current_stream"
  pytest_result "$OUT/pytest.log"

  CANDIDATES=${CANDIDATES:-4}
  say "== convtune tune --suite resnet18 --direction all --family implicit_gemm --strategy random --max-candidates $CANDIDATES"
  for devices in cuda:0 cuda:0,cuda:1; do
    tag=${devices//[:,]/}
    rm -rf "/tmp/convtune-cache-$tag" "/tmp/convtune-tune-$tag.json"
    t0=$(date +%s%N)
    CONVTUNE_CACHE_DIR=/tmp/convtune-cache-$tag run 200 "$OUT/tune.log" "$CLI" tune --suite resnet18 --direction all \
      --family implicit_gemm --strategy random --max-candidates "$CANDIDATES" --budget 30m --no-peak \
      --device "$devices" --db "/tmp/convtune-tune-$tag.json" --log "/tmp/convtune-tune-$tag-log.json"
    status=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    say "$(printf 'tune on %-13s %4d.%d s wall (exit %s)' "$devices" $((ms / 1000)) $((ms % 1000 / 100)) "$status")"
  done
  $PY - /tmp/convtune-tune-cuda0.json /tmp/convtune-tune-cuda0cuda1.json <<'PY' 2>&1 | tee -a "$SUMMARY"
import sys, statistics, convtune
one, two = ({(e["problem"], e["family"]): e for e in convtune.TuningDatabase(p, shipped=False).entries()}
            for p in sys.argv[1:])
same = [k for k in one if k in two and one[k]["parameters"] == two[k]["parameters"]]
ratios = [two[k]["time_ms"] / one[k]["time_ms"] for k in one if k in two]
print(f"results: {len(one)} tasks on 1 GPU, {len(two)} on 2; {len(same)} chose the same parameters; best time 2-GPU "
      f"run / 1-GPU run: median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}"
      if ratios else "results: nothing to compare")
PY

  say "== ResNet-18 data-parallel: 1 GPU vs 2 GPUs (torchrun, NCCL), batch 128 per GPU, 100 steps"
  export CONVTUNE_TUNING_DB=/tmp/convtune-tune-cuda0cuda1.json CONVTUNE_CACHE_DIR=/tmp/convtune-cache-cuda0cuda1
  for conv in convtune torch; do
    run 70 "$OUT/ddp.log" $PY examples/python/train.py --model resnet18 --conv $conv --steps 100 --batch 128 \
      --log-every 0
    run 90 "$OUT/ddp.log" $PY -m torch.distributed.run --standalone --nproc_per_node 2 examples/python/train.py \
      --model resnet18 --conv $conv --steps 100 --batch 128 --log-every 0
  done
  summaries "$OUT/ddp.log"
  $PY - "$OUT/ddp.log" <<'PY' 2>&1 | tee -a "$SUMMARY"
import re, sys
rates = {}
for line in open(sys.argv[1]):
    m = re.match(r"summary: conv=(\S+) .* processes=(\d+) .* images_per_s=([\d.]+)", line)
    if m:
        rates[(m[1], int(m[2]))] = float(m[3])
for conv in ("convtune", "torch"):
    if (conv, 1) in rates and (conv, 2) in rates:
        print(f"scaling {conv}: {rates[(conv, 2)]:.0f} / {rates[(conv, 1)]:.0f} images/s = "
              f"{rates[(conv, 2)] / rates[(conv, 1)]:.2f}x on 2 GPUs")
PY
fi
echo
echo "=== summary (PART=$PART, $(($(date +%s) - START)) s)"
cat "$SUMMARY"
