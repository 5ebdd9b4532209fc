#!/usr/bin/env python3
"""YCSB-like workload in HawkSet-exp's format (`op;key;value`), as /work/real/gen_workload.py
(60% inserts of distinct 63-bit keys, then 50% reads, 45% updates, 5% deletes of inserted keys),
but each choice takes the LCG's high bits: the low bits of a power-of-two LCG have short periods,
and with T threads taking operations round-robin, `rnd() % len(keys)` made every read, update and
delete of thread t hit a key thread t itself inserted (T = 4).
With --low-bits each choice takes `rnd() % m` instead, the bias of the earlier measurements'
/work/real/ycsb_*.txt (not kept): 400 of 400 non-inserts of a 1,000-operation file on their own
thread's keys, and FAST_FAIR gives the same 33 / 32 store sites on it (session 43).
Usage: ycsb_gen_hi.py N [--low-bits] > w_N.txt"""
import sys
n = int(sys.argv[1])
x = 0x9E3779B97F4A7C15
def rnd():
    global x
    x = (x * 6364136223846793005 + 1442695040888963407) & ((1 << 64) - 1)
    return x >> 1
low_bits = '--low-bits' in sys.argv
def pick(m):
    return rnd() % m if low_bits else (rnd() >> 31) % m
keys = []
seen = set()
ins = n * 6 // 10
while len(keys) < ins:
    k = rnd() or 1
    if k not in seen:
        seen.add(k); keys.append(k)
out = [f"i;{k};{k ^ 0x5555}" for k in keys]
for i in range(n - ins):
    k = keys[pick(len(keys))]
    r = pick(100)
    if r < 50: out.append(f"s;{k}")
    elif r < 95: out.append(f"u;{k};{(k + i) & ((1 << 63) - 1)}")
    else: out.append(f"d;{k}")
print("\n".join(out))
