#!/usr/bin/env python3
"""Line up the TRACE stages of each kraftd bench propagation sample (scripts/proptrace/README.md).

usage: parse.py BENCH_STDERR NODE_LOG...; prints p50, p90 and max of each stage (ms after the sample started)."""
import re, sys, collections
ev = []  # (us, node, stage, fields)
pat = re.compile(r'(?:\[node-(\d+)\] )?TRACE (\S+) us=(\d+) ?(.*)')
for fn in sys.argv[1:]:
    for line in open(fn, errors='replace'):
        i = line.find('TRACE ')
        if i < 0: continue
        pre = line[:i]
        m = re.search(r'\[node-(\d+)\]', pre)
        node = int(m.group(1)) if m else 0
        parts = line[i:].split()
        stage = parts[1]; us = int(parts[2][3:])
        f = {}
        for kv in parts[3:]:
            if '=' in kv:
                k, v = kv.split('=', 1)
                f[k] = v
        ev.append((us, node, stage, f))
ev.sort(key=lambda e: e[0])
brokers = sorted({e[1] for e in ev if e[2].startswith('pub_')})
def I(f, k, d=-10**18):
    try: return int(f.get(k, d))
    except: return d
starts = [e for e in ev if e[2] == 'bench_start']
rows = []
for s in starts:
    t0 = s[0]; topic = s[3]['topic']
    win = [e for e in ev if t0 <= e[0] <= t0 + 5_000_000]
    def first(cond):
        for e in win:
            if cond(e): return e
        return None
    def rel(e): return None if e is None else (e[0]-t0)/1000.0
    prop = first(lambda e: e[2]=='ctrl_proposed' and e[3].get('topic')==topic)
    if prop is None: continue
    X = I(prop[3], 'last')
    r = collections.OrderedDict()
    r['topic'] = topic; r['X'] = X
    r['brk_in'] = rel(first(lambda e: e[2]=='brk_create_in' and e[3].get('topic')==topic))
    r['ctrl_in'] = rel(first(lambda e: e[2]=='ctrl_in' and e[3].get('topic')==topic))
    r['ctrl_loop'] = rel(first(lambda e: e[2]=='ctrl_loop' and e[3].get('topic')==topic))
    pe = first(lambda e: e[2]=='propose' and I(e[3],'last')>=X)
    r['propose'] = rel(pe); r['appended_at_once'] = pe[3].get('appended') if pe else None
    leader = pe[1] if pe else None
    r['ctrl_proposed'] = rel(prop)
    voters = sorted({I(e[3],'from') for e in win if e[2]=='fetch_in' and e[1]==leader and I(e[3],'from') not in brokers and I(e[3],'from')>=0})
    r['flush_start'] = rel(first(lambda e: e[1]==leader and e[2]=='flush_start' and I(e[3],'end')>X))
    r['flush_done'] = rel(first(lambda e: e[1]==leader and e[2]=='flush_done' and e[0]>=(pe[0] if pe else 0)))
    for v in voters:
        r[f'L_reply_rec_{v}'] = rel(first(lambda e: e[1]==leader and e[2]=='fetch_reply' and I(e[3],'to')==v and I(e[3],'last')>=X))
        r[f'F{v}_resp_rec'] = rel(first(lambda e: e[1]==v and e[2]=='fetch_resp' and I(e[3],'last')>=X))
        r[f'F{v}_sync_start'] = rel(first(lambda e: e[1]==v and e[2]=='sync_start' and I(e[3],'end')>X))
        r[f'F{v}_sync_done'] = rel(first(lambda e: e[1]==v and e[2]=='sync_done' and I(e[3],'end')>X))
        r[f'F{v}_fetch_send'] = rel(first(lambda e: e[1]==v and e[2]=='fetch_send' and I(e[3],'off')>X))
        r[f'L_rpc_in_{v}'] = rel(first(lambda e: e[1]==leader and e[2]=='fetch_rpc_in' and I(e[3],'from')==v and I(e[3],'off')>X))
        r[f'L_in_{v}'] = rel(first(lambda e: e[1]==leader and e[2]=='fetch_in' and I(e[3],'from')==v and I(e[3],'off')>X))
    r['L_commit'] = rel(first(lambda e: e[1]==leader and e[2]=='commit' and I(e[3],'last')>=X))
    for b in brokers:
        r[f'L_reply_rec_{b}'] = rel(first(lambda e: e[1]==leader and e[2]=='fetch_reply' and I(e[3],'to')==b and I(e[3],'last')>=X))
        r[f'B{b}_resp_rec'] = rel(first(lambda e: e[1]==b and e[2]=='fetch_resp' and I(e[3],'last')>=X))
        r[f'L_reply_hw_{b}'] = rel(first(lambda e: e[1]==leader and e[2]=='fetch_reply' and I(e[3],'to')==b and I(e[3],'hw')>X))
        r[f'L_rpcout_hw_{b}'] = rel(first(lambda e: e[1]==leader and e[2]=='fetch_rpc_out' and I(e[3],'to')==b and I(e[3],'hw')>X))
        r[f'B{b}_resp_hw'] = rel(first(lambda e: e[1]==b and e[2]=='fetch_resp' and I(e[3],'hw')>X))
        r[f'B{b}_commit'] = rel(first(lambda e: e[1]==b and e[2]=='commit' and I(e[3],'last')>=X))
        r[f'B{b}_visible'] = rel(first(lambda e: e[1]==b and e[2]=='pub_visible' and I(e[3],'last')>=X))
        r[f'B{b}_seen'] = rel(first(lambda e: e[1]==0 and e[2]=='bench_seen' and e[3].get('topic')==topic and I(e[3],'broker')==b))
    r['ctrl_reply'] = rel(first(lambda e: e[2]=='ctrl_reply' and e[3].get('topic')==topic))
    r['bench_changed'] = rel(first(lambda e: e[2]=='bench_changed' and e[3].get('topic')==topic))
    r['bench_done'] = rel(first(lambda e: e[2]=='bench_done' and e[3].get('topic')==topic))
    r['leader'] = leader
    rows.append(r)
if not rows:
    print('no samples'); sys.exit()
keys = []
for r in rows:
    for k in r:
        if k not in keys: keys.append(k)
print(f'{len(rows)} samples, brokers {brokers}')
print(f'{"stage":28s} {"p50":>8s} {"p90":>8s} {"max":>8s}   (ms after bench_start)')
for k in keys:
    vs = [r.get(k) for r in rows if isinstance(r.get(k), float)]
    if not vs: continue
    vs.sort()
    q = lambda x: vs[min(len(vs)-1, int(x*len(vs)))]
    print(f'{k:28s} {q(0.5):8.2f} {q(0.9):8.2f} {vs[-1]:8.2f}')
