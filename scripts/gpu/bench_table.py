"""Turns `convtune bench --family all --out X.json` files into one Markdown table for docs/PERFORMANCE.md:
TFLOP/s per layer, direction and family, one column per (file label, family).

usage: bench_table.py LABEL=FILE.json [LABEL=FILE.json ...]
"""
import json
import sys


def main(args):
    columns, rows, order = [], {}, []
    for arg in args:
        label, path = arg.split("=", 1)
        for row in json.load(open(path))["rows"]:
            family = row.get("algorithm", "?").split("[")[0]
            col = f"{label} {family}"
            if col not in columns:
                columns.append(col)
            key = (row["layer"], row["direction"])
            if key not in rows:
                rows[key] = {}
                order.append(key)
            if "gflops" in row:
                rows[key][col] = f"{row['gflops'] / 1000:.1f}"
            else:
                rows[key][col] = "n/a"
    print("| layer | dir | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for key in order:
        print(f"| {key[0]} | {key[1]} | " + " | ".join(rows[key].get(c, "-") for c in columns) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
