#!/bin/sh
# Rebuild TurboHash's PMDK version for ferrite, as docs/analyses/hawkset.md "The real programs
# (TurboHash)" describes. TurboHash's sources are public and stay out of this repository: fetch
# hansonzhao007/TurboHash at 2d7d7b3 (HawkSet's commit; its src/turbo/turbo_hash_pmem_pmdk.h and
# turbo_pmdk_pptr.h are last changed in 4e27361, turbo_epoche.h in f62f50b) into $TURBO/src:
#   src/turbo/{turbo_hash_pmem_pmdk.h,turbo_pmdk_pptr.h,turbo_epoche.h}
# (src/util/logger.h is replaced by this directory's stand-in: only its ERROR macro is used).
# Two patches, each keeping every line number: the pool path (two `RegistPool` calls) and the
# pool size (96 GiB) read the driver's turbo_pool_path / turbo_pool_size. No AVX: the header's
# only vector code is SSE2 (_mm_cmpeq_epi8/_mm_movemask_epi8; the AVX-512 branch tests
# __AVX512__, which no compiler defines). Debug build, as HawkSet's Dockerfile (-O0 -g).
# Needs libpmemobj-dev and libtbb-dev (the epoch reclamation's enumerable_thread_specific).
set -e
TURBO=${TURBO:-/work/turbo47}
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$TURBO/build" && mkdir -p "$TURBO/build/turbo" "$TURBO/build/util"
cp "$TURBO/src/src/turbo/turbo_pmdk_pptr.h" "$TURBO/src/src/turbo/turbo_epoche.h" "$TURBO/build/turbo/"
sed -e 's#RegistPool (0, "/mnt/pmem/turbohash",#RegistPool (0, turbo_pool_path,#' \
    -e 's#^\#define TURBO_PMEM_LOG_SIZE ((96LU << 30))#\#define TURBO_PMEM_LOG_SIZE (turbo_pool_size)#' \
    "$TURBO/src/src/turbo/turbo_hash_pmem_pmdk.h" > "$TURBO/build/turbo/turbo_hash_pmem_pmdk.h"
[ "$(wc -l < "$TURBO/build/turbo/turbo_hash_pmem_pmdk.h")" = 2676 ]
[ "$(grep -c turbo_pool_ "$TURBO/build/turbo/turbo_hash_pmem_pmdk.h")" = 3 ]
cp "$HERE/logger.h" "$TURBO/build/util/logger.h"
for p in turbo_driver turbo_meta_crash; do
  cp "$HERE/$p.cpp" "$TURBO/build/"
  g++ -std=c++17 -O0 -g -w -I"$TURBO/build" -o "$TURBO/$p" "$TURBO/build/$p.cpp" -lpmemobj -ltbb -lpthread
done
