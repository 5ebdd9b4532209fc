/* hs_slot_claim: APEX's per-thread log slots (LogArray::assign_log / return_log), small.  A
 * slot's in_use word in PM is claimed by a compare-and-swap from 0 to the thread's id and given
 * back by a plain store of 0: the access pattern of a lock, but no slot is ever held by two
 * threads (a thread that finds a slot taken tries the next; every worker holds its slot until
 * all have one).  Each worker first scans the slots
 * for one already its own (reading every slot's in_use, without holding it), claims one, writes
 * its log record there, reads the others' records, and gives its slot back.
 *   - BUG (this file): in_use is never persisted (APEX: "0 means not in use", and recovery
 *     replays the logs whose in_use is non-zero), so the other threads' scans read a value that
 *     is not durable: persistence-induced races on in_use (the claim's and the release's
 *     stores, the scan's load), and on the records, read by the others without any lock.
 *   - FIXED (hs_slot_claim_fixed, built with FIXED): every claim, record, scan and release is
 *     made under a registry mutex and persisted before it is unlocked: no race.
 * The slot is no lock between threads (nobody else ever holds it): its word's accesses are data,
 * not synchronisation, and the races on in_use are reported.
 * Usage: hs_slot_claim [POOL]; prints the number of records read, exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define NSLOTS 8
#define THREADS 4

struct slot {
    volatile uint64_t in_use; /* 0 free, else the owner's id: in PM */
    volatile uint64_t record;
    uint64_t pad[6];
};

_Static_assert(sizeof(struct slot) == 64, "a slot is one line");

static struct slot *slots;
static volatile uint64_t sink;
#ifdef FIXED
static pthread_mutex_t reg = PTHREAD_MUTEX_INITIALIZER;
#define REG_LOCK() pthread_mutex_lock(&reg)
#define REG_UNLOCK() pthread_mutex_unlock(&reg)
#define PERSIST(p) do { PM_CLWB(p); PM_SFENCE(); } while (0)
#else
#define REG_LOCK() ((void)0)
#define REG_UNLOCK() ((void)0)
#define PERSIST(p) ((void)0)
#endif

static struct slot *assign_log(uint64_t me)
{
    REG_LOCK();
    for (int i = 0; i < NSLOTS; i++) {
        if (slots[i].in_use == me) { /* LOAD: the scan for a slot already mine (apex_log.h:170) */
            REG_UNLOCK();
            return &slots[i];
        }
    }
    for (;;) {
        for (int i = 0; i < NSLOTS; i++) {
            uint64_t expected = 0;
            if (__atomic_compare_exchange_n(&slots[i].in_use, &expected, me, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
                PERSIST(&slots[i].in_use);
                REG_UNLOCK();
                return &slots[i];
            }
        }
    }
}

static void return_log(struct slot *s, uint64_t me)
{
    REG_LOCK();
    if (s->in_use == me) {
        s->in_use = 0; /* STORE: the slot given back, never persisted (apex_log.h:192) */
        PERSIST(&s->in_use);
    }
    REG_UNLOCK();
}

static volatile int claimed; /* DRAM: how many workers hold a slot */

static void *worker(void *arg)
{
    uint64_t me = (uint64_t)(uintptr_t)arg + 1;
    struct slot *s = assign_log(me);
    /* Hold the slot until every worker holds one, as APEX's threads hold theirs for the whole
     * workload: no slot is given back and claimed again by another thread. */
    __atomic_fetch_add(&claimed, 1, __ATOMIC_SEQ_CST);
    while (claimed < THREADS)
        sched_yield();
    REG_LOCK();
    s->record = me * 100; /* RECORD: the log record, written while holding the slot */
    PM_CLWB(&s->record); PM_SFENCE();
    REG_UNLOCK();
    sched_yield();
    REG_LOCK();
    for (int i = 0; i < NSLOTS; i++)
        if (slots[i].in_use != 0)
            sink += slots[i].record; /* READ: the others' records, read without their slots */
    REG_UNLOCK();
    sched_yield();
    return_log(s, me);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    slots = pm_map(path, NSLOTS * sizeof(struct slot));
    for (int i = 0; i < NSLOTS; i++) {
        slots[i].in_use = 0;
        slots[i].record = 0;
    }
    persist(slots, NSLOTS * sizeof(struct slot));
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("%llu\n", (unsigned long long)(sink != 0));
    return 0;
}
