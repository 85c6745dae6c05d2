#!/usr/bin/env bash
# bench --against on the CPU judges each row against the FMA ceiling read in its own timing rounds: every row carries
# one reading per round, its % peak divides by the best of them (so it is at least the figure against the run's best
# reading, and at most 100), and the run's best reading is the metadata's peak. Usage: bench_peak_in_rounds.sh
# CONVTUNE SUITE_FILE
set -eu
convtune=$1 suite=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$convtune" bench --suite "$suite" --device cpu --direction all --against onednn --repeats 3 --warmup 0 \
  --out "$dir/rows.json" --markdown "$dir/rows.md" >"$dir/table.txt" 2>"$dir/progress.txt"
cat "$dir/table.txt"
python3 - "$dir" <<'PY'
import json, sys
folder = sys.argv[1]
doc = json.load(open(f"{folder}/rows.json"))
rows = doc["rows"]
assert rows, "no rows"
best = doc["fp32_peak_gflops"]
for row in rows:
    name = f"{row['layer']} {row['direction']}"
    readings = row["fp32_peak_in_rounds_gflops"]
    assert len(readings) == doc["repeats"] and all(r > 0 for r in readings), (name, readings)
    assert max(readings) <= best * (1 + 1e-9), (name, readings, best)
    own, run_best = row["percent_of_fp32_peak"], row["percent_of_fp32_peak_run_best"]
    assert 0 < run_best <= own <= 100, (name, own, run_best)
    assert abs(own / run_best - best / max(readings)) < 1e-6 * own, (name, own, run_best, best, readings)
text = open(f"{folder}/rows.md").read()
assert "each row's `% peak` divides by the best reading of its own rounds" in text, "the markdown does not say how % peak is taken"
print(f"bench_peak_in_rounds: {len(rows)} rows, each judged against its own rounds' ceiling (run best {best:.0f} GFLOP/s)")
PY
