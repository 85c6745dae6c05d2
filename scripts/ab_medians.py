# Per-row medians of runs of two builds alternated by scripts/cpu_ab_general.sh: ab_A<round>.json (build A) and
# ab_B<round>.json (build B) in DIR. Prints each build's geomean of convtune/oneDNN per run, the geomean of the
# per-row medians, and the rows whose time or ratio moved by more than 10%.
#   python3 scripts/ab_medians.py DIR
import json, math, statistics, sys, glob
def load(p):
    d={}
    for r in json.load(open(p))['rows']:
        a=r.get('against',{}).get('onednn',{})
        if a.get('status')=='ok': d[(r['layer'],r['direction'])]=(r['ms'],a['ms'],a['ratio_convtune_over_reference'],r['algorithm'])
    return d
runs={v:[load(f) for f in sorted(glob.glob(f'{sys.argv[1]}/ab_{v}[0-9].json'))] for v in 'AB'}
keys=list(runs['A'][0].keys())
for v in 'AB':
    gs=[math.exp(sum(math.log(R[k][2]) for k in keys)/len(keys)) for R in runs[v]]
    print(v, len(runs[v]), 'runs; geomeans', ' '.join(f'{g:.3f}' for g in gs), 'median', f'{statistics.median(gs):.3f}')
med={v:{k:(statistics.median(R[k][0] for R in runs[v]), statistics.median(R[k][1] for R in runs[v]), statistics.median(R[k][2] for R in runs[v])) for k in keys} for v in 'AB'}
for v in 'AB':
    g=math.exp(sum(math.log(med[v][k][2]) for k in keys)/len(keys))
    print(v,'geomean of per-row median ratios', f'{g:.3f}', 'rows above 1.25:', sum(med[v][k][2]>1.25 for k in keys))
rows=[]
for k in keys:
    a,b=med['A'][k],med['B'][k]
    if abs(b[0]/a[0]-1)>0.1 or abs(b[2]/a[2]-1)>0.1:
        rows.append(f"| {k[0]} | {k[1]} | {a[0]:.3f} | {b[0]:.3f} | {b[1]:.3f} | {a[2]:.2f} | {b[2]:.2f} | {runs['B'][0][k][3].split(' (')[0]} |")
print('\n'.join(rows))
