"""Side-by-side table of several `convtune bench --against LIB --out X.json` runs of the same layers: convtune's
time per run (label), the reference library's time from the first run that has it, and per run the geometric
mean and worst of convtune/LIB over the rows where both ran, each against LIB's time in that same run.

usage: variant_table.py LIB LABEL=FILE.json [LABEL=FILE.json ...]
"""
import json
import math
import sys


def main(lib, args):
    runs, order = [], []
    for arg in args:
        label, path = arg.split("=", 1)
        rows = {}
        for row in json.load(open(path))["rows"]:
            key = (row["layer"], row.get("direction", "-"))
            if key not in order:
                order.append(key)
            rows[key] = row
        runs.append((label, rows))
    print("| layer | dir | " + " | ".join(f"{label} ms" for label, _ in runs) + f" | {lib} ms | best/{lib} |")
    print("|---|---|" + "---|" * (len(runs) + 2))
    ratios = {label: [] for label, _ in runs}
    for key in order:
        ref = None
        cells, best = [], None
        for label, rows in runs:
            row = rows.get(key, {})
            ms = row.get("ms")
            ref = ref or row.get("against", {}).get(lib, {}).get("ms")
            cells.append(f"{ms:.3f}" if ms else "n/a")
            if ms:
                best = ms if best is None else min(best, ms)
        for label, rows in runs:  # each run against the library's time in that same run
            row = rows.get(key, {})
            own = row.get("against", {}).get(lib, {}).get("ms")
            if row.get("ms") and own:
                ratios[label].append(row["ms"] / own)
        ratio = f"{best / ref:.2f}" if best and ref else "-"
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + f" | {ref:.3f} | {ratio} |" if ref else
              f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " | n/a | - |")
    for label, values in ratios.items():
        if values:
            geo = math.exp(sum(map(math.log, values)) / len(values))
            print(f"{label}: geomean convtune/{lib} {geo:.3f} over {len(values)} rows, worst {max(values):.2f}, "
                  f"rows above 1.5: {sum(v > 1.5 for v in values)}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
