/* pm_insns: exercises each persistence-related instruction once on a PM
 * mapping, one clearly named function per instruction.  Every function stores
 * to its own 64-byte line; the store line carries an "INSN: <name>" marker.
 * Everything is persisted properly (no bugs).  Exit status 0.
 *
 * Usage: pm_insns [POOL]      POOL defaults to /mnt/pmem0/pool
 */
#include "pm.h"

#define POOL_SIZE 4096

/* One 64-byte line per instruction under test. */
struct lines {
    _Alignas(64) uint64_t clwb_line[8];
    _Alignas(64) uint64_t clflushopt_line[8];
    _Alignas(64) uint64_t clflush_line[8];
    _Alignas(64) uint64_t movnti_line[8];
    _Alignas(64) __m128i movntdq_line[4];
    _Alignas(64) uint64_t mfence_line[8];
    _Alignas(64) uint64_t xadd_line[8];
    _Alignas(64) uint64_t cmpxchg_line[8];
    _Alignas(64) uint64_t xchg_line[8];
};

_Static_assert(sizeof(struct lines) == 9 * 64, "one line per instruction");

/* store + clwb + sfence */
__attribute__((noinline)) static void do_clwb(struct lines *l)
{
    l->clwb_line[0] = 0x1111; /* INSN: clwb */
    PM_CLWB(&l->clwb_line[0]);
    PM_SFENCE();
}

/* store + clflushopt + sfence */
__attribute__((noinline)) static void do_clflushopt(struct lines *l)
{
    l->clflushopt_line[0] = 0x2222; /* INSN: clflushopt */
    PM_CLFLUSHOPT(&l->clflushopt_line[0]);
    PM_SFENCE();
}

/* store + clflush (clflush is ordered with respect to stores; no fence needed) */
__attribute__((noinline)) static void do_clflush(struct lines *l)
{
    l->clflush_line[0] = 0x3333; /* INSN: clflush */
    PM_CLFLUSH(&l->clflush_line[0]);
}

/* non-temporal 64-bit store (movnti) + sfence */
__attribute__((noinline)) static void do_movnti(struct lines *l)
{
    PM_MOVNTI64(&l->movnti_line[0], 0x4444); /* INSN: movnti */
    PM_SFENCE();
}

/* non-temporal 128-bit store (movntdq) + sfence */
__attribute__((noinline)) static void do_movntdq(struct lines *l)
{
    __m128i v = _mm_set_epi64x(0x5555, 0x5556);
    PM_MOVNTDQ(&l->movntdq_line[0], v); /* INSN: movntdq */
    PM_SFENCE();
}

/* store + clwb + mfence (mfence orders the clwb like sfence does) */
__attribute__((noinline)) static void do_mfence(struct lines *l)
{
    l->mfence_line[0] = 0x6666; /* INSN: mfence */
    PM_CLWB(&l->mfence_line[0]);
    PM_MFENCE();
}

/* lock xadd + clwb + sfence; returns the old value */
__attribute__((noinline)) static uint64_t do_lock_xadd(struct lines *l)
{
    uint64_t old = __atomic_fetch_add(&l->xadd_line[0], 0x7777, __ATOMIC_SEQ_CST); /* INSN: lock xadd */
    PM_CLWB(&l->xadd_line[0]);
    PM_SFENCE();
    return old;
}

/* lock cmpxchg + clwb + sfence; returns whether the exchange happened */
__attribute__((noinline)) static int do_lock_cmpxchg(struct lines *l)
{
    uint64_t expected = 0;
    int ok = __atomic_compare_exchange_n(&l->cmpxchg_line[0], &expected, 0x8888, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); /* INSN: lock cmpxchg */
    PM_CLWB(&l->cmpxchg_line[0]);
    PM_SFENCE();
    return ok;
}

/* xchg (implicitly locked) + clwb + sfence; returns the old value */
__attribute__((noinline)) static uint64_t do_xchg(struct lines *l)
{
    uint64_t old = __atomic_exchange_n(&l->xchg_line[0], 0x9999, __ATOMIC_SEQ_CST); /* INSN: xchg */
    PM_CLWB(&l->xchg_line[0]);
    PM_SFENCE();
    return old;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    struct lines *l = pm_map(path, POOL_SIZE);

    memset(l, 0, sizeof *l);
    persist(l, sizeof *l);

    do_clwb(l);
    do_clflushopt(l);
    do_clflush(l);
    do_movnti(l);
    do_movntdq(l);
    do_mfence(l);
    uint64_t xadd_old = do_lock_xadd(l);
    int cas_ok = do_lock_cmpxchg(l);
    uint64_t xchg_old = do_xchg(l);

    printf("clwb: %llx\n", (unsigned long long)l->clwb_line[0]);
    printf("clflushopt: %llx\n", (unsigned long long)l->clflushopt_line[0]);
    printf("clflush: %llx\n", (unsigned long long)l->clflush_line[0]);
    printf("movnti: %llx\n", (unsigned long long)l->movnti_line[0]);
    uint64_t nt[2];
    memcpy(nt, &l->movntdq_line[0], sizeof nt);
    printf("movntdq: %llx %llx\n", (unsigned long long)nt[1], (unsigned long long)nt[0]);
    printf("mfence: %llx\n", (unsigned long long)l->mfence_line[0]);
    printf("lock xadd: old %llx new %llx\n", (unsigned long long)xadd_old,
           (unsigned long long)l->xadd_line[0]);
    printf("lock cmpxchg: ok %d new %llx\n", cas_ok, (unsigned long long)l->cmpxchg_line[0]);
    printf("xchg: old %llx new %llx\n", (unsigned long long)xchg_old,
           (unsigned long long)l->xchg_line[0]);
    return 0;
}
