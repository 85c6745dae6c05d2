#!/usr/bin/env bash
# Issue 13's two tables: the stride1 suite (every 3x3/5x5 stride-1 layer of AlexNet, the seeds, unseen_shapes.txt,
# VGG and ResNet), all directions, the plan's choice with the shipped tuning, through CUDA beside cuDNN FP32
# (PART=cuda) and through NVIDIA's OpenCL (PART=opencl: opencl:1, as opencl:0 on the GPU machine is PoCL on its CPU;
# cuDNN cannot run beside an OpenCL device, so scripts/gpu/opencl_ratio.py sets these rows against the cuDNN times
# of a CUDA run on the same machine). Binaries in .carry/bin (scripts/gpu/pack.sh).
# PART=opencl-carried: the OpenCL run with the shipped CUDA entries restamped as opencl:1's own (an experiment: do
# configurations tuned through CUDA carry to NVIDIA's OpenCL on the same chip?).
#   PART=cuda|opencl|opencl-carried scripts/gpu/stride1_tables.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: stride1_tables.sh OUTDIR}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=/tmp/stride1-tables-db.json
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
case ${PART:-cuda} in
  cuda)
    timeout 560 "$BIN/convtune" bench --suite stride1 --direction all --family auto --device cuda:0 --warmup 2 \
      --repeats 10 --against cudnn --math fp32 --out "$OUT/stride1-cuda.json" >"$OUT/stride1-cuda.txt" 2>&1
    echo "cuda: exit $?" ;;
  opencl)
    "$BIN/convtune" devices 2>&1 | tee "$OUT/devices.txt" | grep -E "opencl:1" || echo "no opencl:1"
    timeout 580 "$BIN/convtune" bench --suite stride1 --direction all --family auto --device opencl:1 --warmup 2 \
      --repeats 10 --out "$OUT/stride1-opencl.json" >"$OUT/stride1-opencl.txt" 2>&1
    echo "opencl: exit $?" ;;
  opencl-carried)
    fingerprint=$(python3 - "$BIN/convtune" <<'PY'
import subprocess, sys
text = subprocess.run([sys.argv[1], "devices"], capture_output=True, text=True).stdout.split("\n")
at = next(i for i, line in enumerate(text) if line.strip().startswith("opencl:1"))
field = {l.split()[0]: " ".join(l.split()[1:]) for l in text[at + 1:at + 6]}
name = text[at].strip().split(None, 1)[1]
print(f"opencl|{field['vendor']}|{name}|{field['architecture']}|{field['driver']}")
PY
)
    echo "opencl:1 fingerprint: $fingerprint"
    python3 - "$fingerprint" "$PWD/tuning/nvidia-h200-cuda.json" "$OUT/carried-db.json" <<'PY'
import json, sys
fp, src, dst = sys.argv[1:]
backend, vendor, name, arch, driver = fp.split("|")
db = json.load(open(src))
for e in db["entries"]:
    e["device"] = {"fingerprint": fp, "backend": backend, "name": name, "vendor": vendor, "architecture": arch,
                   "driver_version": driver}
json.dump(db, open(dst, "w"), indent=1)
PY
    CONVTUNE_TUNING_DB=$OUT/carried-db.json timeout 580 "$BIN/convtune" bench --suite stride1 --direction all \
      --family auto --device opencl:1 --warmup 2 --repeats 10 --out "$OUT/stride1-opencl-carried.json" \
      >"$OUT/stride1-opencl-carried.txt" 2>&1
    echo "opencl-carried: exit $?" ;;
esac
tail -3 "$OUT"/stride1-*.txt
