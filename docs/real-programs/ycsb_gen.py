#!/usr/bin/env python3
"""YCSB-like load for HawkSet-exp's patched drivers: one `op;key;value` per line.
N ops, each (while fewer than 8 keys exist: an insert) an insert of a fresh key (40%), an
update of a key inserted earlier (15%), a delete of one (10%) or a read of one (35%). Keys are random 10-digit
integers below 2^31 (P-Masstree parses them with atoi, P-ART uses the digits as a string key).
With --no-updates the updates
become reads (P-ART's driver inserts an update, and ROWEX ART does not take a duplicate key).
Deterministic: a fixed seed. Usage: gen.py N [--no-updates] > ycsb_N.txt"""
import random, sys
n = int(sys.argv[1]); noupd = '--no-updates' in sys.argv; rng = random.Random(19)
keys = []
for _ in range(n):
    x = rng.random()
    if len(keys) < 8 or x < 0.4:
        k = rng.randrange(10**9, 2**31 - 1); keys.append(k)
        print(f"i;{k};{rng.randrange(1, 2**31 - 1)}")
    elif x < 0.55:
        if noupd:
            print(f"s;{rng.choice(keys)};")
        else:
            print(f"u;{rng.choice(keys)};{rng.randrange(1, 2**31 - 1)}")
    elif x < 0.65:
        print(f"d;{rng.choice(keys)};")
    else:
        print(f"s;{rng.choice(keys)};")
