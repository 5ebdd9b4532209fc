#!/usr/bin/env python3
"""Per finding of a ferrite report on turbo_driver: pass, store line (and its caller's line in
turbo_hash_pmem_pmdk.h), load lines, occurrences; and whether HawkSet's bug #3 (store
turbo_hash_pmem_pmdk.h:2238, load :2546, matched as HawkSet's bugs.py matches: the line anywhere
in the store's / a load's call stack) is reported by each pass. Usage: summarise_turbo.py REPORT"""
import json, sys
H = 'turbo_hash_pmem_pmdk.h'
r = json.load(open(sys.argv[1]))
def lines(loc):
    return [f['line'] for f in loc.get('backtrace', []) if (f.get('file') or '').endswith(H)]
bug3 = {}
counts = {}
for f in r['findings']:
    a = f['analysis']
    counts[a] = counts.get(a, 0) + 1
    stores = [l for l in f['locations'] if l['role'] == 'store']
    loads = [l for l in f['locations'] if l['role'] == 'load']
    sl = sorted({x for s in stores for x in lines(s)})
    top = f"{(stores[0].get('file') or '?').split('/')[-1]}:{stores[0].get('line')}" if stores else '?'
    ll = sorted({l['line'] for l in loads if (l.get('file') or '').endswith(H)})
    lstack = {x for l in loads for x in lines(l)}
    hit = 2238 in sl and 2546 in lstack
    if hit:
        bug3[a] = True
    print(f"{f['id']:3} {a:9} store {top} (header lines in its stack {sl}) loads {ll} x{f.get('occurrences', 1)}{'  <- bug #3' if hit else ''}")
print('findings per pass:', counts)
print('bug #3 (2238 -> 2546) found by:', sorted(bug3) or 'none')
