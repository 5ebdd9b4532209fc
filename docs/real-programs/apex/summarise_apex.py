#!/usr/bin/env python3
"""Summarise a ferrite report on APEX: per finding, the store site and the load sites
(innermost frame, and the first apex_nodes.h/apex.h frame below it), and HawkSet's
published APEX bugs (bugs.py #19, #20) matched as bugs.py matches them: the store line
in the store's stack, the load line in the load's stack."""
import json, sys, os
BUGS = {19: (["apex_nodes.h:3479", "apex_nodes.h:3798"], ["apex_nodes.h:2915", "apex_nodes.h:2933"]),
        20: (["apex_nodes.h:3480", "apex_nodes.h:3606"], ["apex_nodes.h:962"])}
def fl(fr): return f"{os.path.basename(fr.get('file') or '?')}:{fr.get('line')}"
def prog(bt):
    for fr in bt:
        b = os.path.basename(fr.get('file') or '')
        if b in ('apex_nodes.h', 'apex.h') : return fl(fr)
    return '-'
r = json.load(open(sys.argv[1]))
verbose = '-v' in sys.argv
counts = {}; found = {}
for f in r['findings']:
    a = f['analysis']; counts[a] = counts.get(a, 0) + 1
    stacks = f.get('group', {}).get('stacks') or [{'locations': f['locations']}]
    st = [l for l in f['locations'] if l['role'] == 'store']
    ssite = fl(st[0]['backtrace'][0]) if st else '?'
    loads = set(); pairs = set()
    for s in stacks:
        sbt = [fl(x) for l in s['locations'] if l['role'] == 'store' for x in l['backtrace']]
        for l in s['locations']:
            if l['role'] != 'load': continue
            lbt = [fl(x) for x in l['backtrace']]
            loads.add(f"{lbt[0]}<{prog(l['backtrace'])}")
            for b, (ss, ls) in BUGS.items():
                for s1 in ss:
                    for l1 in ls:
                        if s1 in sbt and l1 in lbt: pairs.add((b, s1, l1))
    for p in pairs: found.setdefault(a, set()).add(p)
    print(f"#{f['id']} {a} x{f['occurrences']} store {ssite} <{prog(st[0]['backtrace']) if st else ''}> kind={f.get('group',{}).get('stored')} :: {f['message'][:60]}")
    if verbose or True:
        for x in sorted(loads)[:12]: print(f"      load {x}")
        if len(loads) > 12: print(f"      ... {len(loads)} load sites")
print("counts", counts)
for a, ps in found.items():
    print(a, "published pairs:", sorted(ps))
