#!/usr/bin/env python3
"""Re-times two benches' configurations of the same rows alternately (A B A B ..., each its own `bench --family
--config` process on empty tuning data), so drift between two benches minutes apart cannot decide a comparison of
kernels that run in microseconds. Rows whose two configurations are the same run the same kernel and are not re-timed.

  alternate_retime.py OUT LAYERS BINARY DEVICE MATH ROUNDS A B [MAX_RATIO [SLOWER]]

A and B name OUT/A.json and OUT/B.json (bench --out files). Only rows where B's time over A's in those benches is
above MAX_RATIO (default: every row) are re-timed. Prints B/A per round and the median, and a last line counting the
rows whose median B/A is above SLOWER (default 1.05: B more than 5% slower)."""
import json
import os
import re
import statistics
import subprocess
import sys

out, layers, binary, device, math_mode, rounds, label_a, label_b = sys.argv[1:9]
max_ratio = float(sys.argv[9]) if len(sys.argv) > 9 else 0.0
slower_than = float(sys.argv[10]) if len(sys.argv) > 10 else 1.05
problems = dict(line.split()[:2] for line in open(layers) if line.split())


def rows(label):
    path = os.path.join(out, label + '.json')
    if not os.path.exists(path):
        return {}
    return {(r['layer'], r['direction']): r for r in json.load(open(path))['rows'] if r.get('ms')}


def split(algorithm):  # "family[K=V,...] (tier)" -> (family, "K=V,...")
    m = re.match(r'([^\[ ]+)(?:\[([^\]]*)\])?', algorithm)
    return m.group(1), m.group(2) or ''


a_rows, b_rows = rows(label_a), rows(label_b)
env = dict(os.environ, CONVTUNE_SHIPPED_TUNING_DIR=os.path.join(out, 'empty'),
           CONVTUNE_TUNING_DB=os.path.join(out, 'none.json'))
os.makedirs(os.path.join(out, 'empty'), exist_ok=True)
runs = 0


def time(layer, direction, family, config):
    global runs
    runs += 1
    path = os.path.join(out, f'retime-{runs}.json')
    cmd = [binary, 'bench', '--layer', problems[layer], '--device', device, '--direction', direction, '--math',
           math_mode, '--family', family, '--repeats', '50', '--out', path]
    if config:
        cmd += ['--config', config]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    try:
        return json.load(open(path))['rows'][0]['ms']
    except (OSError, ValueError, IndexError, KeyError):
        print(f"  {layer} {direction} {family}[{config}]: no time (exit {r.returncode}: {r.stderr.strip()[-150:]})")
        return None
    finally:
        if os.path.exists(path):
            os.remove(path)


common = sorted(set(a_rows) & set(b_rows))
chosen = [k for k in common if b_rows[k]['ms'] / a_rows[k]['ms'] > max_ratio]
same = [k for k in chosen if split(a_rows[k]['algorithm']) == split(b_rows[k]['algorithm'])]
print(f"rows {label_b}/{label_a} above {max_ratio:g}: {len(chosen)} of {len(common)}; "
      f"{len(same)} of them run the same configuration in both (the same kernel: not re-timed)")
for k in same:
    print(f"{k[0]:10} {k[1]:10} same configuration ({split(a_rows[k]['algorithm'])[0]}): "
          f"{b_rows[k]['ms'] / a_rows[k]['ms']:.3f} between the benches is their drift")
medians = []
for k in chosen:
    if k in same:
        continue
    a, b = split(a_rows[k]['algorithm']), split(b_rows[k]['algorithm'])
    ratios = []
    for _ in range(int(rounds)):
        ta = time(*k, *a)
        tb = time(*k, *b)
        if ta and tb:
            ratios.append(tb / ta)
    if not ratios:
        print(f"{k[0]:10} {k[1]:10} not timed")
        continue
    med = statistics.median(ratios)
    medians.append((med, k))
    print(f"{k[0]:10} {k[1]:10} {a[0]:13} ({label_a}) -> {b[0]:13} ({label_b}) {label_b}/{label_a} by round: "
          f"{' '.join(f'{r:.3f}' for r in ratios)}  median {med:.3f}")
slower = sorted(((m, k) for m, k in medians if m > slower_than), reverse=True)
print(f"re-timed rows with {label_b}/{label_a} above {slower_than:g} (median of {rounds} alternating rounds): "
      f"{len(slower)}" + ''.join(f"\n  {k[0]} {k[1]} {m:.3f}" for m, k in slower))
