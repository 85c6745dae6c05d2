"""An OpenCL bench run's rows against the cuDNN times of a CUDA bench run of the same layers on the same machine
(cuDNN cannot run beside an OpenCL device): per row both convtune times, cuDNN's, and OpenCL/cuDNN; then the
geometric mean and the worst of OpenCL/cuDNN and of CUDA/cuDNN over the rows both have, and OpenCL/CUDA.

usage: opencl_ratio.py CUDA.json OPENCL.json [--rows NAMES]   (NAMES: comma-separated layer names to keep)
"""
import json
import math
import sys


def rows(path):
    return {(r["layer"], r.get("direction", "-")): r for r in json.load(open(path))["rows"]}


def summary(label, ratios):
    if not ratios:
        return f"{label}: no rows"
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    above = sum(1 for r in ratios if r > 1.5)
    return f"{label}: geomean {geo:.3f} over {len(ratios)} rows, worst {max(ratios):.2f}, rows above 1.5: {above}"


def main(argv):
    keep = None
    if "--rows" in argv:
        i = argv.index("--rows")
        keep = set(argv[i + 1].split(","))
        argv = argv[:i] + argv[i + 2:]
    cuda, opencl = rows(argv[0]), rows(argv[1])
    print("| layer | dir | CUDA ms | OpenCL ms | cuDNN ms (CUDA run) | OpenCL/cuDNN | OpenCL algorithm |")
    print("|---|---|---|---|---|---|---|")
    ocl_ratios, cuda_ratios, between = [], [], []
    for key, c in cuda.items():
        if keep and key[0] not in keep:
            continue
        o = opencl.get(key, {})
        ref = c.get("against", {}).get("cudnn", {}).get("ms")
        cms, oms = c.get("ms"), o.get("ms")
        ratio = oms / ref if oms and ref else None
        if ratio:
            ocl_ratios.append(ratio)
        if cms and ref:
            cuda_ratios.append(cms / ref)
        if cms and oms:
            between.append(oms / cms)
        algo = o.get("algorithm", "n/a").split("[")[0]
        fmt = lambda v: f"{v:.3f}" if v else "n/a"
        print(f"| {key[0]} | {key[1]} | {fmt(cms)} | {fmt(oms)} | {fmt(ref)} | {fmt(ratio)} | {algo} |")
    print(summary("OpenCL/cuDNN", ocl_ratios))
    print(summary("CUDA/cuDNN", cuda_ratios))
    print(summary("OpenCL/CUDA", between))


if __name__ == "__main__":
    main(sys.argv[1:])
