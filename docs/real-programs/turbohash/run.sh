#!/bin/sh
# The measurements of docs/analyses/hawkset.md "The real programs (TurboHash)": 1,000, 10,000 and
# 100,000 operations, with and without the lock configuration, hawkset, vardalith and pmrace in one
# run each; /usr/bin/time's user CPU and peak RSS at the end of each .err, the findings summarised.
# Usage: TURBO=DIR PMDK_CFG=pmdk.cfg run.sh FERRITE [OPS...]   (DIR as build.sh left it)
set -e
F=${1:-ferrite}; shift || true
TURBO=${TURBO:-/work/turbo47}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$TURBO/runs"
CFG="--config $HERE/turbohash.cfg"
[ -n "$PMDK_CFG" ] && CFG="$CFG --config $PMDK_CFG"
for n in ${@:-1000 10000 100000}; do
  for c in cfg nocfg; do
    if [ $c = cfg ]; then C=$CFG; else C=""; fi
    R="$TURBO/runs/$c-$n"
    /usr/bin/time -f "%e s wall, %U s user, %M KB peak RSS" "$F" run --analyses hawkset,vardalith,pmrace $C \
      --max-host-memory 6G --report "$R.json" -- "$TURBO/turbo_driver" -p /mnt/pmem0/th -n "$n" > "$R.out" 2> "$R.err" || true
    echo "== $c $n: $(tail -1 "$R.err")"
    python3 "$HERE/summarise_turbo.py" "$R.json" | tail -2
  done
done
