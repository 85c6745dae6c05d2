#!/usr/bin/env bash
# Renders every chart `convtune report` writes for a small tuning log: each SVG must parse as XML, render with
# rsvg-convert (librsvg, scripts/setup.sh installs it) and carry its labels; index.html must link every chart.
# A --heatmap pair the log lacks must be refused. Usage: report_charts.sh CONVTUNE LOG
set -eu
convtune=$1 log=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$convtune" report "$log" --out-dir "$dir/report"
command -v rsvg-convert >/dev/null || { echo "report_charts.sh: rsvg-convert is missing (apt-get install librsvg2-bin)"; exit 1; }
count=0
for svg in "$dir"/report/*.svg; do
  rsvg-convert "$svg" -o "$dir/chart.png" || { echo "report_charts.sh: rsvg-convert cannot render $svg"; exit 1; }
  [ -s "$dir/chart.png" ] || { echo "report_charts.sh: $svg rendered empty"; exit 1; }
  count=$((count + 1))
done
[ $count -gt 0 ] || { echo "report_charts.sh: no charts written"; exit 1; }
python3 - "$dir/report" <<'PY'
import math, os, re, sys, xml.etree.ElementTree as ET
folder = sys.argv[1]
svgs = sorted(f for f in os.listdir(folder) if f.endswith(".svg"))
ns = "{http://www.w3.org/2000/svg}"
for name in svgs:
    root = ET.parse(os.path.join(folder, name)).getroot()
    texts = [t.text or "" for t in root.iter(ns + "text")]
    width = float(root.get("width"))
    title = texts[0]
    # The title fits: about 8.5 pixels a character of 15-pixel text.
    assert len(title) * 8.5 <= width, f"{name}: title '{title}' ({len(title)} chars) is wider than {width}"
    if name.endswith("-histogram.svg"):
        assert "GFLOP/s of the working kernels" in title, title
        assert any(t.startswith("GFLOP/s (") for t in texts), f"{name}: no x-axis label"
        assert any(t.startswith("best ") for t in texts) and any(t.startswith("default ") for t in texts), \
            f"{name}: best and default are not marked: {texts}"
        # Ticks are nice numbers: equally spaced, and their labels distinct (not 0,0,0,1,1).
        by_row = {}
        for t in root.iter(ns + "text"):
            if re.fullmatch(r"-?[0-9.]+", t.text or ""):
                by_row.setdefault(t.get("y"), []).append(float(t.text))
        x_ticks = max(by_row.values(), key=len)
        steps = {round(b - a, 9) for a, b in zip(x_ticks, x_ticks[1:])}
        assert len(x_ticks) >= 2 and len(steps) == 1 and min(steps) > 0, f"{name}: x ticks {x_ticks} are not evenly spaced"
        step = steps.pop()
        mantissa = step / 10 ** math.floor(math.log10(step))
        assert any(abs(mantissa - m) < 1e-6 for m in (1, 2, 5, 10)), f"{name}: tick step {step} is not 1, 2 or 5 x 10^k"
    else:
        a, b = re.search(r"heatmap-(\w+?)-(\w+)\.svg$", name).groups()
        assert f"best GFLOP/s by {a} x {b}" in title, title
        assert a in texts and b in texts, f"{name}: axis labels {a}, {b} missing"
        assert any("best configuration" in t for t in texts), f"{name}: no legend for the marks"
        cells = [t for t in texts if re.fullmatch(r"[0-9.e+]+", t)]
        assert cells, f"{name}: no cell values"
index = open(os.path.join(folder, "index.html")).read()
for name in svgs:
    assert f'src="{name}"' in index, f"index.html does not show {name}"
linked = re.findall(r'href="([^"]+)"', index)
for target in linked:
    assert os.path.exists(os.path.join(folder, target)), f"index.html links the missing {target}"
print(f"report_charts: {len(svgs)} charts parse, render and carry their labels; index.html links them all")
PY
# A pair of parameters the log does not have is an error naming it, not a silent nothing.
if "$convtune" report "$log" --out-dir "$dir/asked" --heatmap NO_SUCH,TILE_M 2>"$dir/error.txt"; then
  echo "report_charts.sh: --heatmap NO_SUCH,TILE_M was accepted"; exit 1
fi
grep -q "heatmap NO_SUCH,TILE_M: no working candidate" "$dir/error.txt" || { cat "$dir/error.txt"; exit 1; }
echo "report_charts.sh: ok"
