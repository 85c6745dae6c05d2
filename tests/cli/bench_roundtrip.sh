#!/usr/bin/env bash
# bench's CSV and JSON hold the numbers its table shows: each printed ms, GFLOP/s, GB/s and check cell is the CSV's
# and the JSON's raw number rounded, the CSV's numbers equal the JSON's, and both carry the metadata and the full
# problem. Usage: bench_roundtrip.sh CONVTUNE SUITE_FILE
set -eu
convtune=$1 suite=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$convtune" bench --suite "$suite" --device cpu --direction all --repeats 3 --warmup 0 --samples \
  --out "$dir/rows.csv" --out "$dir/rows.json" >"$dir/table.txt" 2>"$dir/progress.txt"
cat "$dir/table.txt"
python3 - "$dir" <<'PY'
import csv, json, re, sys
folder = sys.argv[1]
doc = json.load(open(f"{folder}/rows.json"))
rows_csv = list(csv.DictReader(open(f"{folder}/rows.csv")))
lines = open(f"{folder}/table.txt").read().splitlines()
header_at = next(i for i, line in enumerate(lines) if line.startswith("layer "))
header = re.split(r"  +", lines[header_at].strip())
table = [dict(zip(header, re.split(r"  +", line.strip()))) for line in lines[header_at + 1:] if line and not line.startswith(("wrote", "("))]
rows = doc["rows"]
assert len(rows) == len(rows_csv) == len(table) > 0, (len(rows), len(rows_csv), len(table))
for key in ("convtune", "device", "device_id", "driver", "math_option", "command", "repeats", "warmup", "batch_scale"):
    assert key in doc, f"JSON metadata lacks {key}"
    assert key in rows_csv[0], f"CSV lacks the column {key}"
for row, line, cells in zip(rows, rows_csv, table):
    for key in ("ms", "gflops", "gbytes_per_s", "check_rel_l2", "min_ms", "max_ms"):
        assert isinstance(row[key], (int, float)), f"JSON {key} is {row[key]!r}, not a number"
        assert float(line[key]) == row[key], f"CSV {key} {line[key]} != JSON {row[key]}"
    assert len(row["samples_ms"]) == doc["repeats"]
    assert row["min_ms"] <= row["ms"] <= row["max_ms"]
    assert line["problem"] == row["problem"] and row["problem"].startswith("N="), row["problem"]
    assert line["math"] == row["math"] == "fp32", (line["math"], row["math"])
    shown = {"ms": f"{row['ms']:.3f}", "GFLOP/s": f"{row['gflops']:.4g}", "GB/s": f"{row['gbytes_per_s']:.4g}",
             "check": f"{row['check_rel_l2']:.1e}", "layer": row["layer"], "dir": row["direction"], "N": str(row["N"])}
    for column, text in shown.items():
        assert cells[column] == text, f"{row['layer']} {row['direction']}: table {column} {cells[column]!r}, data {text!r}"
print(f"bench_roundtrip: {len(rows)} rows: the table, the CSV and the JSON agree")
PY
