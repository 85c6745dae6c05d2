# Sourced by the GPU scripts: find_cudnn prints the path of PyTorch's libcudnn.so.9 (its wheel's nvidia/cudnn/lib,
# or torch/lib), exit status 1 when there is none.
find_cudnn() {
  python3 - <<'PY' 2>/dev/null
import glob, os, site, sys
dirs = []
try:
    import nvidia.cudnn as c
    dirs += [os.path.join(p, "lib") for p in c.__path__]
except Exception:
    pass
try:
    import torch
    dirs.append(os.path.join(os.path.dirname(torch.__file__), "lib"))
except Exception:
    pass
for s in site.getsitepackages() + [site.getusersitepackages()]:
    dirs.append(os.path.join(s, "nvidia", "cudnn", "lib"))
for d in dirs:
    hits = sorted(glob.glob(os.path.join(d, "libcudnn.so.9*")))
    if hits:
        print(hits[0]); sys.exit(0)
sys.exit(1)
PY
}
