/* ext_pshared_lock: locks stored in the PM pool itself (built -O2), as programs that share a
 * mapped file between processes do: a pthread mutex initialised PTHREAD_PROCESS_SHARED guards an
 * append-only journal, a pthread spinlock (pshared) guards an audit counter, both in the pool;
 * recovery re-initialises both locks (their durable state is meaningless after a crash) before
 * it reads. Appenders take the mutex, write and persist the entry at `count`, then bump and
 * persist `count`, unlock, and bump and persist their own `appended` counter; the audit counter
 * counts appends under the spinlock. The invariant: every entry below `count` is written, and
 * `count` is at least the sum of the durable `appended` counters.
 *   - BUG (without FIXED): the archiver thread appends without taking the mutex (NOLOCK_BUG): its
 *     load and store of `count` race with the tellers' (a data race), an append can overwrite
 *     another one's slot and lose a count, and the tellers read a count the archiver has not yet
 *     persisted.
 *   - FIXED (ext_pshared_lock_fixed): the archiver takes the mutex too.
 * Usage: ext_pshared_lock [POOL]        formats and runs
 *        ext_pshared_lock POOL recover  `recovery ok: ...` (exit 0) or `recovery: ...` (1) */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#pragma GCC target("clwb")

#define TELLERS 2
#define ROUNDS 4
#define THREADS (TELLERS + 1)
#define MAX (THREADS * ROUNDS)
#define MAGIC 0x50534c4bu

struct pool {
    uint64_t magic;
    uint64_t pad0[7];
    pthread_mutex_t mutex; /* PTHREAD_PROCESS_SHARED, re-initialised by recovery */
    pthread_spinlock_t spin;
    uint64_t audits __attribute__((aligned(64))); /* appends counted under the spinlock */
    uint64_t count __attribute__((aligned(64)));  /* entries written, under the mutex */
    struct {
        uint64_t n;
        uint64_t pad[7];
    } appended[THREADS] __attribute__((aligned(64)));
    uint64_t entries[MAX];
};

static struct pool *pool;

static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static void init_locks(void)
{
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&pool->mutex, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_spin_init(&pool->spin, PTHREAD_PROCESS_SHARED);
}

static void audit(unsigned t, unsigned i)
{
    pool->appended[t].n = i + 1; /* APPENDED_STORE */
    persist(&pool->appended[t].n, sizeof(uint64_t));
    pthread_spin_lock(&pool->spin);
    pool->audits++; /* AUDIT_STORE */
    persist(&pool->audits, sizeof pool->audits);
    pthread_spin_unlock(&pool->spin);
}

static void *teller(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&pool->mutex);
        uint64_t at = pool->count; /* COUNT_LOAD: teller */
        pool->entries[at] = (t + 1) * 100 + i + 1; /* ENTRY_STORE: teller */
        persist(&pool->entries[at], sizeof(uint64_t));
        pool->count = at + 1; /* COUNT_STORE: teller */
        persist(&pool->count, sizeof pool->count);
        pthread_mutex_unlock(&pool->mutex);
        audit(t, i);
        sched_yield();
    }
    return NULL;
}

static void *archiver(void *arg)
{
    for (unsigned i = 0; i < ROUNDS; i++) {
#ifdef FIXED
        pthread_mutex_lock(&pool->mutex); /* FIX: the archiver locks too */
#endif
        uint64_t at = pool->count; /* NOLOCK_BUG: COUNT_LOAD without the mutex */
        pool->entries[at] = 900 + i + 1; /* NOLOCK_BUG: ENTRY_STORE without the mutex */
        persist(&pool->entries[at], sizeof(uint64_t));
        pool->count = at + 1; /* NOLOCK_BUG: COUNT_STORE without the mutex */
        persist(&pool->count, sizeof pool->count);
#ifdef FIXED
        pthread_mutex_unlock(&pool->mutex);
#endif
        audit(TELLERS, i);
        sched_yield();
    }
    return arg;
}

static int recover(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    init_locks();
    pthread_mutex_lock(&pool->mutex);
    uint64_t count = pool->count, appended = 0;
    for (unsigned t = 0; t < THREADS; t++)
        appended += pool->appended[t].n;
    int bad = count > MAX || count < appended;
    for (uint64_t i = 0; !bad && i < count; i++)
        bad = pool->entries[i] == 0;
    pthread_mutex_unlock(&pool->mutex);
    if (bad) {
        printf("recovery: count %llu, %llu appends done\n", (unsigned long long)count, (unsigned long long)appended);
        return 1;
    }
    printf("recovery ok: %llu entries\n", (unsigned long long)count);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/psharedlock";
    int recovering = argc > 2 && strcmp(argv[2], "recover") == 0;
    int fd = open(path, recovering ? O_RDWR : O_RDWR | O_CREAT, 0644);
    struct stat st;
    if (recovering && (fd < 0 || fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(struct pool))) {
        printf("recovery ok: no pool\n");
        return 0;
    }
    if (fd < 0 || (!recovering && ftruncate(fd, sizeof(struct pool)) != 0)) {
        perror(path);
        return 1;
    }
    pool = mmap(NULL, sizeof(struct pool), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (pool == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    if (recovering)
        return recover();
    memset(pool, 0, sizeof *pool);
    init_locks();
    persist(pool, sizeof *pool);
    pool->magic = MAGIC;
    persist(&pool->magic, sizeof pool->magic);
    pthread_t th[TELLERS + 1];
    for (uintptr_t t = 0; t < TELLERS; t++)
        pthread_create(&th[t], NULL, teller, (void *)t);
    pthread_create(&th[TELLERS], NULL, archiver, NULL);
    for (int t = 0; t <= TELLERS; t++)
        pthread_join(th[t], NULL);
    /* Not the count: natively the unlocked archiver can lose an append (schedule-dependent). */
    printf("journal written\n");
    return 0;
}
