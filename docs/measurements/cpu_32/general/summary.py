import json, math, sys
d=json.load(open(sys.argv[1]))
rs=[]
for r in d['rows']:
    a=r.get('against',{}).get('onednn',{})
    if a.get('status')=='ok':
        rs.append((a['ratio_convtune_over_reference'], r['layer'], r['direction'], r.get('ms')))
print(len(rs), 'rows; geomean %.3f' % math.exp(sum(math.log(x[0]) for x in rs)/len(rs)), '; at most 1.25:', sum(1 for x in rs if x[0]<=1.25))
print('above 1.25:', ', '.join(f'{x[1]} {x[2]} {x[0]:.2f}' for x in sorted(rs, reverse=True) if x[0] > 1.25))
