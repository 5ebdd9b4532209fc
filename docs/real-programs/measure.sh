#!/bin/sh
# Peak RSS and CPU of ferrite on the real programs: --analyses none, the default, pmrace, and the
# three race passes. Usage: REAL=DIR measure.sh FERRITE (DIR holds pmasstree/, part/, workloads/,
# configs/part.ron and runs/, as docs/analyses/hawkset.md lays them out).
F=${1:-ferrite}
cd "${REAL:-.}"
for prog in pmasstree part; do
  if [ $prog = part ]; then W=workloads/ycsb_1000_noupd.txt; C="--config configs/part.ron"; else W=workloads/ycsb_1000.txt; C=""; fi
  for a in none default pmrace hawkset,vardalith,pmrace; do
    if [ $a = default ]; then A=""; else A="--analyses $a"; fi
    /usr/bin/time -f "$prog $a: %e s wall, %U s user, %M KB peak RSS" $F run --quiet $A $C --report runs/m-$prog-$a.json -- $prog/example -t 4 -p /mnt/pmem0/$prog -i $W -s 1024 > /dev/null 2> runs/m-$prog-$a.err
    tail -1 runs/m-$prog-$a.err
  done
done
