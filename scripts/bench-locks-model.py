#!/usr/bin/env python3
"""The cost model of docs/performance-archive.md ("Locks by what is touched"): fits
CPU per registration, per PostgreSQL transaction and per node-second to the
runs of scripts/bench-locks.sh, and predicts each run's registrations/s from
the cores it got.

  scripts/bench-locks-model.py RUNS.txt:CLIENTS[,RUNS.txt:CLIENTS...] [before|after]

With a build name, the fit uses that build's runs only and the others are
the test ("test" rows); DURATION (10) is the seconds of each run.
"""
import os
import sys
rows=[]
def load(f,dur,clients):
    for line in open(f):
        p=line.split()
        if not p or p[0]!='before' and p[0]!='after': continue
        d=dict(build=p[0],nodes=int(p[1]),rnd=p[2],x=float(p[3]),T=int(p[13]),ncpu=float(p[14]),pcpu=float(p[15]),bcpu=float(p[16]),ws=int(p[17]),wsms=float(p[18]),wait=p[10],infl=p[11],mx=p[12],clients=clients,dur=dur)
        d['R']=d['x']*dur; d['NS']=d['nodes']*dur
        rows.append(d)
dur=float(os.environ.get('DURATION','10').rstrip('s'))
for arg in sys.argv[1].split(','):
    f,c=arg.rsplit(':',1)
    load(f,dur,int(c))
def solve(A,y):
    # normal equations, 3x3 gaussian
    n=len(A[0]); M=[[sum(a[i]*a[j] for a in A) for j in range(n)]+[sum(a[i]*yy for a,yy in zip(A,y))] for i in range(n)]
    for i in range(n):
        piv=M[i][i]
        for j in range(i,n+1): M[i][j]/=piv
        for k in range(n):
            if k!=i:
                f=M[k][i]
                for j in range(i,n+1): M[k][j]-=f*M[i][j]
    return [M[i][n] for i in range(n)]
train=[r for r in rows if r['build']==sys.argv[2]] if len(sys.argv)>2 else rows
test=[r for r in rows if r not in train] or rows
A=[[r['R'],r['T'],r['NS']] for r in train]
cn=solve(A,[r['ncpu'] for r in train]); cp=solve([[r['R'],r['T']] for r in train],[r['pcpu'] for r in train])
cb=sum(r['bcpu'] for r in train)/sum(r['R'] for r in train)
print(f"fit on {len(train)} runs ({sys.argv[2] if len(sys.argv)>2 else 'all'}): node {cn[0]*1e6:.0f} us/registration + {cn[1]*1e6:.0f} us/transaction + {cn[2]*1e3:.0f} ms/s per node; postgres {cp[0]*1e6:.0f} us/registration + {cp[1]*1e6:.0f} us/transaction; load tool {cb*1e6:.0f} us/request")
for r in rows:
    mn=cn[0]*r['R']+cn[1]*r['T']+cn[2]*r['NS']; mp=cp[0]*r['R']+cp[1]*r['T']
    used=(r['ncpu']+r['pcpu']+r['bcpu'])
    # predicted throughput with the cores the run got: (used - fixed) / per-registration cost at the run's transactions per registration
    tpr=r['T']/r['R']
    per=cn[0]+cp[0]+cb+(cn[1]+cp[1])*tpr
    xp=(used-cn[2]*r['NS'])/r['dur']/per
    tag='test' if r in test and r not in train else 'fit'
    print(f"{tag:4} {r['build']:6} {r['nodes']}n c{r['clients']:<2} r{r['rnd']} x={r['x']:.0f} pred={xp:.0f} ({(xp/r['x']-1)*100:+.0f}%) tx/reg={tpr:.2f} wait={r['wait']} inflight={r['infl']} max={r['mx']} node {r['ncpu']:.2f}s (model {mn:.2f}) pg {r['pcpu']:.2f}s (model {mp:.2f}) cores used {used/r['dur']:.2f} fsync {r['wsms']/max(r['ws'],1):.2f}ms {r['ws']/r['dur']:.0f}/s")
