"""Summarises scripts/gpu/split_tf32_check.sh's benches against issue 14's bars for the split mode (3xtf32): every
row within the FP32 tolerance, faster than convtune's own FP32 on every AlexNet row, and faster than cuDNN's FP32 on
the geometric mean. Reads OUTDIR/3xtf32.json, 3xtf32_wgmma.json, tf32.json, the one family's tf32_family.json and
3xtf32_family.json, and fp32_alexnet.json (any may be missing).

usage: split_tf32_summary.py OUTDIR
"""
import json
import math
import os
import sys


def rows(path):
    if not os.path.exists(path):
        return {}
    return {(r["layer"], r["direction"]): r for r in json.load(open(path))["rows"]}


def against(r):
    c = r.get("against", {}).get("cudnn", {})
    return c.get("ratio_convtune_over_reference") if c.get("status") == "ok" else None


def table(name, data, fp32):
    ratios, above, faster, failed = [], [], 0, []
    for key, r in data.items():
        if "ms" not in r:
            failed.append(f"{key[0]} {key[1]}: {r.get('error', r.get('status', 'no time'))}"[:160])
            continue
        ratio = against(r)
        if ratio is not None:
            ratios.append(ratio)
            faster += ratio < 1
            if ratio > 1.5:
                above.append(f"{key[0]} {key[1]} {ratio:.2f}")
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"{name}: {len(ratios)} rows vs cuDNN {'tf32' if name.startswith('tf32') else 'fp32'}, geomean {geo:.3f}, faster on {faster}, "
              f"above 1.5x: {len(above)} ({', '.join(above)})")
    for f in failed:
        print(f"{name}: FAILED {f}")
    if fp32:
        slower = []
        for key, base in fp32.items():
            r = data.get(key)
            if r and "ms" in r and "ms" in base:
                ratio = r["ms"] / base["ms"]
                slower += [f"{key[0]} {key[1]} {ratio:.2f}"] if ratio >= 1 else []
                print(f"  {name} vs convtune fp32: {key[0]} {key[1]}: {r['ms']:.3f} vs {base['ms']:.3f} ms "
                      f"({ratio:.2f}x; {r['algorithm'].split('[')[0]} vs {base['algorithm'].split('[')[0]})")
        print(f"{name}: AlexNet rows not faster than convtune fp32: {len(slower)} ({', '.join(slower)})")


def main(out):
    fp32 = rows(os.path.join(out, "fp32_alexnet.json"))
    for name in ("3xtf32", "3xtf32_wgmma", "3xtf32_family", "tf32", "tf32_family"):
        data = rows(os.path.join(out, f"{name}.json"))
        if data:
            table(name, data, fp32 if name.startswith("3xtf32") else {})


if __name__ == "__main__":
    main(sys.argv[1])
