#!/usr/bin/env python3
"""Summarises a ferrite report of a real program (docs/analyses/hawkset.md, "The real programs"):
per finding, the program's frames of its store, window-end and load sites; then, for each bug of
HawkSet-exp's artifact_evaluation/bugs.py for the program, the findings that have its store
location in a store's backtrace and its load location in a load's (any call stack of the group).
Usage: summarise.py REPORT pmasstree|part|pclht|ffair [ANALYSES,...] (the program's sources under $REAL)."""
import json, sys, os
REAL = os.environ.get('REAL', os.getcwd())
r = json.load(open(sys.argv[1])); app = sys.argv[2]
BUGS = {
 # FAST_FAIR (DICL/FAST_FAIR 0f047e8, the artifact's commit: the lines are bugs.py's).
 'ffair': {1: [("btree.h:560", l) for l in ("btree.h:876", "btree.h:878", "btree.h:886")],
           2: [("btree.h:571", l) for l in ("btree.h:876", "btree.h:878", "btree.h:886")]},
 'pmasstree': {5: [("masstree.h:868", "masstree.h:1958")], 6: [("masstree.h:1435", "masstree.h:1958")],
               7: [("masstree.h:1473", "masstree.h:1953")]},
 # P-ART: bugs.py's lines are of durinn's N*.cpp, which is not stored publicly; the same
 # statements in RECIPE's N*.cpp built here: 8 = change() vs getChild(), 9 = remove() vs getChild().
 # P-CLHT: bugs.py's store clht_lb_res.c:793 and loads 437/534/583/866 are of the artifact's
 # 70bf21c; in RECIPE's stored 145f510 built here they are 797 and 440/537/585/869.
 'pclht': {3: [("clht_lb_res.c:797", l) for l in ("clht_lb_res.c:869", "clht_lb_res.c:440",
          "clht_lb_res.c:585", "clht_lb_res.c:537", "clht_gc.c:50", "clht_gc.c:103", "clht_gc.c:154",
          "clht_gc.c:132", "clht_gc.c:255")]},
 'part': {8: [(s, l) for s in ("N4.cpp:51", "N16.cpp:42", "N256.cpp:39") for l in ("N4.cpp:61", "N16.cpp:67", "N256.cpp:43")],
          9: [(s, l) for s in ("N4.cpp:72", "N16.cpp:84") for l in ("N4.cpp:61", "N16.cpp:67")]},
}[app]
def frames(loc, n=4):
    if 'backtrace' not in loc and 'file' in loc: return [f"{os.path.basename(loc['file'])}:{loc.get('line')}"]
    out = []
    for fr in loc.get('backtrace', [])[:12]:
        f = fr.get('file');
        if f and f.startswith(REAL):
            out.append(f"{os.path.basename(f)}:{fr.get('line')}")
    return out
def top(loc):
    f = loc.get('file'); return f"{os.path.basename(f) if f else loc.get('function','?')}:{loc.get('line')}"
found = {b: [] for b in BUGS}
byan = {}
for f in r['findings']:
    an = f['analysis']; byan[an] = byan.get(an, 0) + 1
    st = [l for l in f['locations'] if l['role'] == 'store']
    ld = [l for l in f['locations'] if l['role'] == 'load']
    allst, allld = list(st), list(ld)
    for g in (f.get('group') or {}).get('stacks', []):
        allst += [l for l in g['locations'] if l['role'] == 'store']
        allld += [l for l in g['locations'] if l['role'] == 'load']
    en = [l for l in f['locations'] if l['role'] in ('fence', 'overwrite')]
    if len(sys.argv) < 4 or an in sys.argv[3].split(','):
        print(f"#{f['id']} [{an}] x{f.get('occurrences')} {f['message'][:70]}")
        for s in st: print("   store", top(s), frames(s)[:4])
        for e in en: print("   ", e['role'], top(e), frames(e)[:3])
        for l in ld: print("   load ", top(l), frames(l)[:3])
    for b, pats in BUGS.items():
        for s_, l_ in pats:
            if any(s_ in x for s in allst for x in frames(s)+[top(s)]) and any(l_ in x for l in allld for x in frames(l)+[top(l)]):
                found[b].append((an, f['id'], l_))
print("counts", byan)
for b, v in found.items():
    print("bug", b, sorted({(a, i) for a, i, _ in v}))
    # The published pairs (store, load) each pass reports, as the docs count them.
    for a in sorted({a for a, _, _ in v}):
        ls = sorted({l for x, _, l in v if x == a})
        print(f"   {a}: {len(ls)} of {len(BUGS[b])} pairs:", ", ".join(ls))
