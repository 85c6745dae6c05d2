"""Issue 13's bar over a `bench --against cudnn --math fp32` file: the geometric mean of convtune/cuDNN over the
rows where both agree with float64, the rows above 1.5x, the rows cuDNN's result disagreed on (left out), and
convtune's largest error against float64 beside the FP32 tolerance.

usage: stride1_summary.py BENCH.json
"""
import json
import math
import sys

data = json.load(open(sys.argv[1]))
ratios, above, left_out, failed, worst = [], [], [], [], (0.0, "")
for r in data["rows"]:
    key = f"{r['layer']} {r['direction']}"
    if "ms" not in r:
        failed.append(f"{key}: {r.get('error', r.get('status', 'no time'))}"[:200])
        continue
    err = r.get("check_rel_l2")
    if err is not None and err > worst[0]:
        worst = (err, f"{key} {r['algorithm'].split('[')[0]}")
    c = r.get("against", {}).get("cudnn", {})
    if c.get("status") != "ok" or c.get("ratio_convtune_over_reference") is None:
        left_out.append(f"{key} ({c.get('status', 'no cuDNN row')})")
        continue
    ratio = c["ratio_convtune_over_reference"]
    ratios.append(ratio)
    if ratio > 1.5:
        above.append(f"{key} {ratio:.2f} ({r['algorithm'].split('[')[0]})")
    print(f"{key:22s} {r['algorithm'].split('[')[0]:22s} {r['ms']:8.3f} ms  cuDNN {c.get('ms', float('nan')):8.3f} ms"
          f"  {ratio:5.2f}  err {err if err is not None else float('nan'):.1e}")
if ratios:
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    print(f"fp32: {len(ratios)} rows vs cuDNN FP32, geomean {geo:.3f}, faster on {sum(x < 1 for x in ratios)}, "
          f"above 1.5x: {len(above)} ({', '.join(above)})")
print(f"left out (cuDNN not ok): {len(left_out)} ({', '.join(left_out)})")
print(f"convtune's largest error against float64: {worst[0]:.2e} ({worst[1]})")
if failed:
    print(f"failed rows: {len(failed)}: " + "; ".join(failed))
