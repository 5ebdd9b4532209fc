#!/bin/sh
# Rebuild APEX (baotonglu/apex) for ferrite, as docs/analyses/hawkset.md "The real programs (APEX)"
# describes. APEX's sources are public and stay out of this repository: fetch them (commit c49a217,
# the version whose apex_nodes.h lines are HawkSet's bugs.py lines) into $APEX/src:
#   src/core/{apex.h,apex_nodes.h,apex_base.h,apex_fanout_tree.h,apex_log.h}, src/tree.h,
#   src/util/{allocator.h,utils.h}
# and epoch-reclaimer's PMEM GarbageList (vtta/epoch-reclaimer 60f9aa1, garbage_list.{h,cpp},
# made header-only, its two _mm256_stream_si256 item writes replaced by four _mm_stream_si64:
# no AVX here) into $APEX/epoch/garbage_list.h, next to this directory's epoch_manager.h.
# allocator.h, three lines changed: pmemobj_create/pmemobj_open instead of the addr-patch fork's
# pmemobj_create_addr/pmemobj_open_addr, pool_size 1 GiB instead of 40 GiB, pool_name from the
# environment (the driver passes -p to BasePMPool::Initialize anyway).
set -e
APEX=${APEX:-/tmp/apex19/apex}
HERE=$(cd "$(dirname "$0")" && pwd)
CXXFLAGS="-std=c++17 -O0 -g -msse4.2 -mpopcnt -fpermissive -w -DPMEM -DPMDK"
mkdir -p "$APEX/driver"
cp "$HERE/apex_driver.cpp" "$APEX/driver/"
g++ $CXXFLAGS -I"$APEX/src/core" -I"$APEX/epoch" -o "$APEX/apex_driver" "$APEX/driver/apex_driver.cpp" -lpmemobj -lpmem -lpthread
# The HawkSet-style variant: lock operations through named wrappers (config apex.ron).
rm -rf "$APEX/srcw" && cp -r "$APEX/src" "$APEX/srcw"
python3 "$HERE/wrap_locks.py" "$APEX/srcw"
python3 "$HERE/wrap_locks.py" --wrappers >> "$APEX/srcw/util/utils.h"
sed 's#\.\./src/core/apex.h#../srcw/core/apex.h#' "$APEX/driver/apex_driver.cpp" > "$APEX/driver/apex_driver_wrap.cpp"
g++ $CXXFLAGS -I"$APEX/srcw/core" -I"$APEX/epoch" -o "$APEX/apex_driver_wrap" "$APEX/driver/apex_driver_wrap.cpp" -lpmemobj -lpmem -lpthread
