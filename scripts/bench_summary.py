"""One line per reference library for each `convtune bench --against ... --out FILE.json`: the geometric mean of
convtune's time over the library's, over the rows where both ran and agreed with float64; how many rows convtune
was faster on; the rows above --above (default 1.5); the rows left out (the library's own result off float64, or
no row from it) and convtune's largest error against float64. With --rows, every row's ratio too.

The figures in docs/PERFORMANCE.md are this script's output over the raw files named there.

A gzipped file (FILE.json.gz) or a `--markdown FILE.md` written by bench works too (its `convtune/X` columns; no error figures).

usage: bench_summary.py [--above X] [--rows] BENCH.json|BENCH.md [...]
"""
import argparse
import gzip
import json
import math
import re


def summarise(path, above_limit, print_rows):
    data = json.load(gzip.open(path, "rt") if path.endswith(".gz") else open(path))
    rows = data["rows"]
    libraries = sorted({lib for r in rows for lib in r.get("against", {})})
    head = f"{path}: {data.get('device', '?')}, math {data.get('math_option') or 'per row'}, {data.get('date', '?')}"
    print(head)
    worst = (0.0, "")
    failed = []
    for r in rows:
        key = f"{r['layer']} {r['direction']}"
        if "ms" not in r:
            failed.append(f"{key}: {r.get('error', r.get('status', 'no time'))}"[:160])
            continue
        err = r.get("check_rel_l2")
        if isinstance(err, (int, float)) and err > worst[0]:
            worst = (err, f"{key} {r['algorithm'].split('[')[0]}")
    for lib in libraries:
        ratios, above, left_out = [], [], []
        for r in rows:
            key = f"{r['layer']} {r['direction']}"
            c = r.get("against", {}).get(lib, {})
            ratio = c.get("ratio_convtune_over_reference")
            if "ms" not in r or c.get("status") != "ok" or ratio is None:
                if c.get("status", "").startswith("n/a"):
                    continue  # the library does not compute this row (CLBlast's backward passes, say)
                left_out.append(f"{key} ({c.get('status', 'no row')})"[:80])
                continue
            ratios.append(ratio)
            family = r["algorithm"].split("[")[0]
            if ratio > above_limit:
                above.append(f"{key} {ratio:.2f} ({family})")
            if print_rows:
                print(f"  {key:24s} {family:28s} {r['ms']:9.3f} ms  {lib} {c['ms']:9.3f} ms  {ratio:5.2f}")
        if not ratios:
            print(f"  {lib}: no comparable rows; left out {len(left_out)}")
            continue
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"  convtune/{lib}: {len(ratios)} rows, geomean {geo:.3f}, faster on {sum(x < 1 for x in ratios)}, "
              f"above {above_limit}: {len(above)}{' (' + ', '.join(above) + ')' if above else ''}")
        if left_out:
            print(f"  left out ({lib} not ok): {len(left_out)} ({', '.join(left_out)})")
    print(f"  convtune's largest error against float64: {worst[0]:.2e} ({worst[1]})")
    for f in failed:
        print(f"  FAILED {f}")


def summarise_markdown(path, above_limit, print_rows):
    """The `convtune/X` columns of every table in a bench --markdown file."""
    print(path)
    header = None
    ratios = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|"):
            header = None
            continue
        if header is None:
            header = cells
            continue
        if set(line.strip()) <= set("|-"):
            continue
        row = dict(zip(header, cells))
        for name, value in row.items():
            m = re.match(r"([0-9.]+) (faster|slower)$", value)
            if name.startswith("convtune/") and m:
                lib = name[len("convtune/"):]
                ratio = float(m.group(1))
                ratios.setdefault(lib, []).append((f"{row.get('layer')} {row.get('dir')}", ratio))
                if print_rows:
                    print(f"  {row.get('layer')} {row.get('dir')}: convtune/{lib} {ratio:.2f}")
    for lib, pairs in ratios.items():
        values = [r for _, r in pairs]
        geo = math.exp(sum(math.log(x) for x in values) / len(values))
        above = [f"{k} {r:.2f}" for k, r in pairs if r > above_limit]
        print(f"  convtune/{lib}: {len(values)} rows, geomean {geo:.3f} (from the table's rounded ratios), faster on "
              f"{sum(x < 1 for x in values)}, above {above_limit}: {len(above)}{' (' + ', '.join(above) + ')' if above else ''}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--above", type=float, default=1.5, help="list the rows whose ratio is above this")
    parser.add_argument("--rows", action="store_true", help="print every row's ratio")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    for path in args.files:
        if path.endswith(".md"):
            summarise_markdown(path, args.above, args.rows)
        else:
            summarise(path, args.above, args.rows)


if __name__ == "__main__":
    main()
